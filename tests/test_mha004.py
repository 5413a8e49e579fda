"""MHA004 odd-num-heads: num_heads / nhead resolving to an odd integer (including 1)."""

from __future__ import annotations

import pytest

from mhalint.finding import Severity
from aliases import spellings

CODE = "MHA004"
MODULES = {"MultiheadAttention": "num_heads", "TransformerEncoderLayer": "nhead",
           "TransformerDecoderLayer": "nhead", "Transformer": "nhead"}


ALIASES = [pytest.param(imp, callee, heads, id=callee if "Alias" not in callee else f"{cls}-as-Alias")
           for cls, heads in MODULES.items() for imp, callee in spellings(cls)]


@pytest.fixture
def check(lint):
    def run(source: str, min_severity=None):
        found = lint(source, CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


# ---- aliases, keyword and positional heads ---------------------------------------------------------------------
@pytest.mark.parametrize(("imp", "callee", "heads"), ALIASES)
@pytest.mark.parametrize("form", ["positional", "keyword"])
def test_every_alias_with_odd_heads_is_flagged(check, imp, callee, heads, form):
    args = "64, 5" if form == "positional" else f"64, {heads}=5"
    found = check(f"{imp}\nm = {callee}({args}, batch_first=True)\n")
    assert [(f.line, f.column) for f in found] == [(2, 5)]
    assert f"{heads}=5" in found[0].message
    assert found[0].severity == Severity.WARNING


@pytest.mark.parametrize(("imp", "callee", "heads"), ALIASES)
def test_every_alias_with_even_heads_is_clean(check, imp, callee, heads):
    assert check(f"{imp}\nm = {callee}(64, {heads}=8, batch_first=True)\n") == []


@pytest.mark.parametrize(("heads", "flagged"), [(1, True), (3, True), (7, True), (2, False), (16, False),
                                                (0, False), ("True", False), ("2.0 + 1", False)])
def test_which_head_counts_are_odd(check, heads, flagged):
    found = check(f"import torch.nn as nn\nm = nn.MultiheadAttention(64, {heads}, batch_first=True)\n")
    assert len(found) == (1 if flagged else 0)


def test_transformer_default_nhead_is_even(check):
    assert check("import torch.nn as nn\nm = nn.Transformer(batch_first=True)\n") == []


def test_encoder_layer_inside_a_stack_is_checked(check):
    source = "import torch.nn as nn\nenc = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 3, batch_first=True), 2)\n"
    assert [(f.line, f.column) for f in check(source)] == [(2, 29)]


# ---- severity: the fast path also needs batch_first=True ----------------------------------------------------------
@pytest.mark.parametrize(("batch_first", "severity"), [
    (", batch_first=True", Severity.WARNING),
    ("", Severity.INFO),
    (", batch_first=False", Severity.INFO),
    (", batch_first=BF_TRUE", Severity.WARNING),
    (", batch_first=BF_FALSE", Severity.INFO),
    (", 0.0, True, False, False, None, None, True", Severity.WARNING),  # positional batch_first (9th)
    (", 0.0, True, False, False, None, None, False", Severity.INFO),
    (", 0.0, True, False, False, None, None", Severity.INFO),
])
def test_severity_follows_batch_first(check, batch_first, severity):
    source = f"import torch.nn as nn\nBF_TRUE = True\nBF_FALSE = False\nm = nn.MultiheadAttention(64, 3{batch_first})\n"
    found = check(source)
    assert [f.severity for f in found] == [severity]


@pytest.mark.parametrize("cls", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
def test_layer_severity_follows_batch_first(check, cls):
    assert [f.severity for f in check(f"import torch.nn as nn\nm = nn.{cls}(64, 3)\n")] == [Severity.INFO]
    positional = f"import torch.nn as nn\nm = nn.{cls}(64, 3, 256, 0.1, 'relu', 1e-5, True)\n"
    assert [f.severity for f in check(positional)] == [Severity.WARNING]


def test_info_findings_are_hidden_at_warning_threshold(check):
    source = "import torch.nn as nn\na = nn.MultiheadAttention(64, 3)\nb = nn.MultiheadAttention(64, 3, batch_first=True)\n"
    assert [f.line for f in check(source)] == [2, 3]
    assert [f.line for f in check(source, min_severity=Severity.WARNING)] == [3]


def test_info_message_says_why_it_does_not_matter(check):
    found = check("import torch.nn as nn\nm = nn.MultiheadAttention(64, 3)\n")
    assert "batch_first" in found[0].message


def test_default_param_batch_first_false_is_info(check):
    source = "import torch.nn as nn\ndef f(bf=False):\n    return nn.MultiheadAttention(64, 3, batch_first=bf)\n"
    assert [f.severity for f in check(source)] == [Severity.INFO]


# ---- resolved values -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("prelude", "heads", "value"), [
    ("H = 5\n", "H", 5),
    ("H = 10\n", "H // 2", 5),
    ("H = 10\n", "H // 5", None),  # 2: even
    ("H = 2\n", "H * 2 + 1", 5),
    ("BASE = 4\n", "BASE - 1", 3),
    ("", "max(1, 3)", 3),
    ("A = 3\nB = A\n", "B", 3),
    ("", "heads", None),  # a parameter without a default: unknown, not flagged
])
def test_module_constants_and_arithmetic(check, prelude, heads, value):
    source = f"import torch.nn as nn\n{prelude}def build(heads):\n    return nn.MultiheadAttention(64, {heads}, batch_first=True)\n"
    found = check(source)
    assert [dict(f.arguments)["num_heads"] for f in found] == ([] if value is None else [value])


