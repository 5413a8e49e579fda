"""MHA007 weights-discarded: need_weights left True while the attention weights are thrown away."""

from __future__ import annotations

import re
import textwrap

import pytest

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, NOT_CONFIRMED, REPRODUCED, SAFE, Severity
from mhalint.fixes import apply_fixes
from mhalint.rule import load_rules

CODE = "MHA007"
RULE = load_rules()[CODE]


@pytest.fixture
def check(lint):
    def run(source: str):
        found = lint(source, CODE, min_severity="info")
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def module(body: str, imports: str = "import torch\nfrom torch import nn\n",
           build: str = "nn.MultiheadAttention(64, 8, batch_first=True)") -> str:
    """A block whose forward runs `body` (indented by the caller's dedent), with `self.attn` built by `build`."""
    lines = "".join(f"        {line}\n" for line in textwrap.dedent(body).strip("\n").splitlines())
    return (f"{imports}class Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.attn = {build}\n    def forward(self, x, pad):\n{lines}")


FORWARD_LINE = 8  # the first line of `body` in `module`


# ---- how the weights are thrown away ------------------------------------------------------------------------------
DISCARDED = [
    pytest.param("return self.attn(x, x, x)[0]", "`[0]` keeps only the output", id="index-0-returned"),
    pytest.param("return x + self.attn(x, x, x, key_padding_mask=pad)[0]", "`[0]`", id="index-0-in-expression"),
    pytest.param("out = self.attn(x, x, x)[0]\nreturn out", "`[0]`", id="index-0-assigned"),
    pytest.param("x += self.attn(x, x, x)[0]\nreturn x", "`[0]`", id="augmented-index-0"),
    pytest.param("return self.norm(self.attn(\n    x, x, x,\n)[0])", "`[0]`", id="index-0-multiline"),
    pytest.param("out, _ = self.attn(x, x, x)\nreturn out", "`out, _ =` discards the weights", id="underscore"),
    pytest.param("[out, _] = self.attn(x, x, x)\nreturn out", "discards the weights", id="list-target"),
    pytest.param("out, weights = self.attn(x, x, x)\nreturn out",
                 "`weights` from `out, weights =` (line 8) is never read in `forward`", id="unread-weights"),
    pytest.param("res = self.attn(x, x, x)\nres = res[0]\nreturn res + 1",
                 "`res` from line 8 is only read as `res[0]` (line 9)", id="assigned-then-indexed"),
    pytest.param("res = self.attn(x, x, x)\ny = self.norm(res[0])\nreturn y + res[0]",
                 "only read as `res[0]` (lines 9, 10)", id="two-indexed-reads"),
    pytest.param("res: tuple = self.attn(x, x, x)\nreturn res[0]", "only read as `res[0]`", id="annotated"),
]


@pytest.mark.parametrize(("body", "why"), DISCARDED)
def test_discarded_weights_are_flagged(check, body, why):
    found = check(module(body))
    assert len(found) == 1
    finding = found[0]
    assert finding.line == FORWARD_LINE and finding.severity == Severity.WARNING
    assert why in finding.message
    assert finding.message.startswith("nn.MultiheadAttention computes attention weights nobody reads "
                                      "(default need_weights=True): ")
    assert len(finding.message) <= HEADLINE_LIMIT
    assert "need_weights is not passed (default True)" in finding.evidence
    assert any(why in e for e in finding.evidence)
    explanation = " ".join(finding.explanation.split())
    assert "1.93-2.10x" in explanation and "1.89-2.12x" in explanation and "1.02-1.11x" in explanation
    assert "In a torch 2.13 experiment on CPU" in explanation and "measured" not in explanation.lower()
    assert "docs/torch-facts.md#need-weights" in explanation
    assert "NaN" in explanation and "docs/torch-facts.md#fully-masked-rows" in explanation
    assert finding.help == "pass need_weights=False (the output is unchanged)"


