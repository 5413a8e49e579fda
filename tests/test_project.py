"""Across files (mhalint/analysis/project.py): a module defined in one file and called in another, with the
layout that call gives it; imports resolved as Python would (relative, packages, a script directory); and the
findings cache, which must recheck a file when another file its analysis read changes."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wrapped import CALLER, ENCODER, MODEL_AROUND

from mhalint.analysis import project as project_module
from mhalint.analysis.project import _FROM_IMPORT, Project, _from_imports, module_name, project_root
from mhalint.finding import Severity
from mhalint.rule import load_rules
from mhalint.run.cache import Cache
from mhalint.run.engine import Checker

MODEL = """\
    import torch.nn as nn

    class Encoder(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(dim, heads, batch_first=True)

        def forward(self, src):
            return self.layer(src)
"""

TRAIN = """\
    import torch
    from {module} import Encoder

    def step(a, b):
        B, T, C = a.shape
        both = torch.cat([a, b], dim=1)
        encoder = Encoder(64, 8)
        return encoder(both{op})
"""


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def mha001(root: Path, cache: Cache | None = None):
    rules = [load_rules()["MHA001"]]
    return [f for f in Checker(rules).check_paths([root], cache=cache, jobs=1).findings if f.code == "MHA001"]


@pytest.mark.parametrize(("files", "train"), [
    pytest.param({"model.py": MODEL}, ("train.py", "model"), id="script-directory"),
    pytest.param({"pkg/__init__.py": "", "pkg/model.py": MODEL}, ("pkg/train.py", ".model"), id="relative"),
    pytest.param({"pkg/__init__.py": "", "pkg/model.py": MODEL}, ("run.py", "pkg.model"), id="package"),
    pytest.param({"src/pkg/__init__.py": "", "src/pkg/model.py": MODEL}, ("scripts/train.py", "pkg.model"),
                 id="src-layout"),
])
def test_sequence_first_data_from_another_file_into_a_batch_first_layer_is_an_error(tmp_path, files, train):
    path, module = train
    write(tmp_path, {**files, path: TRAIN.format(module=module, op=".transpose(0, 1)")})
    [finding] = mha001(tmp_path)
    assert finding.path.endswith("model.py") and finding.severity == Severity.ERROR
    assert " gets sequence-first data (`both.transpose(0, 1)`, " in finding.message
    assert f"{Path(path).name}:8)" in finding.message
    evidence = " | ".join(finding.evidence)
    assert "`B, T, C = a.shape` at " in evidence and f"{Path(path).name}:5" in evidence


def test_worker_processes_follow_a_class_into_another_file_as_one_process_does(tmp_path, monkeypatch):
    """The import index is built from the bytes the run read, before the workers fork; a run given a relative
    path, in workers, finds what a serial one finds."""
    from mhalint.run import parallel
    fillers = {f"other{i}.py": "import torch.nn as nn\nm = nn.MultiheadAttention(64, 8, batch_first=True)\n"
               for i in range(parallel.PARALLEL_FROM)}  # enough files to parse for the pool to be used
    write(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": MODEL, **fillers,
                     "pkg/train.py": TRAIN.format(module=".model", op=".transpose(0, 1)")})
    monkeypatch.chdir(tmp_path)
    checker = Checker([load_rules()["MHA001"]])
    serial, parallel = (checker.check_paths(["."], jobs=jobs).findings for jobs in (1, 2))
    assert [(f.path, f.line, f.severity) for f in parallel] == [(f.path, f.line, f.severity) for f in serial]
    assert [Path(f.path).name for f in parallel if f.severity == Severity.ERROR] == ["model.py"]


def test_batch_first_data_from_another_file_is_clean(tmp_path):
    write(tmp_path, {"model.py": MODEL, "train.py": TRAIN.format(module="model", op="")})
    assert mha001(tmp_path) == []


def test_a_same_named_class_from_another_module_is_not_followed(tmp_path):
    write(tmp_path, {"model.py": MODEL, "other.py": MODEL,
                     "train.py": TRAIN.format(module="other", op=".transpose(0, 1)")})
    found = mha001(tmp_path)
    assert [f.path.endswith("other.py") for f in found] == [True]


def test_the_file_alone_knows_nothing_of_its_callers(tmp_path):
    write(tmp_path, {"model.py": MODEL, "train.py": TRAIN.format(module="model", op=".transpose(0, 1)")})
    assert mha001(tmp_path / "model.py") == []


def test_check_source_after_a_run_sees_only_its_own_file(tmp_path):
    write(tmp_path, {"model.py": MODEL, "train.py": TRAIN.format(module="model", op=".transpose(0, 1)")})
    checker = Checker([load_rules()["MHA001"]])
    assert len(checker.check_paths([tmp_path], jobs=1).findings) == 1
    assert checker.check_source((tmp_path / "model.py").read_bytes(), str(tmp_path / "model.py")) == []


def test_a_changed_caller_rechecks_the_cached_file_that_read_it(tmp_path):
    write(tmp_path / "project", {"model.py": MODEL, "train.py": TRAIN.format(module="model", op=".transpose(0, 1)")})
    rules = [load_rules()["MHA001"]]
    cache = tmp_path / "cache"
    assert len(mha001(tmp_path / "project", Cache(cache, rules))) == 1
    assert len(mha001(tmp_path / "project", Cache(cache, rules))) == 1  # from the cache
    write(tmp_path / "project", {"train.py": TRAIN.format(module="model", op="")})  # model.py is unchanged
    assert mha001(tmp_path / "project", Cache(cache, rules)) == []


@pytest.mark.parametrize(("path", "expected"), [
    ("model.py", "model"),
    ("pkg/model.py", "pkg.model"),
    ("pkg/sub/model.py", "pkg.sub.model"),
    ("pkg/__init__.py", "pkg"),
    ("src/pkg/model.py", "pkg.model"),
])
def test_module_names(tmp_path, path, expected):
    for folder in ("pkg", "pkg/sub", "src/pkg"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / path).write_text("")
    assert module_name(str(tmp_path / path)) == expected


def test_importers_need_the_import_not_only_the_name(tmp_path):
    write(tmp_path, {"model.py": "class Encoder: ...\n", "uses.py": "from model import Encoder as E\n",
                     "mentions.py": "# Encoder is documented elsewhere\nEncoder = None\n"})
    project = Project([str(p) for p in tmp_path.glob("*.py")])
    [importer] = project.importers(str(tmp_path / "model.py"), "Encoder")
    assert (Path(importer.path).name, importer.local) == ("uses.py", "E")


def test_imports_learnt_from_bytes_read_once_equal_those_read_from_disk(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/model.py": "class Encoder: ...\n",
                     "pkg/train.py": "from .model import (\n    Encoder as E,  # the model\n)\n",
                     "run.py": "if True:\n    from pkg.model import Encoder; import os\n"})
    paths = sorted(str(p) for p in tmp_path.rglob("*.py"))
    learnt = Project(paths)
    for path in paths:
        learnt.learnt(path, learnt.imports_in(path, Path(path).read_bytes()))
        Path(path).unlink()  # what was learnt is not read again
    read = learnt.importers(str(tmp_path / "pkg/model.py"), "Encoder")
    assert sorted((Path(i.path).name, i.local) for i in read) == [("run.py", "Encoder"), ("train.py", "E")]


def test_a_file_that_changes_before_the_index_is_used_is_read_again(tmp_path):
    write(tmp_path, {"model.py": "class Encoder: ...\n", "uses.py": "import os\n"})
    paths = [str(tmp_path / "model.py"), str(tmp_path / "uses.py")]
    project = Project(paths)
    project.learnt(paths[1], project.imports_in(paths[1], b"import os\n"))
    (tmp_path / "uses.py").write_text("from model import Encoder\n")
    assert project.changed(paths[1]) == set()  # nothing had used what was learnt
    assert [Path(i.path).name for i in project.importers(paths[0], "Encoder")] == ["uses.py"]


def test_an_open_buffer_is_not_replaced_by_the_bytes_on_disk(tmp_path):
    write(tmp_path, {"model.py": "class Encoder: ...\n", "uses.py": "import os\n"})
    uses = str(tmp_path / "uses.py")
    project = Project([str(tmp_path / "model.py"), uses], overlay={uses: b"from model import Encoder as Enc\n"})
    assert project.imports_in(uses, (tmp_path / "uses.py").read_bytes()) is None  # the buffer is what is read
    assert [i.local for i in project.importers(str(tmp_path / "model.py"), "Encoder")] == ["Enc"]


_SOURCE_PIECES = st.sampled_from(["from ", "from", " import ", "import", " ", "\t", "\n", "\r\n", ".", "pkg", "E",
                                  " as ", "(", ")", ",", ";", "#", "x", "\\", "from .pkg import E",
                                  "\tfrom pkg import (E,\n", "  from . import x; from pkg import E\n"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_SOURCE_PIECES, max_size=40).map("".join))
def test_the_import_scanner_finds_what_the_pattern_finds_at_every_line_start(text):
    raw = text.encode()
    assert [m.span() for m in _from_imports(raw)] == [m.span() for m in _FROM_IMPORT.finditer(raw)]


# ---- a wrapper class defined in another file ---------------------------------------------------------------------
WRAPPERS = """\
    import torch.nn as nn

    class Residual(nn.Module):
        def __init__(self, layer):
            super().__init__()
            self.layer = layer
            self.norm = nn.LayerNorm(64)

        def forward(self, x):
            return self.norm(x + self.layer(x))

    class SeqFirst(nn.Module):
        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            return self.layer(x.transpose(0, 1)).transpose(0, 1)
"""

WRAPPED = "import torch.nn as nn\nfrom .blocks import {wrapper}\n\n" + MODEL_AROUND


def test_a_wrapper_from_another_file_that_moves_no_axis_passes_its_input_on(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/blocks.py": WRAPPERS, "pkg/model.py": WRAPPED.format(
        wrapper="Residual")})
    found = mha001(tmp_path)
    assert [(Path(f.path).name, f.line, f.severity) for f in found] == [("model.py", 7, Severity.ERROR)]
    assert found[0].fix is not None  # the wrapper was read: the layout is established


def test_a_wrapper_from_another_file_that_transposes_is_not_assumed_to_pass_its_input_on(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/blocks.py": WRAPPERS, "pkg/model.py": WRAPPED.format(
        wrapper="SeqFirst")})
    assert [f.severity for f in mha001(tmp_path)] == [Severity.WARNING]  # nothing shows what reaches the layer
    alone = tmp_path / "alone"  # the wrapper's file is not in the run: an assumption, at most a warning
    write(alone, {"pkg/__init__.py": "", "pkg/model.py": WRAPPED.format(wrapper="SeqFirst")})
    found = mha001(alone)
    assert [f.severity for f in found] == [Severity.WARNING] and found[0].fix is None
    assert any("assuming `SeqFirst` passes it on unchanged" in line for line in found[0].evidence)


# ---- a run given some files of a project sees the whole project (issue 35 item 11) ---------------------------------
UNPACKED = CALLER.replace("{module}", "model")
SEQUENCE_FIRST_MODEL = ENCODER


def checked(paths: list[Path], cache: Cache | None = None, **discovery):
    rules = [load_rules()["MHA001"]]
    return Checker(rules).check_paths(paths, cache=cache, jobs=1, **discovery).findings


@pytest.mark.parametrize("marker", ["pyproject.toml", "setup.cfg", "setup.py", ".git"])
def test_one_file_of_a_project_is_judged_by_the_callers_in_the_others(tmp_path, marker):
    (tmp_path / marker).mkdir() if marker == ".git" else (tmp_path / marker).write_text("")
    write(tmp_path, {"src/model.py": SEQUENCE_FIRST_MODEL, "src/train.py": UNPACKED.format(unpack="B, T, C")})
    [finding] = checked([tmp_path / "src" / "model.py"])
    assert finding.severity == Severity.ERROR and "`B, T, C = x.shape`, " in finding.message
    assert "train.py:4" in finding.message


def test_the_sequence_first_twin_in_another_file_is_info(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    write(tmp_path, {"model.py": SEQUENCE_FIRST_MODEL, "train.py": UNPACKED.format(unpack="T, B, C")})
    [finding] = checked([tmp_path / "model.py"])
    assert finding.severity == Severity.INFO and "`T, B, C = x.shape`" in finding.message


def test_without_a_project_root_a_file_alone_stays_unknown(tmp_path):
    write(tmp_path, {"model.py": SEQUENCE_FIRST_MODEL, "train.py": UNPACKED.format(unpack="B, T, C")})
    [finding] = checked([tmp_path / "model.py"])
    assert finding.severity == Severity.WARNING and "train.py" not in finding.message


@pytest.mark.parametrize("marker", [".git", "pyproject.toml"])
def test_the_home_folder_is_never_the_project_root(tmp_path, monkeypatch, marker):
    """A dotfiles `.git` (or a stray pyproject.toml) in the home folder does not make every file under it one
    project: a file in a folder below home without a root of its own is checked alone."""
    home = tmp_path / "home"
    home.mkdir()
    if marker == ".git":
        (home / marker).mkdir()
    else:
        (home / marker).write_text("")
    monkeypatch.setenv("HOME", str(home))
    write(home, {"scratch/model.py": SEQUENCE_FIRST_MODEL, "scratch/train.py": UNPACKED.format(unpack="B, T, C")})
    assert project_root(str(home / "scratch" / "model.py")) is None
    [finding] = checked([home / "scratch" / "model.py"])
    assert finding.severity == Severity.WARNING and "train.py" not in finding.message
    (home / "scratch" / "pyproject.toml").write_text("")  # a project of its own below home is one
    assert project_root(str(home / "scratch" / "model.py")) == str(home / "scratch")
    [finding] = checked([home / "scratch" / "model.py"])
    assert finding.severity == Severity.ERROR


def test_the_class_headers_say_which_classes_may_derive_from_torchs_attention(tmp_path):
    """Read from the text along the bases, without parsing: a plain module and its subclasses may not; a subclass
    of torch's class (by any import), of a project class that is one, or of a base the text cannot follow, may."""
    write(tmp_path, {
        "base.py": "import torch.nn as nn\nfrom torch.nn import MultiheadAttention as MHA\n\n"
                   "class Plain(nn.Module):\n    pass\n\nclass Attn(nn.MultiheadAttention):\n    pass\n\n"
                   "class Renamed(MHA):\n    pass\n\nAlias = nn.MultiheadAttention\n\nclass Aliased(Alias):\n    pass\n",
        "model.py": "from base import Plain, Attn\nfrom outside import Mixin\n\n"
                    "class Model(Plain, Mixin):\n    pass\n\nclass MyAttn(Attn):\n    pass\n",
    })
    project = Project([str(tmp_path / "base.py"), str(tmp_path / "model.py")])
    base, model = str(tmp_path / "base.py"), str(tmp_path / "model.py")
    assert not project.may_derive_attention(base, "Plain") and not project.may_derive_attention(model, "Model")
    assert all(project.may_derive_attention(base, name) for name in ("Attn", "Renamed", "Aliased"))
    assert project.may_derive_attention(model, "MyAttn")


def test_a_base_a_package_re_exports_is_followed_to_the_file_that_defines_it(tmp_path):
    """`from .utils import Mixin` where utils/__init__.py imports it from utils/hub.py: the header there decides,
    so a model class whose bases are plain mixins is not parsed for its bases; a re-exported attention subclass
    still may be one."""
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/utils/__init__.py": "from .hub import Mixin, Attn\n",
        "pkg/utils/hub.py": "import torch.nn as nn\n\nclass Mixin:\n    pass\n\n"
                            "class Attn(nn.MultiheadAttention):\n    pass\n",
        "pkg/model.py": "import torch.nn as nn\nfrom .utils import Mixin, Attn\n\n"
                        "class Model(nn.Module, Mixin):\n    pass\n\nclass MyAttn(Mixin, Attn):\n    pass\n",
    })
    files = [str(path) for path in sorted(tmp_path.rglob("*.py"))]
    project, model = Project(files), str(tmp_path / "pkg" / "model.py")
    assert not project.may_derive_attention(model, "Model")
    assert project.may_derive_attention(model, "MyAttn")


