"""MHA005 heads-not-dividing: embed_dim / d_model that num_heads / nhead does not divide, or sizes <= 0."""

from __future__ import annotations

import pytest
from aliases import spellings

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, NOT_CONFIRMED, SKIPPED, Severity
from mhalint.rules.heads_not_dividing import HeadsNotDividing, _probe_sizes

CODE = "MHA005"
MODULES = {"MultiheadAttention": ("embed_dim", "num_heads"), "TransformerEncoderLayer": ("d_model", "nhead"),
           "TransformerDecoderLayer": ("d_model", "nhead"), "Transformer": ("d_model", "nhead")}


ALIASES = [pytest.param(imp, callee, *MODULES[cls], id=callee if "Alias" not in callee else f"{cls}-as-Alias")
           for cls in MODULES for imp, callee in spellings(cls)]


@pytest.fixture
def check(lint):
    def run(source: str, min_severity=None):
        found = lint(source, CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


# ---- aliases, keyword and positional sizes ---------------------------------------------------------------------
@pytest.mark.parametrize(("imp", "callee", "embed", "heads"), ALIASES)
@pytest.mark.parametrize("form", ["positional", "keyword", "mixed"])
def test_every_alias_with_non_dividing_heads_is_flagged(check, imp, callee, embed, heads, form):
    args = {"positional": "100, 8", "keyword": f"{heads}=8, {embed}=100", "mixed": f"100, {heads}=8"}[form]
    found = check(f"{imp}\nm = {callee}({args}, batch_first=True)\n")
    assert [(f.line, f.column, f.severity) for f in found] == [(2, 5, Severity.ERROR)]
    assert f"{embed}=100, which {heads}=8 does not divide (100 = 12 x 8 + 4)" in found[0].message
    assert found[0].message.endswith("building it raises AssertionError")
    assert "AssertionError: embed_dim must be divisible by num_heads" in found[0].explanation
    assert found[0].fix is None


@pytest.mark.parametrize(("imp", "callee", "embed", "heads"), ALIASES)
def test_every_alias_with_dividing_heads_is_clean(check, imp, callee, embed, heads):
    assert check(f"{imp}\nm = {callee}({embed}=96, {heads}=8, batch_first=True)\n") == []


@pytest.mark.parametrize(("args", "flagged"), [
    ("64, 8", False), ("64, 5", True), ("64, 64", False), ("64, 128", True), ("1, 1", False), ("300, 6", False),
    ("300, 7", True), ("512, 7", True),  # docs/torch-facts.md#heads-dividing: E=512 with h=7 cannot be built
    ("10, 3", True),  # docs/torch-facts.md#heads-dividing
    ("64, True", False), ("64.0, 8", False), ("64, 8.0", False), ("'64', 8", False),  # not plain ints: unknown
])
def test_which_sizes_are_flagged(check, args, flagged):
    found = check(f"import torch.nn as nn\nm = nn.MultiheadAttention({args}, batch_first=True)\n")
    assert len(found) == (1 if flagged else 0)


@pytest.mark.parametrize(("args", "values"), [
    ("64, 0", "embed_dim=64 and num_heads=0"),
    ("0, 8", "embed_dim=0 and num_heads=8"),
    ("-64, 8", "embed_dim=-64 and num_heads=8"),
    ("64, -2", "embed_dim=64 and num_heads=-2"),
])
def test_non_positive_sizes_raise_value_error(check, args, values):
    found = check(f"import torch.nn as nn\nm = nn.MultiheadAttention({args}, batch_first=True)\n")
    assert len(found) == 1 and found[0].severity == Severity.ERROR
    assert values in found[0].message and found[0].message.endswith("building it raises ValueError")
    assert "ValueError: embed_dim and num_heads must be greater than 0" in found[0].explanation
    assert "divisible" not in found[0].message
    assert found[0].help == "give embed_dim and num_heads positive values"


def test_layer_message_names_where_the_layer_builds_its_attention(check):
    found = check("import torch.nn as nn\nm = nn.TransformerEncoderLayer(100, 8, batch_first=True)\n")
    assert "nn.TransformerEncoderLayer passes d_model and nhead to nn.MultiheadAttention at transformer.py:757" \
        in found[0].explanation


# ---- nn.Transformer defaults (d_model=512, nhead=8) --------------------------------------------------------------
@pytest.mark.parametrize(("args", "message", "evidence"), [
    ("d_model=100", "d_model=100, which nhead=8 (the default) does not divide", "nhead defaults to 8"),
    ("nhead=7", "d_model=512 (the default), which nhead=7 does not divide", "d_model defaults to 512"),
    ("100", "d_model=100, which nhead=8 (the default) does not divide", "nhead defaults to 8"),
    ("512, 6", "d_model=512, which nhead=6 does not divide", "nhead=6"),
])
def test_transformer_defaults_apply_when_absent(check, args, message, evidence):
    found = check(f"import torch.nn as nn\nm = nn.Transformer({args}, batch_first=True)\n")
    assert len(found) == 1 and message in found[0].message
    assert evidence in found[0].evidence


@pytest.mark.parametrize("args", ["", "d_model=256", "nhead=16", "d_model=100, **config", "*sizes",
                                  "d_model=100, nhead=5, custom_encoder=enc, custom_decoder=dec"])
def test_transformer_clean_or_unknown(check, args):
    assert check(f"import torch.nn as nn\ndef f(enc, dec, config, sizes):\n"
                 f"    return nn.Transformer({args})\n") == []


@pytest.mark.parametrize("custom", ["custom_encoder=enc", "custom_decoder=dec",
                                    "custom_encoder=None, custom_decoder=dec"])
def test_transformer_with_one_custom_stack_still_builds_the_other(check, custom):
    source = f"import torch.nn as nn\ndef f(enc, dec):\n    return nn.Transformer(d_model=100, {custom})\n"
    assert len(check(source)) == 1


def test_layer_defaults_do_not_invent_sizes(check):
    # d_model and nhead have no default in the layers: a call without them is a TypeError, not this rule's.
    assert check("import torch.nn as nn\nm = nn.TransformerEncoderLayer(100)\n") == []


# ---- resolved values -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("prelude", "embed", "heads", "expected"), [
    ("D = 300\n", "D", "8", (300, 8)),
    ("D = 300\nH = 8\n", "D", "H", (300, 8)),
    ("BASE = 50\n", "BASE * 6", "8", (300, 8)),
    ("BASE = 50\n", "BASE * 6", "6", None),
    ("H = 4\n", "64 + 2", "H", (66, 4)),
    ("H = 16\n", "96", "H // 2", None),
    ("H = 14\n", "96", "H // 2", (96, 7)),
    ("", "max(100, 50)", "8", (100, 8)),
    ("A = 300\nB = A\n", "B", "8", (300, 8)),
    ("", "dim", "8", None),  # a parameter without a default: unknown
    ("", "300", "heads", None),
])
def test_module_constants_and_arithmetic(check, prelude, embed, heads, expected):
    source = (f"import torch.nn as nn\n{prelude}def build(dim, heads):\n"
              f"    return nn.MultiheadAttention({embed}, {heads}, batch_first=True)\n")
    found = check(source)
    assert [(dict(f.arguments)["embed_dim"], dict(f.arguments)["num_heads"]) for f in found] == \
        ([] if expected is None else [expected])