KEPT = [
    pytest.param("return self.attn(x, x, x)", id="tuple-returned"),
    pytest.param("out, weights = self.attn(x, x, x)\nreturn out, weights", id="weights-returned"),
    pytest.param("out, weights = self.attn(x, x, x)\nself.last = weights\nreturn out", id="weights-stored"),
    pytest.param("out, self.weights = self.attn(x, x, x)\nreturn out", id="weights-to-attribute"),
    pytest.param("return self.attn(x, x, x)[1]", id="index-1"),
    pytest.param("res = self.attn(x, x, x)\nreturn res[0], res[1]", id="both-read"),
    pytest.param("res = self.attn(x, x, x)\nreturn res", id="name-returned"),
    pytest.param("res = self.attn(x, x, x)\nres += 1\nreturn res[0]", id="augmented-rebind"),
    pytest.param("res = self.attn(x, x, x)\nreturn x", id="never-read"),
    pytest.param("out, *rest = self.attn(x, x, x)\nreturn out", id="starred"),
    pytest.param("return self.attn(x, x, x)[:1]", id="slice"),
    pytest.param("return self.attn(x, x, x, need_weights=False)[0]", id="need_weights-False"),
    pytest.param("return self.attn(x, x, x, pad, False)[0]", id="positional-False"),
    pytest.param("return self.attn(x, x, x, need_weights=self.training)[0]", id="unknown-value"),
    pytest.param("return self.attn(x, x, x, **self.options)[0]", id="kwargs"),
    pytest.param("return self.attn(*self.inputs)[0]", id="star-args"),
    pytest.param("return self.attn(x, x, x)[0]  # noqa: MHA007", id="noqa"),
    pytest.param("return self.attn(x, x, x)[0]  # noqa", id="bare-noqa"),
]


@pytest.mark.parametrize("body", KEPT)
def test_used_or_unneeded_weights_are_not_flagged(check, body):
    assert check(module(body)) == []


def test_a_read_after_a_rebinding_is_not_a_read_of_the_tuple(check):
    found = check(module("res = self.attn(x, x, x)\nres = res[0]\nz = res * 2\nreturn z + res"))
    assert len(found) == 1 and "only read as `res[0]` (line 9)" in found[0].message


def test_a_closure_reading_the_weights_counts_as_a_read(check):
    body = "out, w = self.attn(x, x, x)\ndef show():\n    return w\nself.show = show\nreturn out"
    assert check(module(body)) == []


def test_a_keyword_argument_of_the_same_name_is_not_a_read(check):
    found = check(module("out, weights = self.attn(x, x, x)\nreturn self.log(out, weights=None)"))
    assert len(found) == 1 and "`weights` from `out, weights =`" in found[0].message


@pytest.mark.parametrize("example", RULE.invalid, ids=lambda e: e.code.splitlines()[-2].strip()[:40])
def test_each_invalid_example_has_a_short_headline_with_the_setting_and_the_discard(check, example):
    found = check(example.code)
    assert found and found[0].severity == Severity.WARNING == example.severity
    finding = found[0]
    assert len(finding.message) <= HEADLINE_LIMIT, finding.message
    assert re.search(r" computes attention weights nobody reads \((default need_weights=True|need_weights=True)\)",
                     finding.message), finding.message
    assert finding.evidence[1] in finding.message  # how the weights are thrown away, with its line
    assert "Evidence:" not in finding.message and "Fix:" not in finding.message and "measured" not in finding.message
    assert finding.help == "pass need_weights=False (the output is unchanged)"


