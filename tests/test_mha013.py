"""MHA013 sdpa-heads-layout: q, k, v given to F.scaled_dot_product_attention as (N, L, H, E), and a correct
(N, H, L, E) output merged back without the inverse transpose."""

from __future__ import annotations

import re
import textwrap

import pytest

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, UNSAFE, Severity
from mhalint.fixes import apply_fixes
from mhalint.rules.sdpa_heads_layout import SdpaHeadsLayout

CODE = "MHA013"

ALIASES = [
    ("import torch.nn.functional as F", "F.scaled_dot_product_attention"),
    ("import torch", "torch.nn.functional.scaled_dot_product_attention"),
    ("from torch.nn import functional as F", "F.scaled_dot_product_attention"),
    ("from torch.nn.functional import scaled_dot_product_attention", "scaled_dot_product_attention"),
    ("from torch.nn.functional import scaled_dot_product_attention as sdpa", "sdpa"),
    ("import torch", "torch._C._nn.scaled_dot_product_attention"),
    ("import torch", "torch.ops.aten.scaled_dot_product_attention"),
]


@pytest.fixture
def check(lint):
    def run(source: str, min_severity=None):
        found = lint(textwrap.dedent(source), CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def module(split: str, after: str = "y = y.transpose(1, 2).contiguous().view(B, T, C)",
           imp: str = "import torch.nn.functional as F", callee: str = "F.scaled_dot_product_attention",
           call_args: str = "q, k, v, is_causal=True") -> str:
    """nanoGPT's attention: a shape unpacking, one projection split into q, k, v, each given `split`."""
    return textwrap.dedent(f"""\
        import torch
        import torch.nn as nn
        {imp}
        class CausalSelfAttention(nn.Module):
            def __init__(self, n_embd, n_head):
                super().__init__()
                self.n_head = n_head
                self.n_embd = n_embd
                self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            def forward(self, x):
                B, T, C = x.size()
                q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
                q = q{split}
                k = k{split}
                v = v{split}
                y = {callee}({call_args})
                {after}
                return y
        """)


NO_TRANSPOSE = ".view(B, T, self.n_head, C // self.n_head)"
TRANSPOSED = ".view(B, T, self.n_head, C // self.n_head).transpose(1, 2)"


# ---- the split without its transpose -----------------------------------------------------------------------------
@pytest.mark.parametrize(("imp", "callee"), ALIASES, ids=[c for _, c in ALIASES])
def test_every_alias(check, imp, callee):
    found = check(module(NO_TRANSPOSE, "y = y.contiguous().view(B, T, C)", imp, callee))
    assert [(f.line, f.severity) for f in found] == [(16, Severity.ERROR)]
    assert check(module(TRANSPOSED, imp=imp, callee=callee)) == []


def test_headline_evidence_help_and_explanation(check):
    (finding,) = check(module(NO_TRANSPOSE, "y = y.contiguous().view(B, T, C)"))
    assert finding.message == ("F.scaled_dot_product_attention gets `q`, `k` and `v` as (N, L, H, E): `T` (line 11) "
                               "is axis 1 and the heads axis 2, so it attends across heads")
    assert len(finding.message) <= HEADLINE_LIMIT
    assert finding.evidence[:3] == ("query=`q` is (N, L, H, E)",
                                    "`B, T, C = x.size()` at line 11: `T` is the sequence axis of `x`",
                                    "the size `self.n_head` names the head count")
    assert "then `q.view(B, T, self.n_head, C // self.n_head)` at line 13" in finding.evidence
    assert "key=`k` is (N, L, H, E)" in finding.evidence
    assert finding.help == ("transpose the heads before the sequence: `F.scaled_dot_product_attention("
                            "q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).transpose(1, 2)`")
    explanation = " ".join(finding.explanation.split())
    assert "docs/torch-facts.md#sdpa-heads-layout" in explanation and "measured" not in explanation
    assert "2.39 off" in explanation and "2.02 to 3.73 over 30 draws" in explanation
    assert "The size of tensor a (6) must match the size of tensor b (10)" in explanation
    assert dict(finding.arguments) == {"api": torchapi.SDPA, "form": "split", "is_causal": True}


@pytest.mark.parametrize("split", [
    ".reshape(B, T, self.n_head, C // self.n_head)",
    ".view(B, T, self.n_head, -1)",
    ".view(B, T, self.num_heads, C // self.num_heads)",
    ".view(B, T, self.n_head, C // self.n_head).contiguous()",
    ".view(B, T, self.n_head, C // self.n_head).transpose(1, 2).transpose(1, 2)",
    ".view(B, T, self.n_head, C // self.n_head).permute(0, 2, 1, 3).permute(0, 2, 1, 3)",
])
def test_other_spellings_of_the_split(check, split):
    src = module(split, "y = y.contiguous().view(B, T, C)").replace("self.num_heads", "self.n_head") \
        if "num_heads" not in split else module(split, "y = y.contiguous().view(B, T, C)")
    assert [(f.line, f.severity) for f in check(src)] == [(16, Severity.ERROR)]


@pytest.mark.parametrize("split", [
    TRANSPOSED,
    ".view(B, T, self.n_head, C // self.n_head).permute(0, 2, 1, 3)",
    ".view(B, T, self.n_head, C // self.n_head).swapaxes(1, 2)",
    ".view(B, T, self.n_head, C // self.n_head).transpose(2, 1)",
    ".view(B, self.n_head, T, C // self.n_head)",  # already heads-first (a wrong split, but not this rule's)
    ".view(B, T, C)",  # 3-D: one head, nothing to transpose
    ".view(B, T, 1, C)",  # one head at axis 2: both layouts are the same
    ".view(B * self.n_head, T, C // self.n_head)",  # heads folded into the batch
])
def test_correct_and_other_layouts_are_clean(check, split):
    assert check(module(split, "y = y")) == []


def test_the_merge_of_a_correct_call_is_clean_in_every_style(check):
    for after in ("y = y.transpose(1, 2).contiguous().view(B, T, C)", "y = y.transpose(1, 2).reshape(B, T, C)",
                  "y = y.permute(0, 2, 1, 3).reshape(B, T, -1)", "y = y.transpose(1, 2).flatten(2)",
                  "y = y.reshape(B * self.n_head, T, -1)", "y = y"):
        assert check(module(TRANSPOSED, after)) == [], after


def test_einops_split_and_an_axis_that_is_not_the_heads(check):
    source = """\
        from einops import rearrange
        import torch.nn.functional as F
        def f(x):
            q = rearrange(x, 'b n (h d) -> b {out}', h=8)
            return F.scaled_dot_product_attention(q, q, q)
        """
    found = check(source.format(out="n h d"))
    assert [(f.line, f.severity) for f in found] == [(5, Severity.ERROR)]
    assert found[0].message.startswith("F.scaled_dot_product_attention gets `q` as (N, L, H, E): `n` (line 4)")
    assert check(source.format(out="h n d")) == []


def test_attention_over_another_axis_per_position_is_clean(check):
    # (B, T, N, D): spatial attention over N agents/patches per frame; axis 2 is not the heads
    assert check("""\
        import torch.nn.functional as F
        def f(x):
            B, T, N, D = x.shape
            q = x.reshape(B, T, N, D)
            return F.scaled_dot_product_attention(q, q, q)
        """) == []


def test_the_fused_qkv_permute_and_unbind(check):
    source = """\
        import torch.nn.functional as F
        def f(x, qkv_proj, num_heads):
            B, N, C = x.shape
            qkv = qkv_proj(x).reshape(B, N, 3, num_heads, C // num_heads).permute({order})
            q, k, v = {read}
            x = F.scaled_dot_product_attention(q, k, v)
            return x.transpose(1, 2).reshape(B, N, C)
        """
    for read in ("qkv.unbind(0)", "qkv[0], qkv[1], qkv[2]"):
        found = check(source.format(order="2, 0, 1, 3, 4", read=read))
        assert [(f.line, f.severity) for f in found] == [(6, Severity.ERROR)], read
        assert check(source.format(order="2, 0, 3, 1, 4", read=read)) == [], read


def test_only_names_give_a_warning(check):
    found = check("""\
        from torch.nn.functional import scaled_dot_product_attention as sdpa
        def f(x, bsz, seq_len, num_heads, head_dim):
            q = x.view(bsz, seq_len, num_heads, head_dim)
            return sdpa(q, q, q)
        """)
    assert [(f.line, f.severity, f.fix) for f in found] == [(4, Severity.WARNING, None)]


def test_unknown_inputs_stay_silent(check):
    assert check("""\
        import torch.nn.functional as F
        def f(q, k, v, a, b, c, d):
            q = q.view(a, b, c, d)
            return F.scaled_dot_product_attention(q, k, v)
        """) == []
    assert check("import torch.nn.functional as F\ndef f(q, k, v):\n"
                 "    return F.scaled_dot_product_attention(q, k, v)\n") == []


def test_q_k_v_that_disagree_give_no_finding(check):
    assert check("""\
        import torch.nn.functional as F
        def f(x, mem, n_head):
            B, T, C = x.shape
            q = x.view(B, T, n_head, C // n_head)
            k = mem.view(B, T, n_head, C // n_head).transpose(1, 2)
            return F.scaled_dot_product_attention(q, k, k)
        """) == []


def test_across_a_helper_and_a_self_attribute(check):
    found = check("""\
        import torch
        import torch.nn.functional as F
        def split_heads(t, n_head):
            B, T, C = t.shape
            return t.view(B, T, n_head, C // n_head)
        class Attn(torch.nn.Module):
            def __init__(self, n_head):
                super().__init__()
                self.n_head = n_head
            def forward(self, x):
                q = split_heads(x, self.n_head)
                self.q = q
                return F.scaled_dot_product_attention(self.q, q, q)
        """)
    assert [(f.line, f.severity) for f in found] == [(13, Severity.ERROR)]
    assert "`self.q` and `q`" in found[0].message


def test_noqa(check):
    source = module(NO_TRANSPOSE, "y = y").replace("is_causal=True)", "is_causal=True)  # noqa: MHA013")
    assert check(source) == []


# ---- the fix -------------------------------------------------------------------------------------------------------
def test_fix_transposes_inputs_and_output_and_the_result_is_clean(check):
    source = module(NO_TRANSPOSE, "y = y.contiguous().view(B, T, C)")
    found = check(source)
    assert found[0].fix.applicability == UNSAFE
    after, applied = apply_fixes(source, found, unsafe=True)
    assert applied == 1
    assert after.splitlines()[15] == ("        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), "
                                      "v.transpose(1, 2), is_causal=True).transpose(1, 2)")
    assert check(after, min_severity="info") == []
    assert apply_fixes(source, found, unsafe=False) == (source, 0)


def test_fix_transposes_only_the_inputs_when_the_output_is_transposed_back(check):
    source = module(NO_TRANSPOSE)  # forgot only the inputs' transposes: the merge already transposes back
    found = check(source)
    after, applied = apply_fixes(source, found, unsafe=True)
    assert applied == 1
    assert after.splitlines()[15] == ("        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), "
                                      "v.transpose(1, 2), is_causal=True)")
    assert check(after, min_severity="info") == []


# ---- the merge back ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("after", "severity", "fixed"), [
    ("y = y.contiguous().view(B, T, C)", Severity.ERROR, "y = y.transpose(1, 2).contiguous().view(B, T, C)"),
    ("y = y.reshape(B, T, C)", Severity.ERROR, "y = y.transpose(1, 2).reshape(B, T, C)"),
    ("y = y.view(B, T, C)", Severity.ERROR, "y = y.transpose(1, 2).contiguous().view(B, T, C)"),
    ("y = y.reshape(B, -1, C)", Severity.WARNING, None),
])
def test_a_correct_output_merged_without_the_transpose(check, after, severity, fixed):
    source = module(TRANSPOSED, after)
    found = check(source)
    assert [(f.line, f.severity) for f in found] == [(17, severity)]
    assert "merges SDPA's (N, H, L, E) output (line 16) without `.transpose(1, 2)`" in found[0].message
    if fixed is None:
        assert found[0].fix is None
        return
    after_fix, applied = apply_fixes(source, found, unsafe=True)
    assert applied == 1 and after_fix.splitlines()[16] == "        " + fixed
    assert check(after_fix, min_severity="info") == []


