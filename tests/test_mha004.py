"""MHA004 odd-num-heads: num_heads / nhead resolving to an odd integer (including 1)."""

from __future__ import annotations

import re

import pytest
from aliases import spellings

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, NOT_CONFIRMED, REPRODUCED, Severity
from mhalint.rules.odd_num_heads import OddNumHeads, _nearest_even_shape

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
    assert found[0].message == ("nn.MultiheadAttention gets num_heads=3, an odd head count, which does not matter "
                                "here: the fast path is off, as batch_first is False (the default)")
    assert "the fast path is off anyway: batch_first is False (the default)" in found[0].evidence
    assert found[0].help == ("nothing while that holds; if the module ever qualifies for the fast path, use an even "
                             "head count that divides embed_dim=64 (2 or 4)")
    assert "docs/torch-facts.md#fast-path-conditions" in found[0].explanation
    assert dict(found[0].arguments)["fast_path_off"] == "batch_first is False (the default)"


def test_cross_attention_is_info_and_says_so(check):
    found = check("import torch.nn as nn\nm = nn.MultiheadAttention(64, 3, batch_first=True)\n"
                  "def f(q, k):\n    return m(q, k, k)\n")
    assert [f.severity for f in found] == [Severity.INFO]
    assert found[0].message.endswith("the fast path is off, as every call is cross-attention")


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
    finding = check(source)[0]
    assert "num_heads=3 (`HEADS // 2`)" in finding.message
    assert finding.evidence == ("num_heads=HEADS // 2 = 3", "`HEADS` = 6 at line 2")


def test_conditionally_reassigned_constant_is_unknown(check):
    source = "import torch.nn as nn\nH = 3\nif big:\n    H = 8\nm = nn.MultiheadAttention(64, H, batch_first=True)\n"
    assert check(source) == []


# ---- subclasses and decoys -------------------------------------------------------------------------------------
def test_super_init_in_subclass(check):
    source = "import torch.nn as nn\nclass A(nn.MultiheadAttention):\n    def __init__(self):\n        super().__init__(64, 5, batch_first=True)\n"
    assert [(f.line, f.column) for f in check(source)] == [(4, 9)]


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


# ---- headline, help and explanation ------------------------------------------------------------------------------
@pytest.mark.parametrize("example", OddNumHeads.invalid, ids=lambda e: e.code.splitlines()[-1][:40])
def test_each_invalid_example_has_a_short_headline_with_the_head_count(check, example):
    found = check(example.code, min_severity="info")
    assert found
    finding = found[0]
    assert len(finding.message) <= HEADLINE_LIMIT, finding.message
    heads = dict(finding.arguments).get("num_heads", dict(finding.arguments).get("nhead"))
    assert re.search(rf"\b(num_heads|nhead)={heads}\b", finding.message), finding.message
    assert "an odd head count" in finding.message
    assert "Evidence:" not in finding.message and "Fix:" not in finding.message
    assert finding.severity == (Severity.WARNING if "batch_first=True" in example.code else Severity.INFO)


def test_warning_headline_help_and_explanation(check):
    (finding,) = check("import torch.nn as nn\nm = nn.MultiheadAttention(60, 5, batch_first=True)\n")
    assert finding.message == ("nn.MultiheadAttention gets num_heads=5, an odd head count: torch silently skips its "
                               "fused inference fast path")
    assert finding.evidence == ("num_heads=5",)
    assert finding.help == ("use an even head count that divides embed_dim=60 (4 or 6), or add `# noqa: MHA004` if "
                            "the fast path does not matter here")
    assert "nn/modules/activation.py:1375-1376" in finding.explanation
    assert "docs/torch-facts.md#odd-heads-fast-path" in finding.explanation
    assert "torch 2.13 experiment" in finding.explanation and "1.23-1.25x" in finding.explanation
    assert "measured" not in finding.explanation.lower()


def test_encoder_layer_explanation_cites_its_own_source_line(check):
    (finding,) = check("import torch.nn as nn\nm = nn.TransformerEncoderLayer(60, 5, batch_first=True)\n")
    assert "nn/modules/transformer.py:863-864" in finding.explanation


