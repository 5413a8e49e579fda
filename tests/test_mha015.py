"""MHA015 flex-mod-convention: flex_attention mask_mods in the "True = hide" habit, and score_mods that return a
bool, drop the score or scale it a second time."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, Severity
from mhalint.fixes import apply_fixes

CODE = "MHA015"
ROOT = Path(__file__).resolve().parents[1]
IMPORTS = "import math\nimport functools\nimport torch\n" \
          "from torch.nn.attention.flex_attention import create_block_mask, create_mask, flex_attention, " \
          "and_masks, or_masks\n"


@pytest.fixture
def check(lint):
    def run(source: str, min_severity="info"):
        found = lint(IMPORTS + textwrap.dedent(source), CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found
        return found
    return run


def mask_site(body: str, params: str = "b, h, q_idx, kv_idx") -> str:
    return f"def mod({params}):\n{textwrap.indent(textwrap.dedent(body), '    ')}" \
           f"def f(q, k, v, T, lengths, seq_lens, doc_ids, prefix_len):\n" \
           f"    m = create_block_mask(mod, None, None, T, T)\n    return flex_attention(q, k, v, block_mask=m)\n"


def score_site(body: str, call: str = "flex_attention(q, k, v, score_mod=mod)",
               params: str = "score, b, h, q_idx, kv_idx", prelude: str = "") -> str:
    return f"{prelude}def mod({params}):\n{textwrap.indent(textwrap.dedent(body), '    ')}" \
           f"def f(q, k, v, bias, head_dim, temperature):\n    return {call}\n"


# ---- the causal direction -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "severity"), [
    ("return q_idx < kv_idx\n", Severity.ERROR),
    ("return kv_idx > q_idx\n", Severity.ERROR),
    ("return q_idx - kv_idx < 0\n", Severity.ERROR),
    ("return 0 > q_idx - kv_idx\n", Severity.ERROR),
    ("return ~(q_idx >= kv_idx)\n", Severity.ERROR),
    ("return torch.logical_not(kv_idx <= q_idx)\n", Severity.ERROR),
    ("return (q_idx < kv_idx) & (kv_idx - q_idx <= 128)\n", Severity.ERROR),  # a sliding window, anti-causal part
    ("return torch.logical_and(q_idx < kv_idx, kv_idx < 100)\n", Severity.ERROR),
    ("future = q_idx < kv_idx\nwindow = q_idx - kv_idx <= 256\nreturn future & window\n", Severity.ERROR),
    ("return ~((q_idx >= kv_idx) | (kv_idx < 4))\n", Severity.ERROR),  # De Morgan: both negated parts must hold
    ("return q_idx <= kv_idx\n", Severity.WARNING),
    ("return kv_idx >= q_idx\n", Severity.WARNING),
])
def test_anti_causal_mask_mods_are_flagged(check, body, severity):
    found = check(mask_site(body))
    assert [f.severity for f in found] == [severity]
    assert dict(found[0].arguments)["kind"] == "causal"
    assert "docs/torch-facts.md#flex-mod-convention" in found[0].explanation


@pytest.mark.parametrize("body", [
    "return q_idx >= kv_idx\n",
    "return kv_idx <= q_idx\n",
    "return q_idx > kv_idx\n",  # strictly earlier keys: a choice, not the hide habit
    "return q_idx - kv_idx >= 0\n",
    "return ~(q_idx < kv_idx)\n",
    "return (q_idx >= kv_idx) & (q_idx - kv_idx <= 256)\n",  # sliding window
    "causal = q_idx >= kv_idx\nwindow = q_idx - kv_idx < 1024\nreturn causal & window\n",
    "return (q_idx >= kv_idx) | (kv_idx < prefix_len)\n",  # prefix LM
    "return (kv_idx < prefix_len[b]) | (q_idx >= kv_idx)\n",
    "return (doc_ids[b, q_idx] == doc_ids[b, kv_idx]) & (q_idx >= kv_idx)\n",  # document mask
    "return q_idx // 64 >= kv_idx // 64\n",  # block causal
    "return (q_idx < kv_idx) | (kv_idx == 0)\n",  # under `|`: not read
    "return q_idx + 16 < kv_idx\n",  # an offset: not the plain comparison
    "return q_idx < kv_idx if False else q_idx >= kv_idx\n",
    "return torch.ones_like(q_idx, dtype=torch.bool)\n",
    "return helper(b, h, q_idx, kv_idx)\n",
    "if q_idx > 3:\n    return q_idx < kv_idx\nreturn q_idx >= kv_idx\n",  # branches: not read
])
def test_causal_and_unreadable_mask_mods_are_clean(check, body):
    assert check(mask_site(body)) == []


def test_the_parameters_are_read_by_position_not_by_name(check):
    assert len(check(mask_site("return kv_idx < q_idx\n", params="b, h, kv_idx, q_idx"))) == 1
    assert check(mask_site("return q_idx < kv_idx\n", params="b, h, kv_idx, q_idx")) == []
    found = check(mask_site("return i < j\n", params="batch, head, i, j"))
    assert len(found) == 1 and "`i < j`" in found[0].message


# ---- how the function reaches flex_attention ---------------------------------------------------------------
@pytest.mark.parametrize("source", [
    "def causal(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\n"
    "m = create_block_mask(causal, None, None, 8, 8)\n",
    "def causal(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\n"
    "m = create_mask(causal, 1, 1, 8, 8, device='cpu')\n",
    "m = create_block_mask(lambda b, h, q, kv: q < kv, None, None, 8, 8)\n",
    "causal = lambda b, h, q, kv: q < kv\nm = create_block_mask(mask_mod=causal, B=None, H=None, Q_LEN=8, KV_LEN=8)\n",
    "def causal(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\n"
    "def window(b, h, q_idx, kv_idx):\n    return q_idx - kv_idx <= 64\n"
    "m = create_block_mask(and_masks(causal, window), None, None, 8, 8)\n",
    "def make_causal(offset):\n    def causal(b, h, q_idx, kv_idx):\n        return q_idx < kv_idx\n"
    "    return causal\nm = create_block_mask(make_causal(0), None, None, 8, 8)\n",
    "def make_causal():\n    return lambda b, h, q_idx, kv_idx: q_idx < kv_idx\n"
    "mod = make_causal()\nm = create_block_mask(mod, None, None, 8, 8)\n",
    "def causal(window, b, h, q_idx, kv_idx):\n    return (q_idx < kv_idx) & (q_idx - kv_idx <= window)\n"
    "m = create_block_mask(functools.partial(causal, 128), None, None, 8, 8)\n",
    "def causal(b, h, q_idx, kv_idx, window=128):\n    return (q_idx < kv_idx) & (q_idx - kv_idx <= window)\n"
    "m = create_block_mask(functools.partial(causal, window=64), None, None, 8, 8)\n",
    "import torch.nn.attention.flex_attention as fa\n"
    "def causal(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\nm = fa.create_block_mask(causal, None, None, 8, 8)\n",
    "def causal(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\n"
    "m = torch.nn.attention.flex_attention.create_block_mask(causal, None, None, 8, 8)\n",
    "class Attn(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "    @staticmethod\n    def causal(b, h, q_idx, kv_idx):\n"
    "        return q_idx < kv_idx\n    def forward(self, q, k, v):\n"
    "        m = create_block_mask(self.causal, None, None, q.size(-2), k.size(-2))\n"
    "        return flex_attention(q, k, v, block_mask=m)\n",
    "class Attn(torch.nn.Module):\n    def causal(self, b, h, q_idx, kv_idx):\n        return kv_idx > q_idx\n"
    "    def forward(self, q, k, v):\n        m = create_block_mask(self.causal, None, None, 8, 8)\n"
    "        return flex_attention(q, k, v, block_mask=m)\n",
])
def test_every_way_a_mask_mod_is_passed(check, source):
    found = check(source)
    assert len(found) == 1 and found[0].severity is Severity.ERROR, found


def test_a_mask_mod_flagged_once_however_often_it_is_used(check):
    found = check("def causal(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\n"
                  "m1 = create_block_mask(causal, None, None, 8, 8)\nm2 = create_block_mask(causal, 2, None, 16, 16)\n"
                  "m3 = create_block_mask(and_masks(causal, causal), None, None, 8, 8)\n")
    assert len(found) == 1


@pytest.mark.parametrize("source", [
    # or_masks: one part keeping later keys can be right (global tokens, prefix)
    "def later(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\n"
    "def causal(b, h, q_idx, kv_idx):\n    return q_idx >= kv_idx\n"
    "m = create_block_mask(or_masks(causal, later), None, None, 8, 8)\n",
    # an unknown mask_mod (a parameter), a function that is never handed to flex_attention
    "def f(mask_mod, T):\n    return create_block_mask(mask_mod, None, None, T, T)\n",
    "def causal(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\nmask = causal(0, 0, torch.arange(4), torch.arange(4))\n",
    # a look-alike from another library
    "from mylib import create_block_mask as cbm\n"
    "def causal(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\nm = cbm(causal, None, None, 8, 8)\n",
    # a name bound twice: unknown
    "def a(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx\ndef c(b, h, q_idx, kv_idx):\n    return q_idx >= kv_idx\n"
    "mod = a\nmod = c\nm = create_block_mask(mod, None, None, 8, 8)\n",
    # create_mask also takes a score_mod (5 parameters): not read as a mask_mod
    "def sm(score, b, h, q_idx, kv_idx):\n    return score + (q_idx < kv_idx)\nm = create_mask(sm, 1, 1, 8, 8)\n",
    "def causal(b, h, q_idx, kv_idx):\n    return q_idx < kv_idx  # noqa: MHA015\n"
    "m = create_block_mask(causal, None, None, 8, 8)\n",
    "m = create_block_mask(lambda b, h, q, kv: q < kv, None, None, 8, 8)  # noqa: MHA015\n",
])
def test_unknown_or_excluded_mask_mods_are_clean(check, source):
    assert check(source) == []


# ---- padding ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "side"), [
    ("return kv_idx >= lengths[b]\n", "key"),
    ("return lengths[b] <= kv_idx\n", "key"),
    ("return ~(kv_idx < seq_lens[b])\n", "key"),
    ("return (q_idx >= kv_idx) & (kv_idx >= seq_lens[b])\n", "key"),
    ("return q_idx >= lengths[b]\n", "query"),
])
def test_inverted_padding_is_a_warning(check, body, side):
    found = check(mask_site(body))
    assert [f.severity for f in found] == [Severity.WARNING]
    assert dict(found[0].arguments) == {"kind": "padding", "side": side}
    assert "read from its name" in " ".join(found[0].evidence)


@pytest.mark.parametrize("body", [
    "return kv_idx < lengths[b]\n",
    "return (kv_idx < seq_lens[b]) & (q_idx < seq_lens[b])\n",
    "return (q_idx >= kv_idx) & (kv_idx < lengths[b])\n",
    "return kv_idx >= prefix_len[b]\n",  # not a lengths name
    "return kv_idx >= doc_ids[b]\n",
    "return kv_idx >= lengths[h]\n",  # not indexed by the batch parameter
    "return kv_idx >= lengths\n",
    "return (kv_idx >= lengths[b]) | (q_idx >= kv_idx)\n",  # under `|`
])
def test_right_or_unreadable_padding_is_clean(check, body):
    assert check(mask_site(body)) == []


# ---- score_mod --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "call", "kind", "severity"), [
    ("return q_idx >= kv_idx\n", "flex_attention(q, k, v, score_mod=mod)", "score_bool", Severity.ERROR),
    ("return (q_idx >= kv_idx) & (kv_idx < 4)\n", "flex_attention(q, k, v, mod)", "score_bool", Severity.ERROR),
    ("keep = q_idx >= kv_idx\nreturn keep\n", "flex_attention(q, k, v, mod)", "score_bool", Severity.ERROR),
    ("return bias[h][q_idx][kv_idx]\n", "flex_attention(q, k, v, score_mod=mod)", "score_dropped", Severity.ERROR),
    ("return (q_idx - kv_idx) * -0.5\n", "flex_attention(q, k, v, mod, None)", "score_dropped", Severity.ERROR),
    ("return score / math.sqrt(head_dim)\n", "flex_attention(q, k, v, score_mod=mod)", "score_sqrt", Severity.ERROR),
    ("return score * D ** -0.5 + bias[h, q_idx, kv_idx]\n", "flex_attention(q, k, v, score_mod=mod)", "score_sqrt",
     Severity.ERROR),
    ("score = score / torch.sqrt(torch.tensor(q_dim))\nreturn score\n", "flex_attention(q, k, v, score_mod=mod)",
     "score_sqrt", Severity.WARNING),
    ("score /= head_dim ** 0.5\nreturn score + 1\n", "flex_attention(q, k, v, score_mod=mod, scale=None)",
     "score_sqrt", Severity.ERROR),
    ("return score * (1 / math.sqrt(d_k))\n", "flex_attention(q, k, v, score_mod=mod)", "score_sqrt", Severity.ERROR),
    ("return score / math.sqrt(temperature)\n", "flex_attention(q, k, v, score_mod=mod)", "score_sqrt",
     Severity.WARNING),
])
def test_wrong_score_mods(check, body, call, kind, severity):
    found = check(score_site(body, call, prelude="D = 64\nq_dim = 64\nd_k = 64\n"))
    assert [(dict(f.arguments)["kind"], f.severity) for f in found] == [(kind, severity)]


@pytest.mark.parametrize(("body", "call"), [
    ("return score\n", "flex_attention(q, k, v, score_mod=mod)"),
    ("return score + bias[h][q_idx][kv_idx]\n", "flex_attention(q, k, v, score_mod=mod)"),  # relative bias
    ("return score + (kv_idx - q_idx) * 0.25\n", "flex_attention(q, k, v, mod)"),  # alibi
    ("return 30 * torch.tanh(score / 30)\n", "flex_attention(q, k, v, score_mod=mod)"),  # softcap
    ("return torch.where(q_idx >= kv_idx, score, -float('inf'))\n", "flex_attention(q, k, v, score_mod=mod)"),
    ("return score / temperature\n", "flex_attention(q, k, v, score_mod=mod)"),
    ("return score / math.sqrt(2)\n", "flex_attention(q, k, v, score_mod=mod)"),  # a number, not a head size
    ("return score / math.sqrt(head_dim)\n", "flex_attention(q, k, v, score_mod=mod, scale=1.0)"),
    ("return score / math.sqrt(head_dim)\n", "flex_attention(q, k, v, mod, None, 1.0)"),
    ("return score * head_dim ** -0.5\n", "flex_attention(q, k, v, score_mod=mod, scale=s)"),
    ("return bias[h][q_idx][kv_idx]\n", "mod(0.0, 0, 0, 0, 0)"),  # never handed to flex_attention
    ("return q_idx >= kv_idx  # noqa: MHA015\n", "flex_attention(q, k, v, score_mod=mod)"),
    ("return score + 1\n", "flex_attention(q, k, v, score_mod=mod, *rest)"),
])
def test_correct_or_unknown_score_mods_are_clean(check, body, call):
    assert check(score_site(body, call)) == []


def test_score_mod_through_torch_compile_self_and_lambda(check):
    source = ("class Attn(torch.nn.Module):\n    def __init__(self, dim, heads):\n        super().__init__()\n"
              "        self.head_dim = dim // heads\n        self.flex = torch.compile(flex_attention)\n"
              "    def forward(self, q, k, v):\n"
              "        return self.flex(q, k, v, score_mod=lambda s, b, h, qi, ki: s / math.sqrt(self.head_dim))\n")
    found = check(source)
    assert len(found) == 1 and found[0].severity is Severity.ERROR
    assert "1/self.head_dim in all" in found[0].message
    flex = "flex = torch.compile(flex_attention, dynamic=False)\n"
    assert len(check(flex + "def f(q, k, v, bias):\n"
                     "    return flex(q, k, v, lambda score, b, h, q_idx, kv_idx: bias[h, q_idx, kv_idx])\n")) == 1


# ---- messages, the fix, the probe -----------------------------------------------------------------------------
def test_headlines_fit_and_name_the_evidence(check):
    found = check(mask_site("return q_idx < kv_idx\n")) + check(mask_site("return kv_idx >= seq_lens[b]\n")) \
        + check(score_site("return score / math.sqrt(head_dim)\n"))
    assert len(found) == 3
    for finding in found:
        assert len(finding.message) <= HEADLINE_LIMIT
        assert finding.help and finding.evidence
    assert "its 3rd parameter `q_idx` is the query index" in found[0].evidence[1]
    assert "passed to create_block_mask at line" in found[0].evidence[0]


@pytest.mark.parametrize(("written", "fixed"), [
    ("q_idx < kv_idx", "q_idx >= kv_idx"),
    ("kv_idx > q_idx", "kv_idx <= q_idx"),
    ("(q_idx  <  kv_idx) & (q_idx - kv_idx <= 64)", "(q_idx  >=  kv_idx) & (q_idx - kv_idx <= 64)"),
])
def test_the_unsafe_fix(check, lint, written, fixed):
    source = IMPORTS + mask_site(f"return {written}\n")
    found = lint(source, CODE)
    assert len(found) == 1 and found[0].fix is not None and found[0].fix.applicability == "unsafe"
    after, applied = apply_fixes(source, found, unsafe=True)
    assert applied == 1 and f"    return {fixed}\n" in after
    assert lint(after, CODE, min_severity="info") == []
    assert apply_fixes(source, found, unsafe=False) == (source, 0)


@pytest.mark.parametrize("written", ["~(q_idx >= kv_idx)", "q_idx <= kv_idx", "q_idx - kv_idx < 0"])
def test_no_fix_where_the_intent_is_less_clear(check, written):
    found = check(mask_site(f"return {written}\n"))
    assert len(found) == 1 and found[0].fix is None


def test_bad_example_fixed_equals_the_fixed_example(lint):
    bad = (ROOT / "examples" / "mha015_flex_mod_convention_bad.py").read_text()
    after, applied = apply_fixes(bad, lint(bad, CODE), unsafe=True)
    assert applied == 1 and "return q_idx >= kv_idx" in after


@pytest.mark.parametrize("arguments", [
    {"kind": "causal", "op": "<"}, {"kind": "causal", "op": "<="}, {"kind": "padding", "side": "key"},
    {"kind": "padding", "side": "query"}, {"kind": "score_bool"}, {"kind": "score_dropped"}, {"kind": "score_sqrt"},
])
def test_probe_confirms_each_kind(torch, arguments):
    from mhalint.rules.flex_mod_convention import FlexModConvention

    status, evidence = FlexModConvention.probe(arguments, torch)
    assert status == CONFIRMED, evidence
    assert "CPU, eager flex_attention" in evidence


def test_probe_runs_through_the_cli_on_the_example(torch, probed_examples):
    result = probed_examples.of("mha015_flex_mod_convention_bad.py")
    assert "probe confirmed" in result.output and "3.50 away" in result.output, result.output