# ---- need_weights as written ---------------------------------------------------------------------------------------
def test_need_weights_true_keyword_positional_and_constant(check):
    keyword = check(module("return self.attn(x, x, x, need_weights=True)[0]"))[0]
    assert "need_weights=True" in keyword.evidence and "reads (need_weights=True): `[0]`" in keyword.message
    assert check(module("return self.attn(x, x, x, pad, True)[0]"))[0].evidence[0] == "need_weights=True"
    found = check(module("return self.attn(x, x, x, need_weights=WEIGHTS)[0]",
                         imports="import torch\nfrom torch import nn\nWEIGHTS = True\n"))
    assert found[0].line == FORWARD_LINE + 1
    assert found[0].evidence[0] == "need_weights=WEIGHTS resolves to True (`WEIGHTS` = True at line 3)"
    assert "(need_weights=WEIGHTS = True): `[0]` keeps only the output (line 9)" in found[0].message


def test_a_constant_false_is_not_flagged(check):
    assert check(module("return self.attn(x, x, x, need_weights=WEIGHTS)[0]",
                        imports="import torch\nfrom torch import nn\nWEIGHTS = False\n")) == []


FORWARDED = [
    pytest.param("""
        import torch.nn as nn
        attn = nn.MultiheadAttention(64, 8, batch_first=True)
        def f(x, need_weights=True):
            return attn(x, x, x, need_weights=need_weights)[0]
        """, id="parameter-default-True"),
    pytest.param("""
        import torch.nn as nn
        class Block(nn.Module):
            def __init__(self, need_weights=True):
                super().__init__()
                self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
                self.need_weights = need_weights
            def forward(self, x):
                return self.attn(x, x, x, need_weights=self.need_weights)[0]
        """, id="self-attribute-from-parameter"),
    pytest.param("""
        import torch.nn as nn
        attn = nn.MultiheadAttention(64, 8, batch_first=True)
        def f(x, want):
            flag = want
            return attn(x, x, x, need_weights=flag)[0]
        """, id="local-from-parameter"),
]


@pytest.mark.parametrize("source", FORWARDED)
def test_need_weights_forwarded_from_a_parameter_is_the_callers_choice(check, source):
    assert check(source) == []


# ---- which calls are MultiheadAttention calls ----------------------------------------------------------------------
ALIASES = [
    pytest.param("from torch.nn import MultiheadAttention as MHA\n", "MHA(64, 8, batch_first=True)",
                 id="from-import-as"),
    pytest.param("import torch\n", "torch.nn.modules.activation.MultiheadAttention(64, 8)", id="full-path"),
    pytest.param("import torch.ao.nn.quantizable as nnq\n", "nnq.MultiheadAttention(64, 8)", id="quantizable"),
    pytest.param("from torch.nn import *\n", "MultiheadAttention(64, 8)", id="star-import"),
]


@pytest.mark.parametrize(("imports", "build"), ALIASES)
def test_aliases_of_multihead_attention(check, imports, build):
    source = f"{imports}attn = {build}\ndef f(x):\n    return attn(x, x, x)[0]\n"
    found = check(source)
    assert len(found) == 1 and found[0].line == 4


def test_module_level_unpacking(check):
    source = "import torch.nn as nn\nattn = nn.MultiheadAttention(8, 2)\nx = None\nout, _ = attn(x, x, x)\n"
    found = check(source)
    assert len(found) == 1 and found[0].line == 4


def test_layers_in_a_module_list(check):
    source = """
        import torch.nn as nn
        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.MultiheadAttention(64, 8) for _ in range(3)])
            def forward(self, x):
                for layer in self.layers:
                    x = x + layer(x, x, x)[0]
                return x
        """
    assert [f.line for f in check(source)] == [9]


def test_functional_multi_head_attention_forward(check):
    args = "q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob"
    head = "import torch.nn.functional as F\ndef f(q, w, b, ow, ob, kpm):\n"
    assert len(check(f"{head}    return F.multi_head_attention_forward({args})[0]\n")) == 1
    positional = check(f"{head}    return F.multi_head_attention_forward({args}, True, kpm, True)[0]\n")
    assert len(positional) == 1 and positional[0].evidence[0] == "need_weights=True"
    assert check(f"{head}    return F.multi_head_attention_forward({args}, True, kpm, False)[0]\n") == []
    assert check(f"{head}    x, _ = F.multi_head_attention_forward({args}, need_weights=False)\n    return x\n") == []


