"""MHA011 attention-dropout-in-eval: attention dropout that no training flag gates."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import pytest

from mhalint import torchapi
from mhalint.finding import CONFIRMED, REPRODUCED, UNSAFE, Severity
from mhalint.fixes import apply_fixes
from mhalint.rule import load_rules

CODE = "MHA011"
RULE = load_rules()[CODE]
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

SDPA_SPELLINGS = [
    ("import torch.nn.functional as F", "F.scaled_dot_product_attention"),
    ("import torch", "torch.nn.functional.scaled_dot_product_attention"),
    ("from torch.nn.functional import scaled_dot_product_attention as sdpa", "sdpa"),
    ("import torch", "torch._C._nn.scaled_dot_product_attention"),
]


@pytest.fixture
def check(lint):
    def run(source: str, min_severity="info"):
        found = lint(textwrap.dedent(source), CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found
        return found
    return run


def module(forward: str, init: str = "self.p = p", params: str = "p=0.1", extra: str = "") -> str:
    """An nn.Module whose forward body is `forward` (one or more lines at 8 spaces)."""
    return (f"import torch\nimport torch.nn.functional as F\nfrom torch import nn\n{extra}"
            f"class Attention(nn.Module):\n    def __init__(self, {params}):\n        super().__init__()\n"
            f"        {init}\n    def forward(self, q, k, v):\n{textwrap.indent(textwrap.dedent(forward), ' ' * 8)}")


def severities(found) -> list:
    return [f.severity for f in found]


# ---- SDPA: what reaches dropout_p ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("imp", "callee"), SDPA_SPELLINGS, ids=[c for _, c in SDPA_SPELLINGS])
def test_every_spelling_with_a_constant_is_an_error(check, imp, callee):
    found = check(f"{imp}\ndef f(q, k, v):\n    return {callee}(q, k, v, dropout_p=0.1)\n")
    assert severities(found) == [Severity.ERROR]
    assert "dropout_p=0.1 with no training guard" in found[0].message


@pytest.mark.parametrize(("value", "expected"), [
    ("0.1", [Severity.ERROR]), ("0.0", []), ("0", []), ("None", []), ("DROP", [Severity.ERROR]),
    ("NO_DROP", []), ("self.p", [Severity.ERROR]), ("self.cfg.attn_dropout", [Severity.WARNING]),
])
def test_the_value_decides_the_severity(check, value, expected):
    source = module(f"return F.scaled_dot_product_attention(q, k, v, dropout_p={value})\n",
                    init="self.p = p\n        self.cfg = cfg", params="cfg, p=0.1", extra="DROP = 0.1\nNO_DROP = 0.0\n")
    assert severities(check(source)) == expected


def test_the_fifth_positional_argument_is_dropout_p(check):
    found = check("import torch.nn.functional as F\ndef f(q, k, v, m):\n"
                  "    return F.scaled_dot_product_attention(q, k, v, m, 0.2)\n")
    assert severities(found) == [Severity.ERROR]


def test_a_default_that_reaches_is_named_in_the_evidence(check):
    found = check(module("return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)\n"))
    assert severities(found) == [Severity.ERROR]
    assert "`self.p` (0.1)" in found[0].message
    assert any("defaults to 0.1" in line for line in found[0].evidence), found[0].evidence


def test_callers_in_the_file_decide_a_default(check):
    source = module("return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)\n") + \
        "model = Attention(p=0.0)\n"
    assert check(source) == []


@pytest.mark.parametrize("forward", [
    "return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)\n",
    "return F.scaled_dot_product_attention(q, k, v, dropout_p=(0.0 if not self.training else self.p))\n",
    "p = self.p if self.training else 0.0\nreturn F.scaled_dot_product_attention(q, k, v, dropout_p=p)\n",
    "p = self.p\nif not self.training:\n    p = 0.0\nreturn F.scaled_dot_product_attention(q, k, v, dropout_p=p)\n",
    "if self.training:\n    return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)\n"
    "return F.scaled_dot_product_attention(q, k, v)\n",
    "return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p * self.training)\n",
    "return F.scaled_dot_product_attention(q, k, v, dropout_p=0.0 if self.deterministic else self.p)\n",
])
def test_a_value_gated_on_the_mode_is_clean(check, forward):
    assert check(module(forward)) == []


def test_a_class_that_sets_its_own_state_on_train_is_clean(check):
    source = module("return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)\n") + \
        "    def train(self, mode=True):\n        self.p = 0.1 if mode else 0.0\n        return super().train(mode)\n"
    assert check(source) == []


HELPER = """
    import torch.nn.functional as F
    from torch import nn
    def attend(q, k, v, dropout_p):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    class Block(nn.Module):
        def __init__(self, p=0.1):
            super().__init__()
            self.p = p
        def forward(self, x):
            return attend(x, x, x, {passed})
    """


@pytest.mark.parametrize(("passed", "expected"), [
    ("dropout_p=self.p if self.training else 0.0", []),
    ("self.p if self.training else 0.0", []),
    ("dropout_p=0.0", []),
    ("dropout_p=self.p", [Severity.ERROR]),
])
def test_a_parameter_is_judged_by_its_callers(check, passed, expected):
    assert severities(check(HELPER.format(passed=passed))) == expected


def test_a_parameter_no_caller_fills_is_the_callers_business(check):
    assert check("import torch.nn.functional as F\ndef attend(q, k, v, p):\n"
                 "    return F.scaled_dot_product_attention(q, k, v, dropout_p=p)\n") == []


def test_a_project_function_named_like_sdpa_is_not_torch(check):
    assert check("def scaled_dot_product_attention(q, k, v, dropout_p=0.0): ...\n"
                 "def f(q):\n    return scaled_dot_product_attention(q, q, q, dropout_p=0.1)\n") == []


# ---- F.multi_head_attention_forward --------------------------------------------------------------------------------
MHA_FN = ("import torch.nn.functional as F\ndef f(q, w, b, ow, ob, training):\n"
          "    return F.multi_head_attention_forward(q, q, q, 8, 2, w, b, None, None, False, {p}, ow, ob{rest})\n")


@pytest.mark.parametrize(("p", "rest", "expected"), [
    ("0.1", "", [Severity.ERROR]),
    ("0.1", ", training=training", []),
    ("0.0", "", []),
    ("0.1", ", training=False", []),
])
def test_multi_head_attention_forward_defaults_to_training(check, p, rest, expected):
    found = check(MHA_FN.format(p=p, rest=rest))
    assert severities(found) == expected
    if expected:
        assert any("defaults to True" in line for line in found[0].evidence)


# ---- F.dropout on attention weights --------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "expected"), [
    ("w = (q @ k.transpose(-2, -1)).softmax(dim=-1)\nw = F.dropout(w, p=0.1)\n", [Severity.ERROR]),
    ("w = F.softmax(q @ k.transpose(-2, -1), dim=-1)\nw = F.dropout(w)\n", [Severity.ERROR]),
    ("w = torch.softmax(q @ k.transpose(-2, -1), -1)\nw = F.dropout(w, self.p)\n", [Severity.ERROR]),
    ("w = torch.softmax(q @ k.transpose(-2, -1), -1)\nw = F.dropout(w, self.p)  # noqa: MHA011\n", []),
    ("w = (q @ k.transpose(-2, -1)).softmax(dim=-1)\nw = F.dropout(w, 0.1, self.training)\n", []),
    ("w = (q @ k.transpose(-2, -1)).softmax(dim=-1)\nw = F.dropout(w, 0.1, training=self.training)\n", []),
    ("w = (q @ k.transpose(-2, -1)).softmax(dim=-1)\nw = F.dropout(w, p=0.0)\n", []),
    ("attn_weights = self.scores(q, k)\nattn_weights = F.dropout(attn_weights, p=0.1)\n", [Severity.WARNING]),
    ("h = self.mlp(q)\nh = F.dropout(h, p=0.1)\n", []),
    ("w = (q @ k.transpose(-2, -1)).softmax(dim=-1)\nif self.training:\n    w = F.dropout(w, p=0.1)\n", []),
])
def test_dropout_on_attention_weights(check, body, expected):
    # The file also calls SDPA: F.dropout alone makes a file worth parsing only on a line that drops a tensor
    # named like attention weights (the next test).
    source = module(body + "return w @ v\n") + "def g(q):\n    return F.scaled_dot_product_attention(q, q, q)\n"
    assert severities(check(source)) == expected


@pytest.mark.parametrize(("name", "expected"), [("attn", [Severity.ERROR]), ("attn_probs", [Severity.ERROR]),
                                                ("w", [])])
def test_a_file_with_only_f_dropout_is_read_when_it_drops_named_weights(check, name, expected):
    body = f"{name} = (q @ k.transpose(-2, -1)).softmax(dim=-1)\nreturn F.dropout({name}, 0.1) @ v\n"
    assert severities(check(module(body))) == expected


def test_the_default_p_of_f_dropout_is_named(check):
    found = check(module("attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)\nreturn F.dropout(attn) @ v\n"))
    assert any("F.dropout's default, 0.5" in line for line in found[0].evidence), found[0].evidence
    assert dict(found[0].arguments)["dropout_p"] == 0.5


# ---- the fix --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("call", "fixed"), [
    ("F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)",
     "F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)"),
    ("F.scaled_dot_product_attention(q, k, v, None, self.p)",
     "F.scaled_dot_product_attention(q, k, v, None, self.p if self.training else 0.0)"),
    ("F.scaled_dot_product_attention(\n    q, k, v,\n    dropout_p=self.p,\n)",
     "F.scaled_dot_product_attention(\n    q, k, v,\n    dropout_p=self.p if self.training else 0.0,\n)"),
    ("F.dropout(attn_scores.softmax(-1), self.p) @ v",
     "F.dropout(attn_scores.softmax(-1), self.p, training=self.training) @ v"),
])
def test_the_fix_gates_on_self_training_and_is_unsafe(check, call, fixed):
    source = module(f"return {call}\n")
    found = check(source)
    assert len(found) == 1 and found[0].fix is not None and found[0].fix.applicability == UNSAFE
    after, applied = apply_fixes(source, found, unsafe=True)
    assert applied == 1 and after == module(f"return {fixed}\n")
    assert check(after) == []
    assert apply_fixes(source, found, unsafe=False) == (source, 0)


def test_no_fix_outside_an_nn_module(check):
    found = check("import torch.nn.functional as F\nclass Plain:\n    def __init__(self):\n        self.p = 0.1\n"
                  "    def run(self, q):\n        return F.scaled_dot_product_attention(q, q, q, dropout_p=self.p)\n")
    assert len(found) == 1 and found[0].fix is None
    assert "dropout_p=self.p if self.training else 0.0" in found[0].help


def test_a_module_through_a_project_base_class_gets_the_fix(check):
    source = ("import torch.nn.functional as F\nfrom torch import nn\nclass Base(nn.Module):\n    pass\n"
              "class A(Base):\n    def forward(self, q):\n"
              "        return F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)\n")
    assert check(source)[0].fix is not None


def test_bad_example_fixed_equals_the_fixed_example(lint):
    bad = (EXAMPLES / "mha011_attention_dropout_in_eval_bad.py").read_text()
    after, applied = apply_fixes(bad, lint(bad, CODE), unsafe=True)
    assert applied == 1
    assert "dropout_p=self.dropout if self.training else 0.0)  # MHA011" in after
    assert [f for f in lint(after) if f.code == CODE] == []


# ---- messages -------------------------------------------------------------------------------------------------------


# ---- the probe and the runtime check --------------------------------------------------------------------------------
@pytest.mark.parametrize("arguments", [
    {"api": torchapi.SDPA, "dropout_p": 0.1}, {"api": torchapi.SDPA, "dropout_p": None},
    {"api": torchapi.MHA_FORWARD_FN, "dropout_p": 0.2}, {"api": "torch.nn.functional.dropout", "dropout_p": 0.5},
])
def test_probe_confirms_with_numbers(torch, arguments):
    status, evidence = RULE.probe(dict(arguments), torch)
    assert status == (CONFIRMED if arguments["dropout_p"] else REPRODUCED), evidence
    assert evidence.startswith("" if arguments["dropout_p"] else "reproduced with assumed dropout_p=0.1: ")
    assert "two identical eval calls differed by up to" in evidence
    assert ("a stand-in" in evidence) == (arguments["dropout_p"] is None)


def _reports(torch, program: str) -> list:
    import mhalint

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mhalint.guard() as guard:
            exec(compile(textwrap.dedent(program), "<mha011>", "exec"), {"__name__": "__main__"})  # noqa: S102
    return [entry for entry in guard.reports() if entry.report.code == CODE]


MHA_FN_PROGRAM = """
    import torch
    import torch.nn.functional as F
    from torch import nn
    mha = nn.MultiheadAttention(8, 2)
    x = torch.randn(3, 1, 8)
    args = (x, x, x, 8, 2, mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.1, mha.out_proj.weight,
            mha.out_proj.bias)
    with torch.no_grad():
        F.multi_head_attention_forward(*args{rest})
    """


@pytest.mark.parametrize(("rest", "reported"), [("", 1), (", training=False", 0)])
def test_guard_sees_multi_head_attention_forward_dropping_without_gradients(torch, rest, reported):
    assert len(_reports(torch, MHA_FN_PROGRAM.format(rest=rest))) == reported


def test_guard_leaves_dropout_with_gradients_alone(torch):
    program = """
        import torch
        import torch.nn.functional as F
        q = torch.randn(1, 2, 4, 8, requires_grad=True)
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).sum().backward()
        """
    assert _reports(torch, program) == []
