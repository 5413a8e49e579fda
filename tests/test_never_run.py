"""Modules and classes no run of the project reaches (issue 35): a torch attention module whose every binding is
provably never run cannot mix samples (info, saying so); a batch-first bug inside a class whose every instance the
project builds goes where nothing runs it is latent (a warning that says no run reaches it, no fix). Where the
proof is incomplete (another file, a name built at run time, a helper that calls what it is given, a class never
built in the project) the finding stays what it was.
"""

from __future__ import annotations

import pytest
from test_mha001_layout import assert_batch_first_error, assert_unknown_warning
from test_project import mha001, write

from mhalint.finding import HEADLINE_LIMIT, Severity

BLOCK = """\
    import copy
    import torch.nn as nn

    def _clones(module, n):
        return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])

    class Block(nn.Module):
        def __init__(self, d=64, h=8, memory=False):
            super().__init__()
            {build}
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            if self.spare is not None:
                print(sum(p.numel() for p in self.spare.parameters()))
            {run}
            return self.proj(x)
"""


def block(build: str, run: str = "pass") -> str:
    return BLOCK.replace("{build}", build).replace("{run}", run)


def assert_never_run(finding, stored: str) -> None:
    assert finding.severity == Severity.INFO, finding.message
    assert finding.message.endswith(f"`{stored}` is never called in the project; called, it would read (L, N, E)")
    assert len(finding.message) <= HEADLINE_LIMIT and finding.fix is None
    assert "nothing in the project calls it" in " ".join(finding.evidence)
    assert "layout" not in dict(finding.arguments)


# ---- 1. a torch module never run: info ---------------------------------------------------------------------------
@pytest.mark.parametrize(("build", "stored"), [
    pytest.param("self.spare = nn.MultiheadAttention(d, h) if memory else None", "self.spare", id="attribute"),
    pytest.param("self.spare = nn.MultiheadAttention(d, h)  # spare: kept for later", "self.spare",
                 id="named-in-a-comment"),
    pytest.param("layer = nn.MultiheadAttention(d, h)\n            self.spare = _clones(layer, 2)", "self.spare",
                 id="clone-helper"),
    pytest.param("self.spare = nn.ModuleList([nn.MultiheadAttention(d, h) for _ in range(2)])", "self.spare",
                 id="module-list"),
])
def test_a_module_stored_where_nothing_runs_it_is_info(tmp_path, build, stored):
    write(tmp_path, {"pyproject.toml": "", "block.py": block(build), "train.py": "from block import Block\n"})
    (finding,) = mha001(tmp_path)
    assert_never_run(finding, stored)


@pytest.mark.parametrize(("run", "missing"), [
    pytest.param("if self.spare and x is not None:\n                print(f'{self.spare}')\n            del self.spare",
                 "", id="condition-format-del"),
    pytest.param('"""spare: kept for later."""\n            spare = 3\n            print(spare)', "",
                 id="docstring-and-a-variable-of-that-name"),
    pytest.param("chosen = self.spare or self.proj\n            x = chosen(x)", "`self.spare` is handed on (line 16)",
                 id="or-gives-it-on"),
])
def test_reads_that_only_inspect_or_name_something_else_leave_it_never_run(tmp_path, run, missing):
    write(tmp_path, {"pyproject.toml": "", "block.py": block("self.spare = nn.MultiheadAttention(d, h)", run),
                     "train.py": "import torch\n"})
    (finding,) = mha001(tmp_path)
    if missing:
        assert_unknown_warning(finding, missing)
    else:
        assert_never_run(finding, "self.spare")


@pytest.mark.parametrize(("other", "never_run"), [
    pytest.param("from block import Block\nblock = Block()\nprint(block.spare_bias, block.self_spare)\n", True,
                 id="longer-names"),
    pytest.param("from block import Block\nblock = Block()\nblock.spare(1, 2, 3)\n", False, id="the-name"),
])
def test_another_file_reaches_the_attribute_only_by_its_whole_name(tmp_path, other, never_run):
    write(tmp_path, {"pyproject.toml": "", "block.py": block("self.spare = nn.MultiheadAttention(d, h)"),
                     "train.py": other})
    (finding,) = mha001(tmp_path)
    if never_run:
        assert_never_run(finding, "self.spare")
    else:
        assert_unknown_warning(finding, "`self.spare` is never called in this file")


