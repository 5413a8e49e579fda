"""MHA012 averaged-weights-per-head: nn.MultiheadAttention's head-averaged (N, L, S) weights read as per-head
(N, num_heads, L, S) weights."""

from __future__ import annotations

import re
import textwrap

import pytest
from aliases import spellings

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, NOT_CONFIRMED, REPRODUCED, UNSAFE, Severity
from mhalint.fixes import apply_fixes
from mhalint.rule import load_rules
from mhalint.rules.averaged_weights_per_head import AveragedWeightsPerHead

CODE = "MHA012"
RULE = load_rules()[CODE]
ERROR, WARNING = Severity.ERROR, Severity.WARNING


@pytest.fixture
def check(lint):
    def run(source: str, min_severity="info"):
        found = lint(textwrap.dedent(source), CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def module(body: str, call_args: str = "x, x, x", build: str = "nn.MultiheadAttention(64, 8, batch_first=True)",
           imp: str = "import torch.nn as nn", params: str = "x") -> str:
    """A block whose forward unpacks `out, w = self.attn(...)` and then runs `body` (indented 8)."""
    lines = "".join(f"        {line}\n" for line in textwrap.dedent(body).strip("\n").splitlines())
    return (f"import torch\n{imp}\nclass Block(torch.nn.Module):\n    def __init__(self, d=64, nhead=8):\n"
            f"        super().__init__()\n        self.nhead = nhead\n        self.attn = {build}\n"
            f"    def forward(self, {params}):\n        out, w = self.attn({call_args})\n{lines}")


def severities(found) -> list:
    return [f.severity for f in found]


# ---- aliases -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("imp", "callee"), spellings("MultiheadAttention"))
def test_every_spelling_of_multihead_attention(check, imp, callee):
    source = module("return [w[:, h] for h in range(self.attn.num_heads)]", imp=imp,
                    build=f"{callee}(64, 8, batch_first=True)")
    assert [(f.line, f.severity) for f in check(source)] == [(9, ERROR)]


def test_functional_multi_head_attention_forward(check):
    source = ("import torch.nn.functional as F\nHEADS = 4\ndef f(q, w, b, ow, ob):\n"
              "    out, attn = F.multi_head_attention_forward(q, q, q, 64, HEADS, w, b, None, None, False, 0.0,\n"
              "                                               ow, ob)\n"
              "    return [attn[:, i] for i in range(HEADS)]\n")
    (finding,) = check(source)
    assert finding.severity is ERROR and finding.line == 4
    assert finding.message.startswith("F.multi_head_attention_forward weights are averaged over heads by default")
    assert dict(finding.arguments)["num_heads"] == 4


def test_a_project_class_named_like_torch_is_not_flagged(check):
    source = ("class MultiheadAttention:\n    def __call__(self, *a):\n        return a\n"
              "attn = MultiheadAttention()\nnum_heads = 8\n"
              "def f(x):\n    out, w = attn(x, x, x)\n    return [w[:, h] for h in range(num_heads)]\n")
    assert check(source) == []


# ---- the per-head uses, and their severity ---------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "severity", "phrase"), [
    # a loop over the module's own head count
    ("return [w[:, h] for h in range(self.attn.num_heads)]", ERROR, "`w[:, h]` (line 10) reads axis 1"),
    ("maps = []\nfor h in range(self.nhead):\n    maps.append(w[0, h])\nreturn maps", ERROR, "`w[0, h]`"),
    ("return [w[0][h] for h in range(self.attn.num_heads)]", ERROR, "`w[0][h]`"),
    ("return [w.detach().cpu()[:, h] for h in range(self.nhead)]", ERROR, "reads axis 1"),
    ("return [w[:, h] for h in range(0, self.nhead)]", ERROR, "reads axis 1"),
    # a reshape with the head count
    ("B, L, _ = x.shape\nreturn w.view(B, self.nhead, L, L)", ERROR, "reshapes them with the head count"),
    ("B, L, _ = x.shape\nreturn w.reshape(B * self.attn.num_heads, L, -1)", ERROR, "reshapes them"),
    ("B, L, _ = x.shape\nreturn w.reshape((B, self.nhead, L, L))", ERROR, "reshapes them"),
    # four sizes from three axes
    ("B, H, L, S = w.shape\nreturn H", ERROR, "unpacks 4 sizes from them"),
    ("B, H, L, S = w.size()\nreturn H", ERROR, "unpacks 4 sizes from them"),
    # names alone
    ("return [w[:, h] for h in range(n_heads)]", WARNING, "as head `h`"),
    ("return w[:, head]", WARNING, "as head `head`"),
    ("return w[:, self.head_idx]", WARNING, "as head `head_idx`"),
    ("B, L, _ = x.shape\nreturn w.view(B, n_heads, L, L)", WARNING, "reshapes them with the head count"),
    ("per_head_attn = w\nreturn per_head_attn", WARNING, "`per_head_attn` (line 10) names them per head"),
    ("self.head_weights = w\nreturn out", WARNING, "`head_weights` (line 10) names them per head"),
])
def test_per_head_uses_are_flagged(check, body, severity, phrase):
    found = check(module(body))
    assert [(f.line, f.severity) for f in found] == [(9, severity)], found
    assert phrase in found[0].message, found[0].message
    assert len(found[0].message) <= HEADLINE_LIMIT