@pytest.mark.parametrize(("signature", "heads", "flagged"), [
    ("dim=96, heads=6", "heads // 2", True),
    ("dim=96, heads=8", "heads // 2", False),
    ("dim=96, heads=3", "heads", True),
    ("dim=96, heads=3", "heads + 1", False),
])
def test_parameter_defaults(check, signature, heads, flagged):
    source = (f"import torch\nclass Block(torch.nn.Module):\n    def __init__(self, {signature}):\n"
              f"        super().__init__()\n        self.attn = torch.nn.MultiheadAttention(dim, {heads}, batch_first=True)\n")
    assert [(f.line, f.column) for f in check(source)] == ([(5, 21)] if flagged else [])


def test_message_shows_the_chain_of_values(check):
    source = "import torch.nn as nn\nHEADS = 6\nm = nn.MultiheadAttention(60, HEADS // 2, batch_first=True)\n"
    message = check(source)[0].message
    assert "num_heads=3" in message and "HEADS // 2" in message and "line 2" in message


def test_conditionally_reassigned_constant_is_unknown(check):
    source = "import torch.nn as nn\nH = 3\nif big:\n    H = 8\nm = nn.MultiheadAttention(64, H, batch_first=True)\n"
    assert check(source) == []


# ---- subclasses and decoys -------------------------------------------------------------------------------------
def test_super_init_in_subclass(check):
    source = "import torch.nn as nn\nclass A(nn.MultiheadAttention):\n    def __init__(self):\n        super().__init__(64, 5, batch_first=True)\n"
    assert [(f.line, f.column) for f in check(source)] == [(4, 9)]


@pytest.mark.parametrize("source", [
    "class MultiheadAttention:\n    def __init__(self, d, h): ...\nattn = MultiheadAttention(64, 5)\n",
    "import torch\nclass TransformerEncoderLayer(torch.nn.Module):\n    pass\nlayer = TransformerEncoderLayer(64, 3)\n",
    "from .layers import MultiheadAttention\nattn = MultiheadAttention(64, 5)\n",
    "from .layers import TransformerEncoderLayer\nlayer = TransformerEncoderLayer(64, nhead=3)\n",
    "from . import nn\nattn = nn.MultiheadAttention(64, 5)\n",
])
def test_project_classes_of_the_same_name_are_not_torch(check, source):
    assert check(source) == []


# ---- positions and noqa ----------------------------------------------------------------------------------------
def test_multi_line_call_is_reported_at_its_first_line_and_column(check):
    source = """\
        import torch.nn as nn
        def build():
            return nn.MultiheadAttention(  # comment
                64,
                num_heads=3,
                batch_first=True,
            )
    """
    assert [(f.line, f.column, f.end_line) for f in check(source)] == [(3, 12, 7)]


@pytest.mark.parametrize(("comment", "suppressed"), [
    ("# noqa", True),
    ("# noqa: MHA004", True),
    ("# noqa: MHA001,MHA004", True),
    ("# noqa: MHA001", False),
    ("# noqa: MHA003", False),
])
def test_noqa(check, comment, suppressed):
    found = check(f"import torch.nn as nn\nattn = nn.MultiheadAttention(64, 3)  {comment}\n")
    assert len(found) == (0 if suppressed else 1)