def test_a_merge_chained_on_the_call(check):
    found = check("""\
        import torch.nn.functional as F
        def f(x, n_head):
            B, T, C = x.shape
            q = x.view(B, T, n_head, C // n_head).transpose(1, 2)
            return F.scaled_dot_product_attention(q, q, q).reshape(B, T, C)
        """)
    assert [(f.line, f.severity) for f in found] == [(5, Severity.ERROR)]
    assert found[0].help.endswith("`F.scaled_dot_product_attention(q, q, q).transpose(1, 2).reshape(B, T, C)`")


# ---- the probe -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [False, True])
def test_probe_confirms_the_split(torch, causal):
    status, evidence = SdpaHeadsLayout.probe({"api": torchapi.SDPA, "form": "split", "is_causal": causal}, torch)
    assert status == CONFIRMED, evidence
    wrong = float(re.search(r"is ([0-9.]+) off the transposed call", evidence).group(1))
    assert wrong > 1.0 and (abs(wrong - 2.39) < 0.01 or causal)
    assert "with S=10 keys it raised RuntimeError: The size of tensor a (6) must match" in evidence


def test_probe_confirms_the_merge(torch):
    status, evidence = SdpaHeadsLayout.probe({"api": torchapi.SDPA, "form": "merge"}, torch)
    assert status == CONFIRMED and "is 1.98 off transpose(1, 2).reshape(N, L, H*E)" in evidence, evidence
