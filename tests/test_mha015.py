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


# ---- the runtime guard: flex_attention calls ---------------------------------------------------------------------
def _flex(torch):
    return pytest.importorskip("torch.nn.attention.flex_attention")


def _qkv(torch, n=2, heads=4, length=16, keys=None, size=8, kv_heads=None):
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(n, heads, length, size, generator=generator)
    k, v = (torch.randn(n, kv_heads or heads, keys or length, size, generator=generator) for _ in range(2))
    return q, k, v


def _guarded_flex(torch, mode="warn", **kwargs):
    """(the guard's MHA015 reports, the guarded output, the unguarded output) of one flex_attention call made
    through the module attribute, as code imported after the guard started calls it."""
    import warnings

    import mhalint
    flex = _flex(torch)
    q, k, v = kwargs.pop("qkv", None) or _qkv(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = flex.flex_attention(q, k, v, **kwargs)
        with mhalint.guard(mode) as guard:
            guarded = flex.flex_attention(q, k, v, **kwargs)  # the reported line
    return [e.report for e in guard.reports() if e.report.code == CODE], guarded, plain, guard


def _block(torch, mask_mod, n=None, length=16, keys=None):
    return _flex(torch).create_block_mask(mask_mod, n, None, length, keys or length, device="cpu")


def test_guard_reports_the_anti_causal_block_mask_at_the_call_and_changes_nothing(torch):
    reports, guarded, plain, guard = _guarded_flex(torch, block_mask=_block(torch, lambda b, h, q, kv: q < kv))
    assert len(reports) == 1 and guard.calls == 1
    report = reports[0]
    assert report.site.filename == __file__ and report.api == "flex_attention"
    assert "leaves query rows [15] with no allowed key (True = allowed; samples [0, 1], every head)" in \
        report.headline, report.headline
    assert len(report.headline) <= HEADLINE_LIMIT
    assert "exactly 0 on those rows" in report.message and "q_idx < kv_idx" in report.message
    assert "docs/torch-facts.md#flex-mod-convention" in report.message and "3.50" in report.message
    assert torch.equal(guarded, plain) and bool((plain[:, :, 15] == 0).all())


def _correct_mods(torch):
    lengths = torch.tensor([16, 9])
    start = torch.tensor([0, 5])  # left padding: sample 1's real tokens start at 5
    doc = torch.tensor([0] * 6 + [1] * 7 + [2] * 3)
    docs = torch.tensor([[0] * 10 + [1] * 6, [0] * 4 + [1] * 9 + [-1] * 3])  # -1: padding, hidden both ways
    mods = {
        "causal": lambda b, h, q, kv: q >= kv,
        "sliding window": lambda b, h, q, kv: (q >= kv) & (q - kv <= 4),
        "document": lambda b, h, q, kv: doc[q] == doc[kv],
        "causal document": lambda b, h, q, kv: (doc[q] == doc[kv]) & (q >= kv),
        "key padding": lambda b, h, q, kv: kv < lengths[b],
        "causal key padding": lambda b, h, q, kv: (q >= kv) & (kv < lengths[b]),
        "query and key padding": lambda b, h, q, kv: (q < lengths[b]) & (kv < lengths[b]),
        "left-padded causal": lambda b, h, q, kv: (q >= kv) & (kv >= start[b]),
        "padded documents": lambda b, h, q, kv: (docs[b, q] == docs[b, kv]) & (docs[b, q] >= 0),
        "prefix lm": lambda b, h, q, kv: (q >= kv) | (kv < 4),
        "reversed causal": lambda b, h, q, kv: q <= kv,  # flagged statically; no row is empty at run time
        "alibi heads": lambda b, h, q, kv: (q >= kv) & (q - kv <= 2 + 4 * h),
    }
    return mods


CORRECT_MASKS = ["causal", "sliding window", "document", "causal document", "key padding", "causal key padding",
                 "query and key padding", "left-padded causal", "padded documents", "prefix lm", "reversed causal",
                 "alibi heads"]


@pytest.mark.parametrize("name", CORRECT_MASKS)
def test_guard_is_silent_on_correct_block_masks_and_changes_nothing(torch, name):
    mods = _correct_mods(torch)
    assert sorted(mods) == sorted(CORRECT_MASKS)
    mask_mod = mods[name]
    block_mask = _block(torch, mask_mod, n=2)
    reports, guarded, plain, guard = _guarded_flex(torch, block_mask=block_mask)
    assert reports == [] and guard.calls == 1
    assert torch.equal(guarded, plain)
    # silent because the mask was read and judged, not because it could not be read
    from mhalint.guard.apis import describe_flex
    from mhalint.guard.reports import Site
    from mhalint.rules.flex_mod_convention import _flex_empty_rows

    q, k, v = _qkv(torch)
    call = describe_flex(Site("x.py", 1), {"query": q, "key": k, "value": v, "block_mask": block_mask,
                                           "score_mod": None, "scale": None, "enable_gqa": False})
    read = _flex_empty_rows(call, q, k)
    assert read is not None and not bool(read[0]) and read[-1] == 4


def test_guard_is_silent_without_a_block_mask_with_gqa_and_with_a_correct_score_mod(torch):
    for kwargs in ({}, {"score_mod": lambda s, b, h, q, kv: s + (kv - q) * 0.1},
                   {"score_mod": lambda s, b, h, q, kv: torch.where(q >= kv, s, -float("inf"))},
                   {"qkv": _qkv(torch, kv_heads=2), "enable_gqa": True,
                    "block_mask": _block(torch, lambda b, h, q, kv: q >= kv)},
                   {"return_lse": True, "block_mask": _block(torch, lambda b, h, q, kv: q >= kv)}):
        reports, guarded, plain, guard = _guarded_flex(torch, **kwargs)
        assert reports == [] and guard.calls == 1, kwargs
        if isinstance(plain, tuple):
            assert all(torch.equal(a, b) for a, b in zip(guarded, plain))
        else:
            assert torch.equal(guarded, plain)


def test_guard_reports_a_sample_left_with_no_key_and_a_strictly_causal_first_row(torch):
    lengths = torch.tensor([16, 10])
    inverted = _block(torch, lambda b, h, q, kv: kv >= lengths[b], n=2)
    reports, guarded, plain, _ = _guarded_flex(torch, block_mask=inverted)
    assert len(reports) == 1 and "leaves samples [0] with no allowed key at all" in reports[0].headline
    assert torch.equal(guarded, plain) and bool((plain[0] == 0).all())
    reports, _, _, _ = _guarded_flex(torch, block_mask=_block(torch, lambda b, h, q, kv: q > kv))
    assert len(reports) == 1 and "query rows [0] with no allowed key" in reports[0].headline
    # Cross-attention shape (L != S): a query with no key at all in some sample is reported, a partly empty one
    # (a padded query cannot be told from a real one there) is not.
    qkv = _qkv(torch, keys=8)
    q_lengths = torch.tensor([16, 11])
    partial = _block(torch, lambda b, h, q, kv: q < q_lengths[b], n=2, keys=8)
    assert _guarded_flex(torch, qkv=qkv, block_mask=partial)[0] == []
    nothing = _block(torch, lambda b, h, q, kv: (kv < 0) | (b == 0), n=2, keys=8)
    reports = _guarded_flex(torch, qkv=qkv, block_mask=nothing)[0]
    assert len(reports) == 1 and "samples [1] with no allowed key at all" in reports[0].headline


def test_guard_reports_a_bool_score_mod_and_not_a_float_one(torch):
    def causal(score, b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    reports, guarded, plain, _ = _guarded_flex(torch, score_mod=causal)
    assert len(reports) == 1 and "score_mod `causal` returned a bool tensor" in reports[0].headline
    assert "2.27" in reports[0].message and torch.equal(guarded, plain)
    table = torch.randn(4, 16, 16)
    reports, _, _, _ = _guarded_flex(torch, score_mod=lambda s, b, h, q, kv: s + table[h, q, kv])
    assert reports == []


def test_guard_reads_head_0_only_and_then_skips_above_its_size_limit(torch, monkeypatch):
    from mhalint.rule import load_rules

    hook = load_rules()[CODE].guard
    anti = _block(torch, lambda b, h, q, kv: q < kv)
    # 2 samples x 16 x 16 = 512 positions; with 4 heads 2048
    monkeypatch.setitem(hook.__globals__, "FLEX_GUARD_LIMIT", 1024)
    reports = _guarded_flex(torch, block_mask=anti)[0]
    assert len(reports) == 1 and "head 0)" in reports[0].headline and "1 heads" not in reports[0].message
    monkeypatch.setitem(hook.__globals__, "FLEX_GUARD_LIMIT", 511)
    reports, guarded, plain, guard = _guarded_flex(torch, block_mask=anti)
    assert reports == [] and guard.calls == 1 and torch.equal(guarded, plain)


def test_guard_error_mode_raises_after_the_call_and_keeps_torchs_errors(torch):
    from mhalint.guard import AttentionGuardError

    with pytest.raises(AttentionGuardError, match="MHA015"):
        _guarded_flex(torch, "error", block_mask=_block(torch, lambda b, h, q, kv: q < kv))

    def broken(score, b, h, q_idx, kv_idx):
        raise ValueError("my score_mod")

    with pytest.raises(Exception, match="my score_mod"):
        _guarded_flex(torch, "error", score_mod=broken)


def test_guard_sees_names_imported_while_active_not_before_and_passes_compiled_calls(torch):
    import warnings

    import mhalint
    flex = _flex(torch)
    before = flex.flex_attention
    anti = _block(torch, lambda b, h, q, kv: q < kv)
    q, k, v = _qkv(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mhalint.guard() as guard:
            assert flex.flex_attention is not before
            from torch.nn.attention.flex_attention import flex_attention as imported_now
            imported_now(q, k, v, block_mask=anti)
            before(q, k, v, block_mask=anti)  # bound before the guard started: not seen (Known problems)
            compiled = torch.compile(imported_now, backend="eager", fullgraph=True)
            out = compiled(q, k, v, block_mask=anti)  # passes straight through under dynamo
        assert flex.flex_attention is before
    assert guard.calls == 1 and [e.count for e in guard.reports()] == [1]
    assert torch.equal(out, before(q, k, v, block_mask=anti))