@pytest.mark.parametrize(("build", "run", "missing"), [
    pytest.param("self.spare = nn.MultiheadAttention(d, h)", "print(getattr(self, 'spare'))",
                 "`self.spare` may be reached by name (line 16)", id="named-in-a-string"),
    pytest.param("self.spare = nn.MultiheadAttention(d, h)",
                 "for child in self.children():\n                x = child(x)",
                 "`self.spare` may be reached by name (line 16)", id="children-called-in-a-loop"),
    pytest.param("self.spare = nn.MultiheadAttention(d, h)",
                 "for name in self.names:\n                x = getattr(self, name)(x)",
                 "`self.spare` may be reached by name (line 17)", id="computed-getattr"),
    pytest.param("layer = nn.MultiheadAttention(d, h)\n            self.spare = _keep(layer, 2)",
                 "pass", "`layer` is passed to `_keep` (line 11)", id="helper-that-hands-it-on"),
])
def test_a_module_a_name_built_at_run_time_or_a_helper_may_run_stays_a_warning(tmp_path, build, run, missing):
    helper = "\n    def _keep(module, n):\n        KEPT.append(module)\n        return module\n"
    write(tmp_path, {"pyproject.toml": "", "block.py": block(build, run) + helper,
                     "train.py": "from block import Block\n"})
    (finding,) = mha001(tmp_path)
    assert_unknown_warning(finding, missing)


SCRIPT = """\
    import torch.nn as nn
    attn = nn.MultiheadAttention(64, 8)
    print(attn)
    for name, weight in attn.named_parameters():
        print(name, weight.shape)
"""
MAIN = "if __name__ == '__main__':\n" + SCRIPT.replace("    ", "        ")


def test_a_script_s_module_only_printed_is_info(tmp_path):
    write(tmp_path, {"pyproject.toml": "", "tour.py": MAIN, "other.py": "import torch\n"})
    (finding,) = mha001(tmp_path)
    assert_never_run(finding, "attn")


def test_a_module_level_module_code_outside_the_project_may_import_stays_a_warning(tmp_path):
    write(tmp_path, {"pyproject.toml": "", "tour.py": SCRIPT, "other.py": "import torch\n"})
    (finding,) = mha001(tmp_path)
    assert_unknown_warning(finding, "`attn` is never called in the project")
    assert "`attn` is only built and inspected: nothing in the project calls it, though code outside it may " \
           "import it" in finding.evidence


@pytest.mark.parametrize("other", ["import tour\ntour.attn(1, 2, 3)\n", "from tour import attn\n"])
def test_a_script_s_module_another_file_may_reach_stays_a_warning(tmp_path, other):
    write(tmp_path, {"pyproject.toml": "", "tour.py": SCRIPT, "other.py": other})
    (finding,) = mha001(tmp_path)
    assert_unknown_warning(finding, "`attn` is never called in this file")


def test_a_module_never_called_in_a_file_checked_alone_stays_a_warning(lint):
    """Without a project, other files cannot be ruled out."""
    (finding,) = lint(SCRIPT, "MHA001", "info")
    assert_unknown_warning(finding, "`attn` is never called in this file")


# ---- 2. a bug in a class no run reaches: a warning ---------------------------------------------------------------
LEVEL = """\
    import copy
    import torch.nn as nn

    def _get_clones(module, n):
        return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])

    {decorator}class Level(nn.Module):
        def __init__(self, d=64, h=8):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, h)

        def forward(self, src):
            bz, c, h, w = src.shape
            seq = src.flatten(2).permute(0, 2, 1)
            return self.attn(seq, seq, seq)[0]

    class Model(nn.Module):
        def __init__(self, n=2):
            super().__init__()
            level = Level()
            self.levels = _get_clones(level, n)
            self.head = nn.Linear(64, 64)

        def forward(self, src):
            {run}
            return self.head(src)
"""


def level(run: str = "pass", decorator: str = "") -> str:
    return LEVEL.replace("{run}", run).replace("{decorator}", decorator)


@pytest.mark.parametrize("built", [
    pytest.param("level = Level()\n            self.levels = _get_clones(level, n)", id="clone-helper"),
    pytest.param("self.levels = nn.ModuleList([Level() for _ in range(n)])\n", id="module-list"),
    pytest.param("self.levels = nn.Sequential(*[Level()] * n)\n", id="repeated-list"),
])
def test_a_bug_in_a_class_cloned_where_nothing_runs_it_is_a_latent_warning(tmp_path, built):
    source = level().replace("level = Level()\n            self.levels = _get_clones(level, n)", built)
    write(tmp_path, {"pyproject.toml": "", "model.py": source, "train.py": "from model import Model\n"})
    (finding,) = mha001(tmp_path)
    assert finding.severity == Severity.WARNING and finding.fix is None, finding.message
    assert finding.message.startswith("nn.MultiheadAttention gets batch-first data (`src.flatten(2).permute(0,")
    assert finding.message.endswith("; no run reaches it (`self.levels` is never called)")
    assert "every `Level` the project builds (line 20) ends in `self.levels`, which nothing in the project calls" \
        in finding.evidence
    assert "`bz, c, h, w = src.shape` at line 13" in " ".join(finding.evidence)