@pytest.mark.parametrize("body", [
    "return w[:, 0]",  # the first query's row (a CLS token): a literal index is not a head
    "return w.mean(dim=1)",  # averaged over the queries: a common, correct reduction
    "return w.mean(1), w.sum(-1), w.max(dim=-1)",
    "return w[0]",
    "return w[:, :, head]",  # axis 2 is the keys
    "B, L, S = w.shape\nreturn w.view(B, L * S)",
    "return [w[:, i] for i in range(w.size(1))]",  # the queries, by their count
    "return [w[:, i] for i in range(8)]",  # a literal bound: the queries as likely as the heads
    "return [w[:, q] for q in range(x.shape[1])]",
    "return w.view(w.size(0), -1)",
    "return out, w",
    "heads = w.shape[0]\nreturn heads",
    "self.attn_maps = w\nreturn out",
    "return w.unsqueeze(1)",
])
def test_averaged_uses_are_not_flagged(check, body):
    assert check(module(body)) == []


@pytest.mark.parametrize("body", [
    "return [w[:, h] for h in range(self.attn.num_heads)]",
    "B, H, L, S = w.shape\nreturn H",
    "per_head_attn = w\nreturn per_head_attn",
])
def test_per_head_weights_are_not_flagged(check, body):
    assert check(module(body, call_args="x, x, x, average_attn_weights=False")) == []
    assert check(module(body, call_args="x, x, x, None, True, None, False")) == []  # positionally


# ---- average_attn_weights and need_weights -------------------------------------------------------------------------
BODY = "return [w[:, h] for h in range(self.attn.num_heads)]"


@pytest.mark.parametrize(("call_args", "prelude", "setting"), [
    ("x, x, x", "", "by default"),
    ("x, x, x, average_attn_weights=True", "", "(average_attn_weights=True)"),
    ("x, x, x, None, True, None, True", "", "(average_attn_weights=True)"),
    ("x, x, x, average_attn_weights=AVG", "AVG = True\n", "(average_attn_weights=`AVG` = True)"),
    ("x, x, x, need_weights=True", "", "by default"),
])
def test_average_attn_weights_that_is_true(check, call_args, prelude, setting):
    source = prelude + module(BODY, call_args=call_args)
    (finding,) = check(source)
    assert f"weights are averaged over heads {setting}, but" in finding.message


@pytest.mark.parametrize(("call_args", "prelude"), [
    ("x, x, x, average_attn_weights=False", ""),
    ("x, x, x, average_attn_weights=AVG", "AVG = False\n"),
    ("x, x, x, need_weights=False", ""),
    ("x, x, x, None, False", ""),
    ("x, x, x, average_attn_weights=self.average", ""),  # unknown
    ("x, x, x, **kwargs", ""),  # may carry average_attn_weights=False
])
def test_average_attn_weights_false_unknown_or_no_weights(check, call_args, prelude):
    source = prelude + module(BODY, call_args=call_args, params="x, **kwargs")
    assert check(source) == []