def test_message_shows_the_chain_of_values(check):
    source = "import torch.nn as nn\nBASE = 50\nD = BASE * 6\nm = nn.MultiheadAttention(D, 8, batch_first=True)\n"
    finding = check(source)[0]
    assert "embed_dim=300 (`D`), which num_heads=8 does not divide" in finding.message
    assert finding.evidence == ("embed_dim=`D` = 300", "num_heads=8", "`D` = BASE * 6 at line 3",
                                "`BASE` = 50 at line 2")


@pytest.mark.parametrize(("signature", "instantiation", "flagged"), [
    ("dim=96, heads=8", "", False),
    ("dim=100, heads=8", "", True),
    ("dim=96, heads=8", "Block(dim=100)", True),
    ("dim=96, heads=8", "Block(100)", True),
    ("dim=96, heads=8", "Block(heads=5)", True),
    ("dim=96, heads=8", "Block(96, 12)", False),
    ("dim=96, heads=8", "Block(dim=100)\nBlock(dim=96)", False),  # callers disagree: unknown
    ("dim=96, heads=8", "Block(dim=size)", False),
])
def test_parameter_defaults_and_instantiations(check, signature, instantiation, flagged):
    source = (f"import torch\nclass Block(torch.nn.Module):\n    def __init__(self, {signature}):\n"
              f"        super().__init__()\n"
              f"        self.attn = torch.nn.MultiheadAttention(dim, heads, batch_first=True)\n"
              f"{instantiation}\n")
    assert [(f.line, f.column) for f in check(source)] == ([(5, 21)] if flagged else [])