@pytest.mark.parametrize(("ctor", "help_text"), [
    ("nn.MultiheadAttention(63, 7, batch_first=True)",
     "use embed_dim=64 with 8 heads (no even head count divides embed_dim=63)"),
    ("nn.TransformerEncoderLayer(d_model=63, nhead=7, batch_first=True)",
     "use d_model=64 with 8 heads (no even head count divides d_model=63)"),
    ("nn.MultiheadAttention(15, 5, batch_first=True)",
     "use embed_dim=16 with 4 heads (no even head count divides embed_dim=15)"),
    ("nn.MultiheadAttention(9, 9, batch_first=True)",
     "use embed_dim=10 with 10 heads (no even head count divides embed_dim=9)"),
])
def test_an_odd_embedding_size_gets_the_nearest_shape_with_an_even_head_count(check, ctor, help_text):
    (finding,) = check(f"import torch.nn as nn\nm = {ctor}\n")
    assert finding.help.startswith(help_text + ", or add `# noqa: MHA004`"), finding.help


@pytest.mark.parametrize(("embed", "heads", "shape"), [
    (63, 7, (64, 8)), (1, 1, (2, 2)), (3, 3, (4, 4)), (15, 3, (16, 4)), (15, 5, (16, 4)), (105, 7, (104, 8)),
    (1025, 5, (1026, 6)),  # 1024 with 4 heads is as near: ties go to more heads
    (10 ** 13 + 1, 3, None),
])
def test_nearest_even_shape_minimises_the_size_change_then_the_head_change(embed, heads, shape):
    assert _nearest_even_shape(heads, embed) == shape
    if shape is not None:
        assert shape[0] % shape[1] == 0 and shape[1] % 2 == 0 and abs(shape[0] - embed) == 1


# ---- the probe -------------------------------------------------------------------------------------------------
def probe_of(check, source, torch):
    (finding,) = check(source, min_severity="info")
    torch.manual_seed(0)
    return OddNumHeads.probe(dict(finding.arguments), torch)


def test_probe_compares_an_odd_embedding_size_with_the_nearest_even_head_shape(check, torch):
    status, evidence = probe_of(check, "import torch.nn as nn\nm = nn.MultiheadAttention(63, 7, batch_first=True)\n",
                                torch)
    assert status == CONFIRMED, evidence
    assert "ran 0 times with num_heads=7" in evidence
    assert re.search(r"and [1-9][0-9]* time\(s\) with 8 heads at embed_dim=64, the nearest shape with an even head "
                     r"count \(no even count divides embed_dim=63\)", evidence), evidence
    assert "E=63, h=7" in evidence


def test_probe_of_an_odd_embedding_size_in_an_encoder_layer(check, torch):
    status, evidence = probe_of(check, "import torch.nn as nn\n"
                                "m = nn.TransformerEncoderLayer(63, 7, 64, 0.0, batch_first=True)\n", torch)
    assert status == CONFIRMED, evidence
    assert "_transformer_encoder_layer_fwd ran 0 times with nhead=7" in evidence and "d_model=64" in evidence


def test_probe_with_the_sites_batch_first_is_confirmed(check, torch):
    status, evidence = probe_of(check, "import torch.nn as nn\nm = nn.MultiheadAttention(60, 5, batch_first=True)\n",
                                torch)
    assert status == CONFIRMED and not evidence.startswith("reproduced"), evidence


@pytest.mark.parametrize(("source", "premise"), [
    ("import torch.nn as nn\nm = nn.MultiheadAttention(60, 5)\n", "batch_first is False (the default)"),
    ("import torch.nn as nn\nm = nn.MultiheadAttention(60, 5, batch_first=BF)\n",
     "the site does not show batch_first=True"),
    ("import torch.nn as nn\nm = nn.MultiheadAttention(60, 5, batch_first=True)\ndef f(q, k):\n"
     "    return m(q, k, k)\n", "every call is cross-attention"),
])
def test_probe_that_assumes_the_fast_path_conditions_says_it_reproduced(check, torch, source, premise):
    status, evidence = probe_of(check, source, torch)
    assert status == REPRODUCED, evidence
    assert evidence.startswith(f"reproduced with assumed fast-path conditions ({premise}): in eval + no_grad")
    assert "ran 0 times with num_heads=5" in evidence


def test_probe_of_even_heads_is_not_confirmed(torch):
    status, evidence = OddNumHeads.probe({"api": torchapi.MHA, "embed_dim": 64, "num_heads": 8,
                                          "batch_first": True}, torch)
    assert status == NOT_CONFIRMED, evidence