def test_a_parameter_that_one_caller_passes_true(check):
    source = ("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n"
              "def f(x, avg):\n    out, w = attn(x, x, x, average_attn_weights=avg)\n"
              "    return [w[:, h] for h in range(attn.num_heads)]\n"
              "def g(x):\n    f(x, True)\n    f(x, False)\n")
    (finding,) = check(source)
    assert "(average_attn_weights=`avg` = True)" in finding.message
    assert any("other calls pass False (line 8)" in e for e in finding.evidence), finding.evidence
    assert finding.fix is None  # the parameter is the callers' choice: no fix in place


def test_unbatched_query_is_not_flagged(check):
    source = module("return [w[:, h] for h in range(self.attn.num_heads)]", call_args="q, q, q")
    source = source.replace("        out, w = self.attn(q, q, q)\n",
                            "        L, E = x.shape\n        q = x\n        out, w = self.attn(q, q, q)\n")
    assert check(source) == []


# ---- following the weights -------------------------------------------------------------------------------------------
def test_through_a_self_attribute_read_in_another_method(check):
    source = module("self.last = w.detach()\nreturn out") + (
        "    def head_maps(self):\n        return [self.last[0, h] for h in range(self.nhead)]\n")
    (finding,) = check(source)
    assert finding.severity is ERROR and finding.line == 9
    assert "`self.last` holds the weights (line 10)" in finding.evidence


def test_through_a_return_to_the_caller(check):
    source = module("return out, w") + (
        "class Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.block = Block()\n"
        "    def forward(self, x):\n        y, attn = self.block(x)\n        B, H, L, S = attn.shape\n"
        "        return y\n")
    (finding,) = check(source)
    assert finding.severity is ERROR and finding.line == 9
    assert any(e.startswith("returned by `forward()` to the call at line 16") for e in finding.evidence)


@pytest.mark.parametrize(("count", "severity"), [
    ("self.nhead", ERROR),  # the helper's num_heads is what the caller passes: the module's own count
    ("k", WARNING),  # unknown: only its name says it counts heads
])
def test_through_a_helper_function(check, count, severity):
    source = module(f"return out, plot(w, {count})", params="x, k") + (
        "def plot(weights, num_heads):\n    return [weights[:, h] for h in range(num_heads)]\n")
    (finding,) = check(source)
    assert finding.severity is severity
    assert any("passed as a positional argument to `plot(...)` at line 10, parameter `weights` of `plot()`" in e
               for e in finding.evidence)


def test_through_a_name_holding_the_result_tuple(check):
    source = ("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n"
              "def f(x):\n    res = attn(x, x, x)\n    B, H, L, S = res[1].shape\n    return H\n")
    assert [(f.line, f.severity) for f in check(source)] == [(4, ERROR)]


def test_through_subscript_one_of_the_call(check):
    source = ("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n"
              "def f(x):\n    return [attn(x, x, x)[1][:, h] for h in range(attn.num_heads)]\n")
    assert [(f.line, f.severity) for f in check(source)] == [(4, ERROR)]


def test_module_level_constant_head_count(check):
    source = ("import torch.nn as nn\nNUM_HEADS = 4\nattn = nn.MultiheadAttention(64, NUM_HEADS, batch_first=True)\n"
              "def f(x):\n    out, w = attn(x, x, x)\n    return [w[:, h] for h in range(NUM_HEADS)]\n")
    (finding,) = check(source)
    assert finding.severity is ERROR
    assert any("is the head count the module is built with" in e for e in finding.evidence), finding.evidence


def test_a_different_count_with_the_same_value_is_tied_by_the_constant(check):
    source = ("import torch.nn as nn\nHEADS = 4\nattn = nn.MultiheadAttention(64, 4, batch_first=True)\n"
              "def f(x):\n    out, w = attn(x, x, x)\n    return [w[:, h] for h in range(HEADS)]\n")
    (finding,) = check(source)
    assert finding.severity is ERROR
    assert any("`HEADS` is 4" in e for e in finding.evidence), finding.evidence


def test_weights_from_a_layer_list(check):
    source = ("import torch\nimport torch.nn as nn\nclass Enc(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.layers = nn.ModuleList([nn.MultiheadAttention(64, 8, batch_first=True) for _ in range(2)])\n"
              "    def forward(self, x):\n        for layer in self.layers:\n            x, w = layer(x, x, x)\n"
              "            B, H, L, S = w.shape\n        return x\n")
    assert [(f.line, f.severity) for f in check(source)] == [(9, ERROR)]


