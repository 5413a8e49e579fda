"""Every import path of torch's attention classes, and the project's own names for them (issue 35, item 9): torch's
module paths (tests/aliases.py, used by every rule's tests), aliases a file assigns (also by unpacking, also as a
class attribute), and names another file of the run gives: an alias there, a package `__init__` that re-exports,
a star import with or without `__all__`, a subclass several files away. The prefilter must not skip a file that
reaches the class only through such a name."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_project import mha001, write

from mhalint.analysis.project import Project
from mhalint.finding import Severity

BATCH_FIRST = "B, T, C = x.shape"


@pytest.fixture
def check(lint):
    def run(source: str):
        found = lint(source, "MHA001", min_severity="info")
        return [(f.line, f.severity) for f in found]
    return run


@pytest.mark.parametrize("definition, callee", [
    ("MHA, Layer = nn.MultiheadAttention, nn.TransformerEncoderLayer", "MHA"),
    ("MHA: type = nn.MultiheadAttention", "MHA"),
])
def test_a_module_level_alias_is_the_class(check, definition, callee):
    source = f"import torch.nn as nn\n{definition}\n\ndef run(x):\n    attn = {callee}(64, 8)\n    {BATCH_FIRST}\n" \
             f"    return attn(x, x, x)[0]\n"
    assert check(source) == [(5, Severity.ERROR)]
    assert check(source.replace("(64, 8)", "(64, 8, batch_first=True)")) == []


def test_a_class_attribute_alias_is_the_class(check):
    source = """import torch.nn as nn

class Encoder(nn.Module):
    attention = nn.MultiheadAttention

    def __init__(self):
        super().__init__()
        self.attn = self.attention(64, 8)

    def forward(self, x):
        B, T, C = x.shape
        return self.attn(x, x, x)[0]
"""
    assert check(source) == [(8, Severity.ERROR)]
    assert check(source.replace("(64, 8)", "(64, 8, batch_first=True)")) == []


USER = """\
    from {module} import {name}

    def run(x):
        attn = {name}(64, 8{extra})
        B, T, C = x.shape
        return attn(x, x, x)[0]