# project classes and functions named like torch's in the rule's own examples: test_every_rule.py
DECOYS = [
    pytest.param("""
        import torch.nn as nn
        layer = nn.TransformerEncoderLayer(64, 8, batch_first=True)
        def f(x):
            return layer(x)[0]
        """, id="encoder-layer"),
    pytest.param("""
        import torch.nn.functional as F
        def f(q, k, v):
            return F.scaled_dot_product_attention(q, k, v)[0]
        """, id="sdpa"),
]


@pytest.mark.parametrize("source", DECOYS)
def test_decoys_are_not_flagged(check, source):
    assert check(source) == []


# ---- the fix -------------------------------------------------------------------------------------------------------
FIXES = [
    pytest.param("return self.attn(x, x, x)[0]", "return self.attn(x, x, x, need_weights=False)[0]", id="append"),
    pytest.param("return self.attn(x, x, x, pad, True)[0]", "return self.attn(x, x, x, pad, False)[0]",
                 id="positional-True"),
    pytest.param("return self.attn(x, x, x, need_weights = True)[0]",
                 "return self.attn(x, x, x, need_weights = False)[0]", id="keyword-True-spacing-kept"),
    pytest.param("out, _ = self.attn(\n    x,\n    x,\n    x,\n)\nreturn out",
                 "out, _ = self.attn(\n    x,\n    x,\n    x,\n    need_weights=False,\n)\nreturn out",
                 id="trailing-comma"),
    pytest.param("out = self.attn(x, x,\n                x)[0]\nreturn out",
                 "out = self.attn(x, x,\n                x, need_weights=False)[0]\nreturn out", id="multiline"),
    pytest.param("return self.attn(x, x, x, key_padding_mask=pad,)[0]",
                 "return self.attn(x, x, x, key_padding_mask=pad, need_weights=False,)[0]",
                 id="trailing-comma-one-line"),
]


def fixed(source: str, findings) -> str:
    return apply_fixes(textwrap.dedent(source), findings, unsafe=False)[0]


@pytest.mark.parametrize(("body", "after"), FIXES)
def test_fix_passes_need_weights_false_and_keeps_the_formatting(check, body, after):
    source = module(body)
    found = check(source)
    assert len(found) == 1
    fix = found[0].fix
    assert fix.applicability == SAFE and fix.title == "pass need_weights=False"
    assert fixed(source, found) == module(after)


def test_fix_replaces_a_constant_name_with_false(check):
    source = module("return self.attn(x, x, x, need_weights=WEIGHTS)[0]",
                    imports="import torch\nfrom torch import nn\nWEIGHTS = True\n")
    assert "need_weights=False)[0]" in fixed(source, check(source))


@pytest.mark.parametrize("body", [p.values[0] for p in DISCARDED])
def test_fix_is_idempotent(check, body):
    source = module(body)
    once = fixed(source, check(source))
    assert once != source
    assert check(once) == []
    assert apply_fixes(once, check(once), unsafe=True) == (once, 0)


def test_fix_edit_is_a_single_insertion(check):
    found = check(module("return self.attn(x, x, x)[0]"))
    (edit,) = found[0].fix.edits
    assert (edit.line, edit.end_line, edit.column, edit.end_column) == (8, 8, 33, 33)
    assert edit.content == ", need_weights=False"


# ---- the probe -----------------------------------------------------------------------------------------------------
def test_arguments_carry_the_module_and_the_setting(check):
    (finding,) = check(module("return self.attn(x, x, x)[0]"))
    assert dict(finding.arguments) == {"api": torchapi.MHA, "embed_dim": 64, "num_heads": 8, "batch_first": True,
                                       "need_weights": True}