# ---- what docstrings and comments say ------------------------------------------------------------------------------
def test_a_docstring_that_documents_per_head_weights(check):
    source = ('import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n'
              'def f(x):\n    """Self-attention.\n\n    Returns:\n        out: (batch, seq_len, dim)\n'
              '        attn_weights: (batch, num_heads, seq_len, seq_len)\n    """\n'
              '    out, attn_weights = attn(x, x, x)\n    return out, attn_weights\n')
    (finding,) = check(source)
    assert finding.severity is ERROR and finding.line == 10
    assert "the docstring of `f()` documents them as (batch, num_heads, seq_len, seq_len)" in finding.message


def test_a_model_output_class_that_documents_attentions_per_head(check):
    source = ('import torch.nn as nn\nclass Output:\n    """Output.\n\n    Args:\n'
              '        attentions (`torch.FloatTensor`): of shape `(batch_size, num_heads, sequence_length, '
              'sequence_length)`.\n    """\n    def __init__(self, hidden, attentions):\n'
              '        self.hidden = hidden\n\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n'
              'def f(x):\n    out, w = attn(x, x, x)\n    return Output(out, attentions=w)\n')
    (finding,) = check(source)
    assert finding.severity is ERROR and finding.line == 13
    assert "but `Output` documents `attentions` as (batch_size, num_heads, sequence_length, " in finding.message
    assert len(finding.message) <= HEADLINE_LIMIT
    assert any("the docstring of class `Output` documents `attentions`: (`torch.FloatTensor`): of shape "
               "`(batch_size, num_heads, sequence_length, sequence_length)`" in e
               for e in finding.evidence), finding.evidence


def test_a_shape_comment_that_documents_per_head_weights(check):
    source = module("return out, w").replace("self.attn(x, x, x)\n", "self.attn(x, x, x)  # w: (B, H, L, S)\n")
    (finding,) = check(source)
    assert finding.severity is ERROR
    assert "a comment (line 9) documents them as (B, H, L, S)" in finding.message


def test_a_comment_that_documents_averaged_weights_outweighs_a_name(check):
    source = module("per_head_attn = w\nreturn per_head_attn").replace(
        "self.attn(x, x, x)\n", "self.attn(x, x, x)  # w: (B, L, S)\n")
    assert check(source) == []


def test_a_three_way_unpacking_outweighs_a_name_but_not_code(check):
    assert check(module("B, L, S = w.shape\nper_head = w\nreturn per_head")) == []
    found = check(module("B, L, S = w.shape\nreturn [w[:, h] for h in range(self.nhead)]"))
    assert severities(found) == [ERROR]


# ---- the finding -----------------------------------------------------------------------------------------------------
def test_headline_evidence_help_and_explanation(check):
    (finding,) = check(module(BODY))
    assert finding.message == ("nn.MultiheadAttention weights are averaged over heads by default, but `w[:, h]` "
                               "(line 10) reads axis 1 (the queries) as head `h`")
    assert finding.evidence == (
        "average_attn_weights is not passed (default True)",
        "so the weights are (N, L, S), averaged over the heads",
        "`w` holds the weights (line 9)",
        "`for h in range(self.attn.num_heads)` at line 10: `self.attn.num_heads` is the module's head count",
        "`w[:, h]` at line 10 takes query row `h` of the average, not head `h`")
    assert finding.help == "pass average_attn_weights=False to get per-head weights of shape (N, num_heads, L, S)"
    explanation = " ".join(finding.explanation.split())
    assert "docs/torch-facts.md#averaged-weights" in explanation and "nn/functional.py:7051-7053" in explanation
    assert "in a torch 2.13 experiment on CPU" in explanation and "measured" not in explanation
    assert 0.26 < float(re.search(r"it was ([0-9.]+) away from head", explanation).group(1)) < 0.27
    assert "0.16 to 0.47 over ten seeds" in explanation
    assert "shape '[2, 4, 5, 5]' is invalid for input of size 50" in explanation