"""

LAYOUTS = {
    "alias": ({"pkg/__init__.py": "", "pkg/layers.py": "import torch.nn as nn\n\nMHA = nn.MultiheadAttention\n"},
              ".layers", "MHA"),
    "renamed-import": ({"pkg/__init__.py": "", "pkg/layers.py": "from torch.nn import MultiheadAttention as MHA\n"},
                       ".layers", "MHA"),
    "package-reexport": ({"pkg/__init__.py": "from .attention import Attention\n",
                          "pkg/attention.py": "from torch import nn\n\nAttention = nn.MultiheadAttention\n"},
                         "pkg", "Attention"),
    "star-with-all": ({"pkg/__init__.py": "from .layers import *\n",
                       "pkg/layers.py": "import torch.nn as nn\n__all__ = ['MHA']\nMHA = nn.MultiheadAttention\n"},
                      "pkg", "MHA"),
    "star-without-all": ({"pkg/__init__.py": "",
                          "pkg/layers.py": "import torch.nn as nn\nMHA = nn.MultiheadAttention\n"}, ".layers", "*"),
    "subclass-two-files-away": ({"pkg/__init__.py": "",
                                 "pkg/base.py": "import torch.nn as nn\n\nclass Base(nn.MultiheadAttention):\n"
                                                "    pass\n",
                                 "pkg/layers.py": "from .base import Base\n\nclass MHA(Base):\n    pass\n"},
                                ".layers", "MHA"),
}


def user_file(module: str, name: str, extra: str = "") -> str:
    text = USER.format(module=module, name=name if name != "*" else "MHA", extra=extra)
    return text.replace("import MHA\n", "import *\n") if name == "*" else text


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_name_another_file_gives_the_class_is_the_class(tmp_path, layout):
    files, module, name = LAYOUTS[layout]
    user = "pkg/model.py" if module.startswith(".") else "run.py"
    write(tmp_path, {**files, user: user_file(module, name)})
    [finding] = mha001(tmp_path)
    assert Path(finding.path).name == Path(user).name and (finding.line, finding.severity) == (4, Severity.ERROR)
    assert "gets batch-first data (`B, T, C = x.shape`" in finding.message
    write(tmp_path, {user: user_file(module, name, ", batch_first=True")})
    assert mha001(tmp_path) == []


def test_a_star_import_brings_only_what_all_lists(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "from .layers import *\n",
                     "pkg/layers.py": "import torch.nn as nn\n__all__ = ['Other']\nMHA = nn.MultiheadAttention\n"
                                      "class Other:\n    pass\n",
                     "run.py": user_file("pkg", "MHA")})
    assert mha001(tmp_path) == []


def test_a_name_from_a_file_outside_the_run_stays_unknown(tmp_path):
    write(tmp_path, {"run.py": user_file("elsewhere.layers", "MHA")})
    assert mha001(tmp_path) == []


def test_only_the_files_that_import_such_a_name_are_pulled_in(tmp_path):
    """The prefilter's soundness costs the parse of those files only, not of every file that imports from a file
    with a trigger."""
    write(tmp_path, {"pkg/__init__.py": "",
                     "pkg/layers.py": "import torch.nn as nn\nMHA = nn.MultiheadAttention\n\nclass Block:\n    pass\n",
                     "pkg/model.py": "from .layers import MHA\n",
                     "pkg/train.py": "from .layers import Block\n",
                     "pkg/again.py": "from .model import MHA as Attention\n"})
    paths = sorted(str(path) for path in tmp_path.rglob("*.py"))
    project = Project(paths)
    layers = str(tmp_path / "pkg/layers.py")
    unmatched = {path for path in paths if path != layers}
    pulled = project.reaching_attention({layers: Path(layers).read_bytes()}, unmatched)
    assert sorted(Path(path).name for path in pulled) == ["again.py", "model.py"]


def test_a_bare_word_counts_only_where_the_file_has_it_from_torch(tmp_path):
    """A project's own `TransformerDecoder` (fairseq names its classes like torch's) makes no export; torch's,
    imported by name or with a star, does."""
    write(tmp_path, {"pkg/__init__.py": "",
                     "pkg/own.py": "from .base import TransformerDecoder\n\nclass NATDecoder(TransformerDecoder):\n"
                                   "    pass\n",
                     "pkg/torchs.py": "from torch.nn import *\n\nclass Decoder(TransformerDecoder):\n    pass\n",
                     "pkg/a.py": "from .own import NATDecoder\n", "pkg/b.py": "from .torchs import Decoder\n"})
    paths = sorted(str(path) for path in tmp_path.rglob("*.py"))
    matched = {str(tmp_path / "pkg" / name): (tmp_path / "pkg" / name).read_bytes() for name in ("own.py", "torchs.py")}
    pulled = Project(paths).reaching_attention(matched, set(paths) - set(matched))
    assert [Path(path).name for path in pulled] == ["b.py"]


def test_a_cached_file_without_a_trigger_is_checked_again_when_a_name_it_imports_becomes_the_class(tmp_path):
    from mhalint.rule import load_rules
    from mhalint.run.cache import Cache

    project, cache = tmp_path / "project", tmp_path / "cache"
    rules = [load_rules()["MHA001"]]
    write(project, {"pkg/__init__.py": "", "pkg/layers.py": "import torch.nn as nn\n\nclass MHA:\n    pass\n",
                    "pkg/model.py": user_file(".layers", "MHA")})
    assert mha001(project, Cache(cache, rules)) == []
    write(project, {"pkg/layers.py": "import torch.nn as nn\n\nMHA = nn.MultiheadAttention\n"})
    assert [(Path(f.path).name, f.line) for f in mha001(project, Cache(cache, rules))] == [("model.py", 4)]