def test_an_importer_is_parsed_only_when_its_text_may_call_or_use_the_class(tmp_path, monkeypatch):
    """The callers of a class's forward are looked for in the files that import it, each parsed only when its
    text may call the class (`Encoder(`) or name it again beyond its import and class headers' bases: a file
    that only imports it, or only subclasses it, is not parsed; the caller still is, and its evidence decides."""
    (tmp_path / "pyproject.toml").write_text("")
    write(tmp_path, {"model.py": SEQUENCE_FIRST_MODEL, "train.py": UNPACKED.format(unpack="B, T, C"),
                     "only_imports.py": "from model import Encoder\n",
                     "subclasses.py": "from model import Encoder\n\nclass Deeper(Encoder):\n    pass\n"})
    parsed = []
    real = project_module._parse
    monkeypatch.setattr(project_module, "_parse", lambda path, *rest, **options: parsed.append(Path(path).name) or
                        real(path, *rest, **options))
    [finding] = checked([tmp_path / "model.py"])
    assert finding.severity == Severity.ERROR and "train.py:4" in finding.message
    assert parsed == ["train.py"]


@pytest.mark.parametrize(("text", "calls", "reads"), [
    ("from model import Encoder\n", False, False),
    ("from model import (\n    Encoder,\n)\n\nclass Deeper(Encoder, nn.Module):\n    pass\n", False, False),
    ("from model import Encoder\n\nmodule = Encoder\n", False, True),
    ("from model import Encoder\n\ndef build(config: Encoder):\n    return config\n", False, True),
    ("from model import Encoder\n\nencoder = Encoder (\n    64)\n", True, True),
    ("from model import Encoder\n\nencoder = EncoderLayer(64)\n", False, False),
])
def test_what_an_importers_text_says_of_the_class_it_imports(tmp_path, text, calls, reads):
    write(tmp_path, {"train.py": text})
    project, path = Project([str(tmp_path / "train.py")]), str(tmp_path / "train.py")
    assert project.may_call(path, "Encoder") is calls and project.may_read(path, "Encoder") is reads