def test_one_finding_per_call_with_the_strongest_use_first(check):
    (finding,) = check(module("per_head = w\nB, H, L, S = w.shape\nreturn per_head"))
    assert finding.severity is ERROR
    assert "unpacks 4 sizes from them" in finding.message
    assert any("`per_head` (line 10) is named as per-head weights" in e for e in finding.evidence)


def test_a_long_index_is_shortened_in_the_headline(check):
    index = "self.some_very_long_configuration_object.attention_probe.head_idx"
    (finding,) = check(module(f"return w[:, {index}]"))
    assert len(finding.message) <= HEADLINE_LIMIT
    assert finding.message.endswith("reads axis 1 (the queries) as head `head_idx`")


def test_arguments_carry_what_the_probe_needs(check):
    (finding,) = check(module(BODY, build="nn.MultiheadAttention(32, 4, batch_first=True)"))
    assert dict(finding.arguments) == {"api": torchapi.MHA, "average_attn_weights": True, "embed_dim": 32,
                                       "num_heads": 4, "batch_first": True}


def test_noqa_on_the_call_line(check):
    source = module(BODY).replace("self.attn(x, x, x)\n", "self.attn(x, x, x)  # noqa: MHA012\n")
    assert check(source) == []


def test_every_user_visible_text_is_a_named_message():
    assert set(RULE.messages()) == {"AVERAGED_READ_PER_HEAD"}


def test_the_documentation_cites_the_anchor_and_says_where_numbers_come_from():
    documentation = " ".join(RULE.documentation().split())
    assert "docs/torch-facts.md#averaged-weights" in documentation
    assert "In a torch 2.13 experiment on CPU" in documentation
    assert "no runtime check" in documentation
    for stale in ("Measured", "measured", "(in progress)"):
        assert stale not in documentation


# ---- the fix ---------------------------------------------------------------------------------------------------------
def fixed(check, source: str) -> str:
    source = textwrap.dedent(source)
    return apply_fixes(source, check(source), unsafe=True)[0]


def test_fix_adds_average_attn_weights_false(check):
    source = module(BODY)
    (finding,) = check(source)
    assert finding.fix.applicability == UNSAFE
    assert apply_fixes(source, [finding], unsafe=False)[1] == 0  # unsafe: not applied without --unsafe-fixes
    after = fixed(check, source)
    assert "out, w = self.attn(x, x, x, average_attn_weights=False)\n" in after
    assert check(after) == []


def test_fix_replaces_a_true_in_place_and_keeps_the_layout(check):
    source = module(BODY, call_args="\n            x, x, x,\n            average_attn_weights=True,\n        ")
    after = fixed(check, source)
    assert "            x, x, x,\n            average_attn_weights=False,\n        )" in after
    assert check(after) == []


def test_no_fix_for_a_warning(check):
    (finding,) = check(module("return w[:, head]"))
    assert finding.severity is WARNING and finding.fix is None


# ---- the probe -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("heads", [4, 8, None])
def test_probe_confirms_a_bad_site(torch, heads):
    arguments = {"api": torchapi.MHA, "average_attn_weights": True, "embed_dim": 64, "batch_first": True}
    if heads is not None:
        arguments["num_heads"] = heads
    status, evidence = AveragedWeightsPerHead.probe(arguments, torch)
    assert status == (CONFIRMED if heads else REPRODUCED), evidence
    assert evidence.startswith("" if heads else "reproduced with assumed num_heads=8: "), evidence
    assert "for every head it is query row `head` of the average (max diff 0.0e+00)" in evidence
    assert float(re.search(r"and is ([0-9.]+) away from head", evidence).group(1)) > 0.05
    assert f"{heads or 8} heads" in evidence


def test_probe_does_not_confirm_per_head_weights(torch):
    status, evidence = AveragedWeightsPerHead.probe({"api": torchapi.MHA, "average_attn_weights": False}, torch)
    assert status == NOT_CONFIRMED and "they are per head" in evidence


def test_probe_runs_through_the_cli_on_the_example(torch, probed_examples):
    result = probed_examples.of("mha012_averaged_weights_per_head_bad.py")
    assert "probe confirmed" in result.output and "query row `head` of the average" in result.output, result.output