def test_probe_confirms_a_bad_site(check):
    torch = pytest.importorskip("torch")
    (finding,) = check(module("return self.attn(x, x, x)[0]"))
    torch.manual_seed(0)
    status, evidence = RULE.probe(dict(finding.arguments), torch)
    assert status == CONFIRMED, evidence
    assert "need_weights=True ran SDPA 0 time(s), softmax 1 time(s)" in evidence
    assert "need_weights=False ran SDPA 1 time(s), softmax 0 time(s)" in evidence
    assert "weights of shape (4, 10, 10)" in evidence and "E=64, h=8" in evidence


def test_probe_does_not_confirm_a_fixed_site():
    torch = pytest.importorskip("torch")
    status, evidence = RULE.probe({"api": torchapi.MHA, "embed_dim": 64, "num_heads": 8, "need_weights": False},
                                  torch)
    assert status == NOT_CONFIRMED
    assert evidence.startswith("the site already passes need_weights=False") and "SDPA 1 time(s)" in evidence


def test_probe_on_the_functional_form_and_odd_heads_in_sequence_first_layout():
    torch = pytest.importorskip("torch")
    status, evidence = RULE.probe({"api": torchapi.MHA_FORWARD_FN, "need_weights": True}, torch)
    assert status == REPRODUCED and "run through nn.MultiheadAttention" in evidence  # no sizes: stand-ins
    assert evidence.startswith("reproduced with assumed num_heads=8 and embed_dim=64: "), evidence
    status, evidence = RULE.probe({"api": torchapi.ENCODER_LAYER, "d_model": 32, "nhead": 4, "need_weights": True},
                                  torch)
    assert status == CONFIRMED and "E=32, h=4" in evidence  # the layer's own sizes
    status, evidence = RULE.probe({"api": torchapi.MHA, "embed_dim": 60, "num_heads": 5, "need_weights": True},
                                  torch)
    assert status == CONFIRMED and "E=60, h=5" in evidence


def test_probe_restores_the_functions_it_counts(monkeypatch):
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    before = (functional.scaled_dot_product_attention, functional.softmax)
    RULE.probe({"api": torchapi.MHA, "need_weights": True}, torch)
    assert (functional.scaled_dot_product_attention, functional.softmax) == before


# ---- what the code shows about the path ----------------------------------------------------------------------------
SLOW_PATH = [
    pytest.param("nn.MultiheadAttention(64, 8)", "the module's batch_first is False (the default)",
                 id="batch_first-default"),
    pytest.param("nn.MultiheadAttention(64, 8, batch_first=False)", "the module's batch_first resolves to False",
                 id="batch_first-False"),
    pytest.param("nn.MultiheadAttention(60, 5, batch_first=True)", "the module's num_heads=5 is odd", id="odd-heads"),
    pytest.param("nn.MultiheadAttention(64, 8, bias=False, batch_first=True)", "the module's bias=False",
                 id="no-bias"),
    pytest.param("nn.MultiheadAttention(64, 8, batch_first=True)", None, id="fast-path-possible"),
]


@pytest.mark.parametrize(("build", "reason"), SLOW_PATH)
def test_evidence_says_when_the_call_always_takes_the_slow_path(check, build, reason):
    (finding,) = check(module("return self.attn(x, x, x)[0]", build=build))
    assert finding.severity == Severity.WARNING
    slow = [e for e in finding.evidence if e.startswith("this call always takes the slow path")]
    assert slow == ([f"this call always takes the slow path: {reason}"] if reason else [])


def test_the_functional_form_is_the_slow_path(check):
    source = ("import torch.nn.functional as F\ndef f(q, w, b, ow, ob):\n"
              "    return F.multi_head_attention_forward(q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob)[0]\n")
    (finding,) = check(source)
    assert finding.evidence[-1] == ("this call always takes the slow path: F.multi_head_attention_forward is the "
                                    "slow path itself")