@pytest.mark.parametrize(("run", "decorator", "other"), [
    pytest.param("for layer in self.levels:\n                src = layer(src)", "", "", id="the-clones-run"),
    pytest.param("pass", "@REGISTRY.register()\n    ", "", id="registered-class"),
    pytest.param("pass", "", "from model import Level\nLevel()(1)\n", id="another-file-builds-it"),
    pytest.param("print({'type': 'Level'})", "", "", id="named-in-a-string"),
    pytest.param("print(self.levels)\n            return Level()(src)", "", "", id="also-built-and-run"),
])
def test_a_bug_in_a_class_a_run_may_reach_stays_an_error(tmp_path, run, decorator, other):
    source = level(run, decorator)
    if decorator:
        source = source.replace("import torch.nn as nn\n", "import torch.nn as nn\n    from registry import REGISTRY\n")
    write(tmp_path, {"pyproject.toml": "", "model.py": source, "train.py": other or "from model import Model\n"})
    (finding,) = mha001(tmp_path)
    assert_batch_first_error(finding, "bz, c, h, w = src.shape")
    assert finding.fix is not None


def test_a_bug_in_a_class_the_project_never_builds_stays_an_error(tmp_path):
    """A library or a trainer may build it and call it from outside: no proof."""
    source = level().replace("            level = Level()\n            self.levels = _get_clones(level, n)\n", "")
    write(tmp_path, {"pyproject.toml": "", "model.py": source, "train.py": "from model import Model\n"})
    (finding,) = mha001(tmp_path)
    assert_batch_first_error(finding, "bz, c, h, w = src.shape")


DRAFT = """\
    import torch.nn as nn
    from data import load

    class Draft(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(64, 8)

        def forward(self, x):
            return self.layer(x)

    if __name__ == "__main__":
        draft = Draft()
        x = load()
        {run}
"""


def test_a_module_whose_class_no_run_reaches_is_info(tmp_path):
    """Its calls are in the class, but the class's only instance is never called: nothing runs the module."""
    write(tmp_path, {"pyproject.toml": "", "draft.py": DRAFT.replace("{run}", "# print(draft(x).shape)"),
                     "data.py": "def load():\n    return None\n"})
    (finding,) = mha001(tmp_path)
    assert finding.severity == Severity.INFO, finding.message
    assert finding.message == ("nn.TransformerEncoderLayer is built without batch_first: no run of the project "
                               "reaches it (`draft` is never called); called, it would read (L, N, E)")
    assert "every `Draft` the project builds (line 13) ends in `draft`, which nothing in the project calls" \
        in finding.evidence


def test_a_module_whose_class_is_run_keeps_its_warning(tmp_path):
    write(tmp_path, {"pyproject.toml": "", "draft.py": DRAFT.replace("{run}", "print(draft(x).shape)"),
                     "data.py": "def load():\n    return None\n"})
    (finding,) = mha001(tmp_path)
    assert finding.severity == Severity.WARNING and "no run" not in finding.message, finding.message


@pytest.mark.parametrize(("build", "helper", "missing"), [
    pytest.param("self.spare = nn.MultiheadAttention(d, h)\n            print(size(self.spare))",
                 "def size(module):\n        return sum(p.numel() for p in module.parameters())\n", "",
                 id="a-helper-that-inspects-it"),
    pytest.param("self.spare = nn.MultiheadAttention(d, h)\n            keep(self.spare)",
                 "def keep(module):\n        KEPT.append(module)\n", "`self.spare` is passed to `keep` (line 14)",
                 id="a-helper-that-hands-it-on"),
    pytest.param("self.spare = nn.ModuleDict({'attn': nn.MultiheadAttention(d, h)})", "", "", id="module-dict"),
])
def test_what_a_helper_of_the_file_does_with_it_decides(tmp_path, build, helper, missing):
    source = block(build).replace("    class Block", f"    {helper}\n    class Block")
    write(tmp_path, {"pyproject.toml": "", "block.py": source, "train.py": "import torch\n"})
    (finding,) = mha001(tmp_path)
    if missing:
        assert_unknown_warning(finding, missing)
    else:
        assert_never_run(finding, "self.spare")


SUBCLASS = """\
    import torch.nn as nn

    class Attn(nn.MultiheadAttention):
        def __init__(self):
            super().__init__(64, 8)

    {built}
"""


@pytest.mark.parametrize(("built", "never_run"), [
    pytest.param("if __name__ == '__main__':\n        spare = Attn()\n        print(spare)", True,
                 id="built-and-printed"),
    pytest.param("", False, id="never-built"),
])
def test_a_subclass_whose_instances_nothing_runs_is_info(tmp_path, built, never_run):
    write(tmp_path, {"pyproject.toml": "", "attn.py": SUBCLASS.replace("{built}", built),
                     "train.py": "import torch\n"})
    (finding,) = mha001(tmp_path)
    if never_run:
        assert finding.severity == Severity.INFO, finding.message
        assert finding.message == ("nn.MultiheadAttention is built without batch_first: no run of the project "
                                   "reaches it (`spare` is never called); called, it would read (L, N, E)")
    else:
        assert_unknown_warning(finding, "no call of it is found in this file")