def test_instantiation_is_named_in_the_evidence(check):
    source = ("import torch\nclass Block(torch.nn.Module):\n    def __init__(self, dim=96, heads=8):\n"
              "        super().__init__()\n        self.attn = torch.nn.MultiheadAttention(dim, heads)\n"
              "block = Block(dim=100)\n")
    found = check(source)
    assert "embed_dim=100 (`dim`), which num_heads=8 (`heads`) does not divide" in found[0].message
    assert "`Block(...)` at line 6 passes dim=100" in found[0].evidence
    assert "`heads` defaults to 8 in `__init__()` at line 3" in found[0].evidence


def test_conditionally_reassigned_constant_is_unknown(check):
    source = "import torch.nn as nn\nD = 300\nif big:\n    D = 512\nm = nn.MultiheadAttention(D, 8)\n"
    assert check(source) == []


# ---- the suggestion ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "suggestion"), [
    ("300, 8", "use a head count that divides 300: 6 or 10 (head size 50 or 30), or make embed_dim a multiple of "
               "8 (296 or 304"),
    ("100, 8", "divides 100: 4 or 10 (head size 25 or 10)"),  # 5 also divides 100, but odd counts lose the fast path
    ("99, 8", "divides 99: 3 or 9 (head size 33 or 11)"),  # no even divisor: the nearest odd ones
    ("4, 8", "divides 4: 4 (head size 1), or make embed_dim a multiple of 8 (8,"),
    ("1000003, 8", "divides 1000003: 1 (head size 1000003)"),  # a large prime: the bounded search still answers
])
def test_suggestion_lists_the_nearest_dividing_head_counts(check, args, suggestion):
    found = check(f"import torch.nn as nn\nm = nn.MultiheadAttention({args}, batch_first=True)\n")
    assert suggestion in found[0].help, found[0].help


def test_suggestion_is_the_whole_help_line(check):
    found = check("import torch.nn as nn\nm = nn.MultiheadAttention(300, 8, batch_first=True)\n")
    assert found[0].help == ("use a head count that divides 300: 6 or 10 (head size 50 or 30), or make embed_dim a "
                             "multiple of 8 (296 or 304, for example with an nn.Linear projection in front)")


# ---- headline and explanation --------------------------------------------------------------------------------------
@pytest.mark.parametrize("example", HeadsNotDividing.invalid, ids=lambda e: e.code.splitlines()[-1][:40])
def test_each_invalid_example_has_a_short_headline_with_both_sizes(check, example):
    found = check(example.code)
    assert found and found[0].severity == Severity.ERROR
    finding = found[0]
    arguments = dict(finding.arguments)
    embed_key, heads_key = ("embed_dim", "num_heads") if arguments["api"] == torchapi.MHA else ("d_model", "nhead")
    assert len(finding.message) <= HEADLINE_LIMIT, finding.message
    assert f"{embed_key}=" in finding.message and f"{heads_key}=" in finding.message
    assert str(arguments[embed_key]) in finding.message and str(arguments[heads_key]) in finding.message
    assert "Evidence:" not in finding.message and "Fix:" not in finding.message
    assert "docs/torch-facts.md#heads-dividing" in finding.explanation
    assert "measured" not in finding.explanation.lower()


def test_a_long_expression_is_shortened_in_the_headline_but_not_in_the_evidence(check):
    long = "EMBEDDING_SIZE_" * 10 + "A + 5"
    found = check(f"import torch.nn as nn\n{long[:-4]} = 200\n"
                  f"m = nn.MultiheadAttention({long}, 8, batch_first=True)\n")
    assert len(found[0].message) <= HEADLINE_LIMIT
    assert found[0].message.startswith("nn.MultiheadAttention gets embed_dim=205 (`EMBEDDING_SIZE_")
    assert found[0].message.endswith("..., which num_heads=8 does not divide (205 = 25 x 8 + 5): building it raises "
                                     "AssertionError")
    assert found[0].evidence[0] == f"embed_dim=`{long}` = 205"


# ---- subclasses and decoys -------------------------------------------------------------------------------------
def test_super_init_in_subclass(check):
    source = ("import torch.nn as nn\nclass A(nn.MultiheadAttention):\n    def __init__(self):\n"
              "        super().__init__(100, 8, batch_first=True)\n")
    assert [(f.line, f.column) for f in check(source)] == [(4, 9)]


# project classes named like torch's in the rule's own examples: test_every_rule.py
@pytest.mark.parametrize("source", [
    "import torch.nn as nn\nattn = nn.Linear(100, 8)\n",
])
def test_project_classes_of_the_same_name_are_not_torch(check, source):
    assert check(source) == []


# ---- positions, noqa, severity threshold -----------------------------------------------------------------------
def test_multi_line_call_is_reported_at_its_first_line(check):
    source = """\
        import torch.nn as nn
        def build():
            return nn.MultiheadAttention(  # comment
                300,
                num_heads=8,
                batch_first=True,
            )
    """
    assert [(f.line, f.column, f.end_line) for f in check(source)] == [(3, 12, 7)]