def test_a_file_read_for_another_files_analysis_is_not_parsed_again_for_its_own_check(tmp_path, monkeypatch):
    """model.py's check reads train.py (which calls its class) before train.py's own check, in path order: that
    check builds on the tree already parsed. Each file is parsed once in the run."""
    import libcst

    from mhalint.parse.lazy import cst

    (tmp_path / "pyproject.toml").write_text("")
    write(tmp_path, {"model.py": SEQUENCE_FIRST_MODEL, "train.py": UNPACKED.format(unpack="B, T, C")
                     + "\nimport torch.nn as nn\nlayer = nn.MultiheadAttention(64, 8)\n"})
    texts = []
    real = libcst.parse_module
    for module in {libcst, cst}:
        monkeypatch.setattr(module, "parse_module", lambda text, *rest: texts.append(text) or real(text, *rest))
    findings = checked([tmp_path])
    assert {Path(finding.path).name for finding in findings} == {"model.py", "train.py"}
    assert len(texts) == 2 and texts[0] != texts[1]


@pytest.mark.parametrize(("line", "assigned"), [
    ("MHA = nn.MultiheadAttention", True), ("A, MHA = x, y", True), ("MHA: type = Other", True),
    ("x = MHA(dim=1)", False), ("if MHA == other:", False), ("run(MHA=1)", False),
])
def test_a_name_is_followed_into_a_file_only_where_a_statement_there_assigns_it(line, assigned):
    """A call or a keyword argument naming it assigns nothing: the file is not parsed to ask what it stands for."""
    assert project_module._assigns(f"import torch.nn as nn\n{line}\n".encode(), b"MHA") is assigned


def test_only_the_files_given_are_reported(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    write(tmp_path, {"model.py": SEQUENCE_FIRST_MODEL, "train.py": UNPACKED.format(unpack="B, T, C"),
                     "other.py": "import torch.nn as nn\nattention = nn.MultiheadAttention(64, 8)\n"})
    assert [Path(f.path).name for f in checked([tmp_path / "model.py"])] == ["model.py"]


@pytest.mark.parametrize("hidden", ["gitignore", "exclude", "default"])
def test_callers_in_files_the_project_excludes_are_not_followed(tmp_path, hidden):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("scratch/\n" if hidden == "gitignore" else "")
    folder = {"gitignore": "scratch", "exclude": "scratch", "default": "build"}[hidden]
    write(tmp_path, {"model.py": SEQUENCE_FIRST_MODEL, f"{folder}/train.py": UNPACKED.format(unpack="B, T, C")})
    excludes = {"exclude": ["scratch"], "anchors": [tmp_path]} if hidden == "exclude" else {}
    [finding] = checked([tmp_path / "model.py"], **excludes)
    assert finding.severity == Severity.WARNING
    write(tmp_path, {f"{folder}/train.py": "", "train.py": UNPACKED.format(unpack="B, T, C")})
    [finding] = checked([tmp_path / "model.py"], **excludes)  # the same caller outside them is followed
    assert finding.severity == Severity.ERROR


def test_an_edited_caller_rechecks_the_cached_file_checked_alone(tmp_path):
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    write(root, {"model.py": SEQUENCE_FIRST_MODEL, "train.py": UNPACKED.format(unpack="B, T, C")})
    rules = [load_rules()["MHA001"]]
    cache = tmp_path / "cache"
    assert [f.severity for f in checked([root / "model.py"], Cache(cache, rules))] == [Severity.ERROR]
    assert [f.severity for f in checked([root / "model.py"], Cache(cache, rules))] == [Severity.ERROR]
    write(root, {"train.py": UNPACKED.format(unpack="T, B, C")})  # model.py is unchanged
    assert [f.severity for f in checked([root / "model.py"], Cache(cache, rules))] == [Severity.INFO]


def test_a_warm_index_reads_no_unchanged_file_of_the_project(tmp_path, monkeypatch):
    from mhalint.run import scan
    root = tmp_path / "project"
    (root / "pyproject.toml").parent.mkdir()
    (root / "pyproject.toml").write_text("")
    write(root, {"model.py": SEQUENCE_FIRST_MODEL, "train.py": UNPACKED.format(unpack="B, T, C"),
                 **{f"lib/m{i}.py": f"from model import Encoder\nx = {i}\n" for i in range(5)}})
    rules = [load_rules()["MHA001"]]
    checked([root / "model.py"], Cache(tmp_path / "cache", rules))
    (root / "model.py").write_text(SEQUENCE_FIRST_MODEL + "\n")  # checked again, index asked
    read: list[str] = []
    original = scan.read
    monkeypatch.setattr(scan, "read", lambda path: read.append(os.path.basename(path)) or original(path))
    [finding] = checked([root / "model.py"], Cache(tmp_path / "cache", rules))
    assert finding.severity == Severity.ERROR and read == ["model.py"]
    write(root, {"lib/m3.py": "from model import Encoder as E\n"})
    read.clear()
    checked([root / "model.py"], Cache(tmp_path / "cache", rules))
    assert sorted(read) == ["m3.py", "model.py"]  # a changed file is read again, the others are not


PLANTED_IMPORTS = {
    "not a list": lambda entry: "x",
    "a field more": lambda entry: [*entry, 1],
    "a negative size": lambda entry: [-1, *entry[1:]],
    "a class name with a newline": lambda entry: [*entry[:3], [["Encoder\n", "model", "Encoder"]]],
    "a class name that is not one": lambda entry: [*entry[:3], [["encoder()", "model", "Encoder"]]],
    "a module with a slash": lambda entry: [*entry[:3], [["Encoder", "../model", "Encoder"]]],
    "an import of two parts": lambda entry: [*entry[:3], [["Encoder", "model"]]],
    "a number for a name": lambda entry: [*entry[:3], [[1, "model", "Encoder"]]],
}


@pytest.mark.parametrize("change", PLANTED_IMPORTS.values(), ids=PLANTED_IMPORTS.keys())
def test_a_planted_index_entry_is_dropped_and_its_file_read_again(tmp_path, change):
    import json

    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    write(root, {"model.py": SEQUENCE_FIRST_MODEL, "train.py": UNPACKED.format(unpack="B, T, C")})
    rules = [load_rules()["MHA001"]]
    checked([root / "model.py"], Cache(tmp_path / "cache", rules))
    [index] = (tmp_path / "cache").glob("findings-*.json")
    document = json.loads(index.read_bytes())
    imports = json.loads(document["imports"])  # a JSON text inside the document
    train = str(root / "train.py")
    original = imports[train]
    imports[train] = change(original)
    document["imports"] = json.dumps(imports)
    document["entries"].clear()  # model.py is checked again, so the index is asked
    index.write_bytes(json.dumps(document).encode())
    [finding] = checked([root / "model.py"], Cache(tmp_path / "cache", rules))
    assert finding.severity == Severity.ERROR
    assert json.loads(json.loads(index.read_bytes())["imports"])[train] == original


def test_a_run_over_the_whole_project_does_not_walk_it_again(tmp_path, monkeypatch):
    from mhalint.configuration import discovery
    (tmp_path / "pyproject.toml").write_text("")
    write(tmp_path, {"model.py": SEQUENCE_FIRST_MODEL, "train.py": UNPACKED.format(unpack="B, T, C")})
    walks = []
    original = discovery.discover
    monkeypatch.setattr(discovery, "discover", lambda paths, **kw: walks.append(list(paths)) or original(paths, **kw))
    assert [f.severity for f in checked([tmp_path])] == [Severity.ERROR]
    assert walks == []  # the engine's own walk is its import of discover; the project's would come through here
    assert [f.severity for f in checked([tmp_path / "model.py"])] == [Severity.ERROR]
    assert walks == [[str(tmp_path)]]


# A detector that gets its transformer as a constructor parameter, built by a factory function of another file
# (`transformer = build_transformer(args)`, then `Detector(transformer, ...)`): the module's caller is that file.
FACTORY_TRANSFORMER = """\
    import torch.nn as nn

    class Transformer(nn.Module):
        def __init__(self, width=256):
            super().__init__()
            self.attn = nn.MultiheadAttention(width, 8)

        def forward(self, memory, queries):
            return self.attn(queries, memory, memory)[0]

    def build_transformer(args):
        return Transformer(width=args.width)
"""
FACTORY_DETECTOR = """\
    import torch.nn as nn
    from .transformer import build_transformer

    class Detector(nn.Module):
        def __init__(self, transformer, slots):
            super().__init__()
            self.transformer = transformer
            self.slots = nn.Embedding(slots, 256)

        def forward(self, image):
            n, c, h, w = image.shape
            memory = {memory}
            queries = {queries}
            return self.transformer(memory, queries)

    def build(args):
        transformer = build_transformer(args)
        return Detector(transformer, args.slots)
"""


@pytest.mark.parametrize(("memory", "queries", "severity"), [
    ("image.flatten(2).permute(2, 0, 1)", "self.slots.weight.unsqueeze(1).repeat(1, n, 1)", Severity.INFO),
    ("image.flatten(2).transpose(1, 2)", "self.slots.weight.unsqueeze(0).repeat(n, 1, 1)", Severity.ERROR),
])
def test_a_module_built_by_an_imported_factory_is_judged_by_the_calls_of_what_it_builds(tmp_path, memory, queries,
                                                                                       severity):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/transformer.py": FACTORY_TRANSFORMER,
                     "pkg/detector.py": FACTORY_DETECTOR.format(memory=memory, queries=queries)})
    [finding] = checked([tmp_path])
    assert finding.path.endswith("transformer.py") and finding.severity == severity
    assert f"(`{queries}`, detector.py:13)" in finding.message
    assert "`n, c, h, w = image.shape` at detector.py:11" in " | ".join(finding.evidence)