def test_error_survives_every_threshold(check):
    assert len(check("import torch.nn as nn\nm = nn.MultiheadAttention(100, 8)\n", min_severity=Severity.ERROR)) == 1


def test_odd_non_dividing_heads_get_both_findings(lint):
    codes = sorted(f.code for f in lint("import torch.nn as nn\nm = nn.MultiheadAttention(64, 5, batch_first=True)\n",
                                        "MHA00"))
    assert "MHA004" in codes and "MHA005" in codes


def test_arguments_carry_the_sizes_the_probe_needs(check):
    found = check("import torch.nn as nn\nm = nn.Transformer(d_model=100, batch_first=True)\n")
    arguments = dict(found[0].arguments)
    assert arguments["api"] == torchapi.TRANSFORMER
    assert (arguments["d_model"], arguments["nhead"], arguments["batch_first"]) == (100, 8, True)


# ---- the probe -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("arguments", "text"), [
    ({"api": torchapi.MHA, "embed_dim": 300, "num_heads": 8},
     "nn.MultiheadAttention(embed_dim=300, num_heads=8) raised AssertionError: embed_dim must be divisible by "
     "num_heads"),
    ({"api": torchapi.ENCODER_LAYER, "d_model": 100, "nhead": 8}, "raised AssertionError"),
    ({"api": torchapi.DECODER_LAYER, "d_model": 10, "nhead": 3}, "raised AssertionError"),
    ({"api": torchapi.TRANSFORMER, "d_model": 100}, "nn.Transformer(d_model=100, nhead=8) raised AssertionError"),
    ({"api": torchapi.MHA, "embed_dim": 64, "num_heads": 0},
     "raised ValueError: embed_dim and num_heads must be greater than 0, got embed_dim=64 and num_heads=0"),
    ({"api": torchapi.MHA, "embed_dim": 100000, "num_heads": 7},
     "embed_dim=61, num_heads=7) raised AssertionError: embed_dim must be divisible by num_heads (scaled the "
     "embedding size from 100000 to 61, keeping a remainder of 5)"),
])
def test_probe_confirms_a_bad_site(torch, arguments, text):
    status, evidence = HeadsNotDividing.probe(arguments, torch)
    assert status == CONFIRMED, evidence
    assert text in evidence


@pytest.mark.parametrize("arguments", [
    {"api": torchapi.MHA, "embed_dim": 300, "num_heads": 6},
    {"api": torchapi.ENCODER_LAYER, "d_model": 96, "nhead": 8},
    {"api": torchapi.TRANSFORMER},  # 512 and 8
    {"api": torchapi.MHA, "embed_dim": 4096, "num_heads": 32},  # scaled, still divisible
])
def test_probe_does_not_confirm_a_fixed_site(torch, arguments):
    status, evidence = HeadsNotDividing.probe(arguments, torch)
    assert status == NOT_CONFIRMED, evidence
    assert "was built without error" in evidence


def test_probe_skips_unknown_sizes(torch):
    assert HeadsNotDividing.probe({"api": torchapi.MHA, "embed_dim": 100}, torch)[0] == SKIPPED


@pytest.mark.parametrize(("embed", "heads"), [(300, 8), (100000, 7), (4096, 32), (100000, 100), (6400, 128),
                                              (1000, 3), (0, 8), (64, 0), (10**9, 10**6 + 1)])
def test_probe_sizes_keep_the_outcome_and_stay_small(embed, heads):
    (e, h), notes = _probe_sizes(embed, heads)
    assert e <= 1024 and h <= 64
    if embed > 0 and heads > 0:
        assert (e % h == 0) == (embed % heads == 0)
        assert bool(notes) == ((e, h) != (embed, heads))
    else:
        assert (e, h) == (embed, heads)


def test_probe_runs_through_the_cli_on_the_example(torch, probed_examples):
    result = probed_examples.of("mha005_heads_not_dividing_bad.py")  # `check --probe` over the examples, once
    assert "probe confirmed" in result.output and "embed_dim=300, num_heads=8" in result.output, result.output


# ---- no automatic fix ----------------------------------------------------------------------------------------------
def test_fix_mode_leaves_the_source_unchanged(check):
    from mhalint.fixes import apply_fixes
    source = "import torch.nn as nn\nm = nn.MultiheadAttention(100, 8, batch_first=True)\n"
    found = check(source)
    assert found and all(f.fix is None for f in found)
    assert apply_fixes(source, found, unsafe=True) == (source, 0)