def test_a_factory_whose_module_nobody_calls_leaves_the_parameter_unknown(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/transformer.py": FACTORY_TRANSFORMER,
                     "pkg/detector.py": "from .transformer import build_transformer\nmodel = build_transformer(None)\n"})
    [finding] = checked([tmp_path])
    assert finding.severity == Severity.WARNING and "no caller found" in finding.message


RUNNER = """\
    from model import Encoder

    def run(model, x):
        {unpack} = x.shape
        return model(x)

    def main(x):
        model = Encoder(){wrapper}
        return run(model, x)
"""


@pytest.mark.parametrize("wrapper", [".to('cpu')", ".eval()", ""])
@pytest.mark.parametrize(("unpack", "severity"), [("B, T, C", Severity.ERROR), ("T, B, C", Severity.INFO)])
def test_an_imported_module_moved_to_a_device_is_the_module_its_caller_runs(tmp_path, wrapper, unpack, severity):
    write(tmp_path, {"model.py": ENCODER, "train.py": RUNNER.format(unpack=unpack, wrapper=wrapper)})
    [finding] = checked([tmp_path])
    assert finding.path.endswith("model.py") and finding.severity == severity
    assert f"`{unpack} = x.shape` at train.py:4" in " | ".join(finding.evidence)


@pytest.mark.parametrize(("unpack", "severity"), [("B, T, C", Severity.ERROR), ("T, B, C", Severity.INFO)])
def test_the_caller_in_the_same_example_folder_is_found_where_each_has_its_own_src_folder(tmp_path, unpack,
                                                                                         severity):
    """Two examples side by side, each with `src/model.py` and a script that imports `src.model`: a module name
    two files could be is the one beside the importer."""
    for example in ("translate", "classify"):
        write(tmp_path, {f"{example}/src/model.py": ENCODER,
                         f"{example}/main.py": CALLER.format(module="src.model", unpack=unpack)})
    found = checked([tmp_path])
    assert [(Path(f.path).parent.parent.name, f.severity) for f in found] == [("classify", severity),
                                                                             ("translate", severity)]
    assert all("`" + unpack + " = x.shape` at ../main.py:4" in " | ".join(f.evidence) for f in found)


def test_a_word_is_mentioned_by_the_files_other_than_the_one_asking(tmp_path):
    """What `mentions` keeps of a word serves every file that asks: the one word holds for the others' homes."""
    write(tmp_path, {"a.py": "def forward_multi(x): ...\n", "b.py": "import os\n", "c.py": "forward_multiple = 1\n"})
    project = Project([str(p) for p in sorted(tmp_path.glob("*.py"))])
    assert not project.mentions("forward_multi", str(tmp_path / "a.py"))  # only its own file, and not c.py's word
    assert project.mentions("forward_multi", str(tmp_path / "b.py"))


def test_what_a_name_stands_for_is_read_again_after_its_file_changes(tmp_path):
    """A file's text decides what `mentions` and the alias questions answer: a change of it is seen."""
    write(tmp_path, {"a.py": "import os\n", "b.py": "import os\n"})
    project = Project([str(p) for p in sorted(tmp_path.glob("*.py"))])
    assert not project.mentions("forward_multi", str(tmp_path / "a.py"))
    (tmp_path / "b.py").write_text("forward_multi = 1\n")
    project.changed(str(tmp_path / "b.py"))
    assert project.mentions("forward_multi", str(tmp_path / "a.py"))


def test_another_file_is_read_as_the_checked_one_is_cpython_first(tmp_path):
    """Another file of the project goes through CPython's parser before libcst's: nesting CPython refuses (which
    could overflow libcst's native stack) is not read, and a file it accepts gets its statement lines, so a
    position there generates one statement, not the module."""
    from mhalint.run.budget import Limits

    write(tmp_path, {"deep.py": "x = " + "(" * 300 + "1" + ")" * 300 + "\n",
                     "model.py": "import torch\n\n\nclass Block:\n    def __init__(self, n):\n        self.n = n\n"})
    project = Project([str(p) for p in sorted(tmp_path.glob("*.py"))])
    assert project.context(str(tmp_path / "deep.py"), Limits(None)) is None
    context = project.context(str(tmp_path / "model.py"), Limits(None))
    init = context.classes["Block"].methods["__init__"].node
    assert context.line(init.body.body[0]) == 6
    assert not context._positions._whole


def test_a_checked_file_is_read_on_its_own_tree_only_while_its_text_is_the_same(tmp_path):
    """The tree the run's check of a file left is used by a later analysis that reads the file, unless the file's
    text is no longer the one checked: then it is parsed again."""
    import libcst

    from mhalint.run.budget import Limits

    write(tmp_path, {"model.py": "class Block:\n    pass\n", "other.py": "class Head:\n    pass\n"})
    project = Project([str(p) for p in sorted(tmp_path.glob("*.py"))])
    for name in ("model.py", "other.py"):
        text = (tmp_path / name).read_text()
        project.checked(str(tmp_path / name), text, libcst.parse_module(text), [1], {})
    kept = project._checked[str(tmp_path / "model.py")][1]
    assert project.context(str(tmp_path / "model.py"), Limits(None)).module is kept
    (tmp_path / "other.py").write_text("class Tail:\n    pass\n")
    assert set(project.context(str(tmp_path / "other.py"), Limits(None)).classes) == {"Tail"}
