"""MHA003 is-causal-without-mask: is_causal=True (and src/tgt/memory_is_causal) with no mask it describes."""

from __future__ import annotations

import re

import pytest
from aliases import spellings

from mhalint import torchapi
from mhalint.finding import CONFIRMED, NOT_CONFIRMED, REPRODUCED, Severity
from mhalint.rule import load_rules

CODE = "MHA003"


# How each module is called with a causal flag and no mask, and the mask argument the message must name.
CALLS = {
    "MultiheadAttention": ("(64, 8, batch_first=True)", "m(x, x, x, is_causal=True)", "attn_mask"),
    "TransformerEncoderLayer": ("(64, 8, batch_first=True)", "m(x, is_causal=True)", "src_mask"),
    "TransformerDecoderLayer": ("(64, 8, batch_first=True)", "m(x, mem, tgt_is_causal=True)", "tgt_mask"),
    "Transformer": ("(batch_first=True)", "m(x, mem, src_is_causal=True)", "src_mask"),
}
ALIASES = [pytest.param(imp, callee, *CALLS[cls], id=callee if "Alias" not in callee else f"{cls}-as-Alias")
           for cls in CALLS for imp, callee in spellings(cls)]


@pytest.fixture
def check(lint):
    def run(source: str):
        found = lint(source, CODE)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def local(ctor: str, call: str, imp: str = "import torch.nn as nn") -> str:
    return f"{imp}\ndef f(x, mem, mask):\n    m = {ctor}\n    return {call}\n"


# ---- aliases ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("imp", "callee", "args", "call", "mask"), ALIASES)
def test_every_alias_is_tracked_through_a_local_instance(check, imp, callee, args, call, mask):
    found = check(local(callee + args, call, imp))
    assert [(f.line, f.column) for f in found] == [(4, 12)]
    assert f"=True without {mask}: " in found[0].message


@pytest.mark.parametrize(("imp", "callee", "args", "call", "mask"), ALIASES)
def test_every_alias_with_the_mask_is_clean(check, imp, callee, args, call, mask):
    call = call.replace("=True)", f"=True, {mask}=mask)")
    assert check(local(callee + args, call, imp)) == []


# ---- keyword and positional arguments (docs/torch-facts.md#positional-order) -----------------------------------------
@pytest.mark.parametrize(("ctor", "call", "flagged"), [
    # MHA.forward: query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal
    ("nn.MultiheadAttention(64, 8)", "m(x, x, x, None, True, None, True, True)", True),
    ("nn.MultiheadAttention(64, 8)", "m(x, x, x, None, True, mask, True, True)", False),
    ("nn.MultiheadAttention(64, 8)", "m(x, x, x, None, True, mask, is_causal=True)", False),
    ("nn.MultiheadAttention(64, 8)", "m(x, x, x, mask, is_causal=True)", True),  # 4th positional is the kpm
    ("nn.MultiheadAttention(64, 8)", "m(x, x, x, attn_mask=None, is_causal=True)", True),
    ("nn.MultiheadAttention(64, 8)", "m(x, x, x, is_causal=False)", False),
    ("nn.MultiheadAttention(64, 8)", "m(x, x, x, None, True, None, True, False)", False),
    ("nn.MultiheadAttention(64, 8)", "m(x, x, x, is_causal=True, **kw)", False),  # **kw may carry attn_mask
    ("nn.MultiheadAttention(64, 8)", "m(*args, is_causal=True)", False),
    # TransformerEncoderLayer.forward: src, src_mask, src_key_padding_mask, is_causal
    ("nn.TransformerEncoderLayer(64, 8)", "m(x, None, None, True)", True),
    ("nn.TransformerEncoderLayer(64, 8)", "m(x, mask, None, True)", False),
    ("nn.TransformerEncoderLayer(64, 8)", "m(x, mask, is_causal=True)", False),
    ("nn.TransformerEncoderLayer(64, 8)", "m(x, src_key_padding_mask=mask, is_causal=True)", True),
    # TransformerEncoder.forward: src, mask, src_key_padding_mask, is_causal
    ("nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 8), 2)", "m(x, is_causal=True)", True),
    ("nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 8), 2)", "m(x, mask=mask, is_causal=True)", False),
    ("nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 8), 2)", "m(x, mask, is_causal=True)", False),
    ("nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 8), 2)", "m(x, None, None, True)", True),
    # TransformerDecoder(Layer).forward: tgt, memory, tgt_mask, memory_mask, tgt_kpm, memory_kpm, tgt_is_causal,
    # memory_is_causal
    ("nn.TransformerDecoderLayer(64, 8)", "m(x, mem, tgt_is_causal=True)", True),
    ("nn.TransformerDecoderLayer(64, 8)", "m(x, mem, mask, tgt_is_causal=True)", False),
    ("nn.TransformerDecoderLayer(64, 8)", "m(x, mem, None, mask, tgt_is_causal=True)", True),  # that's memory_mask
    ("nn.TransformerDecoderLayer(64, 8)", "m(x, mem, None, None, None, None, True)", True),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(64, 8), 2)", "m(x, mem, tgt_is_causal=True)", True),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(64, 8), 2)", "m(x, mem, mask, tgt_is_causal=True)", False),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(64, 8), 2)", "m(x, mem, mask, memory_is_causal=True)", True),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(64, 8), 2)", "m(x, mem, mask, None, None, None, True, True)",
     True),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(64, 8), 2)",
     "m(x, mem, mask, mask, None, None, True, True)", False),
    # Transformer.forward: src, tgt, src_mask, tgt_mask, memory_mask, ..., src_is_causal, tgt_is_causal,
    # memory_is_causal
    ("nn.Transformer()", "m(x, mem, src_is_causal=True)", True),
    ("nn.Transformer()", "m(x, mem, mask, src_is_causal=True)", False),
    ("nn.Transformer()", "m(x, mem, tgt_is_causal=True)", True),
    ("nn.Transformer()", "m(x, mem, None, mask, tgt_is_causal=True)", False),
    ("nn.Transformer()", "m(x, mem, mask, tgt_is_causal=True)", True),  # that's src_mask
    ("nn.Transformer()", "m(x, mem, memory_is_causal=True)", True),
    ("nn.Transformer()", "m(x, mem, memory_mask=mask, memory_is_causal=True)", False),
    ("nn.Transformer()", "m(x, mem, None, None, None, None, None, None, None, True)", True),
])
def test_flags_and_masks_keyword_and_positional(check, ctor, call, flagged):
    assert len(check(local(ctor, call))) == (1 if flagged else 0)


@pytest.mark.parametrize(("flag", "mask"), [("src_is_causal", "src_mask"), ("tgt_is_causal", "tgt_mask"),
                                            ("memory_is_causal", "memory_mask")])
def test_transformer_message_names_the_matching_mask(check, flag, mask):
    found = check(local("nn.Transformer(batch_first=True)", f"m(x, mem, {flag}=True)"))
    assert len(found) == 1 and f"{flag}=True without {mask}" in found[0].message


@pytest.mark.parametrize(("ctor", "call", "severity"), [
    ("nn.MultiheadAttention(64, 8)", "m(x, x, x, is_causal=True)", Severity.ERROR),
    ("nn.TransformerEncoderLayer(64, 8)", "m(x, is_causal=True)", Severity.ERROR),
    ("nn.Transformer()", "m(x, mem, tgt_is_causal=True)", Severity.ERROR),
    ("nn.Transformer()", "m(x, mem, memory_is_causal=True)", Severity.WARNING),  # always raises: not silent
    ("nn.TransformerDecoderLayer(64, 8)", "m(x, mem, memory_is_causal=True)", Severity.WARNING),
])
def test_severity(check, ctor, call, severity):
    assert [f.severity for f in check(local(ctor, call))] == [severity]


# ---- SDPA is never flagged; multi_head_attention_forward is --------------------------------------------------
@pytest.mark.parametrize(("imp", "call"), [
    ("import torch.nn.functional as F", "F.scaled_dot_product_attention(q, k, v, is_causal=True)"),
    ("import torch.nn.functional as F", "F.scaled_dot_product_attention(q, k, v, None, 0.0, True)"),
    ("from torch.nn.functional import scaled_dot_product_attention",
     "scaled_dot_product_attention(q, k, v, is_causal=True)"),
    ("from torch.nn.functional import scaled_dot_product_attention as sdpa", "sdpa(q, k, v, is_causal=True)"),
    ("import torch", "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True)"),
    ("import torch", "torch._C._nn.scaled_dot_product_attention(q, k, v, is_causal=True)"),
])
def test_sdpa_is_causal_is_never_flagged(check, imp, call):
    assert check(f"{imp}\ndef f(q, k, v):\n    return {call}\n") == []


MHAF_ARGS = "q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob"  # the 13 required arguments


@pytest.mark.parametrize(("imp", "call", "flagged"), [
    ("import torch.nn.functional as F", f"F.multi_head_attention_forward({MHAF_ARGS}, is_causal=True)", True),
    ("import torch", f"torch.nn.functional.multi_head_attention_forward({MHAF_ARGS}, is_causal=True)", True),
    ("from torch.nn.functional import multi_head_attention_forward",
     f"multi_head_attention_forward({MHAF_ARGS}, is_causal=True)", True),
    ("import torch.nn.functional as F", f"F.multi_head_attention_forward({MHAF_ARGS}, attn_mask=m, is_causal=True)",
     False),
    # training, key_padding_mask, need_weights, attn_mask (17th positional)
    ("import torch.nn.functional as F",
     f"F.multi_head_attention_forward({MHAF_ARGS}, True, None, True, m, is_causal=True)", False),
    ("import torch.nn.functional as F",
     f"F.multi_head_attention_forward({MHAF_ARGS}, True, m, True, None, is_causal=True)", True),
    ("import torch.nn.functional as F", f"F.multi_head_attention_forward({MHAF_ARGS}, is_causal=False)", False),
])
def test_multi_head_attention_forward(check, imp, call, flagged):
    found = check(f"{imp}\ndef f(q, w, b, ow, ob, m):\n    return {call}\n")
    assert [(f.line, f.severity) for f in found] == ([(3, Severity.WARNING)] if flagged else [])


# ---- instance tracking -----------------------------------------------------------------------------------------
INSTANCES = {
    "module-level": """\
        import torch.nn as nn
        mha = nn.MultiheadAttention(64, 8, batch_first=True)
        def f(x):
            return mha(x, x, x, is_causal=True)
    """,
    "self-attribute": """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def forward(self, x):
                return self.attn(x, x, x, is_causal=True)[0]
    """,
    "modulelist-listcomp": """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.TransformerEncoderLayer(64, 8, batch_first=True) for _ in range(3)])
            def forward(self, x):
                for layer in self.layers:
                    x = layer(x, is_causal=True)
                return x
    """,
    "modulelist-genexp": """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.blocks = nn.ModuleList(nn.MultiheadAttention(64, 8, batch_first=True) for _ in range(n))
            def forward(self, x):
                for blk in self.blocks:
                    x = blk(x, x, x, is_causal=True)[0]
                return x
    """,
    "modulelist-literal": """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.MultiheadAttention(64, 8), nn.MultiheadAttention(64, 8)])
            def forward(self, x):
                for layer in self.layers:
                    x = layer(x, x, x, is_causal=True)[0]
                return x
    """,
    "modulelist-indexed": """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.MultiheadAttention(64, 8) for _ in range(2)])
            def forward(self, x):
                return self.layers[0](x, x, x, is_causal=True)
    """,
    "local-list-times-n": """\
        import torch.nn as nn
        def f(x):
            layers = [nn.TransformerEncoderLayer(64, 8, batch_first=True)] * 3
            for layer in layers:
                x = layer(x, is_causal=True)
            return x
    """,
    "encoder-attribute": """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 8, batch_first=True), 2)
            def forward(self, x):
                return self.enc(x, is_causal=True)
    """,
    "decoder-attribute": """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                layer = nn.TransformerDecoderLayer(64, 8, batch_first=True)
                self.dec = nn.TransformerDecoder(layer, 2)
            def forward(self, x, mem):
                return self.dec(x, mem, tgt_is_causal=True)
    """,
    "transformer-attribute": """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = nn.Transformer(batch_first=True)
            def forward(self, s, t):
                return self.model(s, t, tgt_is_causal=True)
    """,
}
# (line, column) of the call each instance snippet must be flagged at
INSTANCE_POSITIONS = {
    "module-level": (4, 12), "self-attribute": (7, 16), "modulelist-listcomp": (8, 17),
    "modulelist-genexp": (8, 17), "modulelist-literal": (8, 17), "modulelist-indexed": (7, 16),
    "local-list-times-n": (5, 13), "encoder-attribute": (7, 16), "decoder-attribute": (8, 16),
    "transformer-attribute": (7, 16),
}


@pytest.mark.parametrize("name", list(INSTANCES))
def test_instance_tracking(check, name):
    assert [(f.line, f.column) for f in check(INSTANCES[name])] == [INSTANCE_POSITIONS[name]]


def test_attribute_reassigned_to_something_else_is_not_tracked(check):
    source = """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self, custom):
                super().__init__()
                self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
                if custom:
                    self.attn = custom
            def forward(self, x):
                return self.attn(x, x, x, is_causal=True)[0]
    """
    assert check(source) == []


def test_super_init_is_a_construction_not_a_call(check):
    source = ("import torch.nn as nn\nclass A(nn.TransformerEncoderLayer):\n    def __init__(self):\n"
              "        super().__init__(64, 8, batch_first=True)\n    def forward(self, x, mask):\n"
              "        return super().forward(x, mask, is_causal=True)\n")
    assert check(source) == []
    # super().forward runs the layer's forward (tests/test_inheritance.py): without the mask, the hint is ignored
    [finding] = check(source.replace("x, mask, is_causal", "x, is_causal"))
    assert finding.line == 6 and finding.message.startswith("is_causal=True without src_mask")


# ---- resolved values -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("prelude", "params", "flag", "flagged"), [
    ("CAUSAL = True\n", "", "CAUSAL", True),
    ("CAUSAL = False\n", "", "CAUSAL", False),
    ("NONCAUSAL = False\n", "", "not NONCAUSAL", True),
    ("", ", causal=True", "causal", True),
    ("", ", causal=False", "causal", False),
    ("", ", causal", "causal", False),  # unknown: not flagged
])
def test_flag_resolved_through_constants_and_defaults(check, prelude, params, flag, flagged):
    source = (f"import torch.nn as nn\n{prelude}mha = nn.MultiheadAttention(64, 8, batch_first=True)\n"
              f"def f(x{params}):\n    return mha(x, x, x, is_causal={flag})\n")
    assert len(check(source)) == (1 if flagged else 0)


def test_mask_constant_none_counts_as_no_mask(check):
    source = ("import torch.nn as nn\nNO_MASK = None\nmha = nn.MultiheadAttention(64, 8, batch_first=True)\n"
              "def f(x):\n    return mha(x, x, x, attn_mask=NO_MASK, is_causal=True)\n")
    assert [f.line for f in check(source)] == [5]


def test_message_gives_the_evidence(check):
    source = ("import torch.nn as nn\nCAUSAL = True\nmha = nn.MultiheadAttention(64, 8, batch_first=True)\n"
              "def f(x):\n    return mha(x, x, x, is_causal=CAUSAL)\n")
    [finding] = check(source)
    assert finding.message.startswith("is_causal=CAUSAL (True) without attn_mask: nn.MultiheadAttention takes it as")
    assert finding.evidence == ("is_causal=CAUSAL at line 5 resolves to True", "`CAUSAL` = True at line 2",
                                "no attn_mask argument in the call at line 5")


# ---- decoys ----------------------------------------------------------------------------------------------------
# project classes and functions named like torch's in the rule's own examples: test_every_rule.py
@pytest.mark.parametrize("source", [
    "def f(attn, x):\n    return attn(x, x, x, is_causal=True)\n",  # unknown module: not flagged
])
def test_project_classes_of_the_same_name_are_not_torch(check, source):
    assert check(source) == []


# ---- positions and noqa ----------------------------------------------------------------------------------------
def test_multi_line_call_is_reported_at_its_first_line_and_column(check):
    source = """\
        import torch.nn as nn
        mha = nn.MultiheadAttention(64, 8, batch_first=True)
        def f(x):
            out, _ = mha(
                x, x, x,
                is_causal=True,
            )
            return out
    """
    assert [(f.line, f.column, f.end_line) for f in check(source)] == [(4, 14, 7)]


# ---- headline, evidence, help, explanation -----------------------------------------------------------------------
RULE = load_rules()[CODE]
SILENT = "takes it as a hint, and its fast inference path attends to the future"
RAISES = "raises 'Need attn_mask if specifying the is_causal hint'"


def test_silent_fast_path_explanation_gives_the_experiments_distance(check):
    [finding] = check(local("nn.TransformerEncoderLayer(64, 8, batch_first=True)", "m(x, is_causal=True)"))
    assert finding.help == ("also pass src_mask=nn.Transformer.generate_square_subsequent_mask(L) (keep is_causal=True "
                            "as the hint)")
    assert finding.evidence == ("is_causal=True at line 4", "no src_mask argument in the call at line 4")
    explanation = " ".join(finding.explanation.split())
    assert "torch 2.13 experiment" in explanation and "For nn.TransformerEncoderLayer, is_causal" in explanation
    distance = float(re.search(r"was ([0-9.]+) away from the causal one", explanation).group(1))
    assert abs(distance - 1.35) < 1e-9  # the experiment's number for TransformerEncoderLayer, as the docs give it


def test_memory_is_causal_headline_says_it_raises_and_the_help_offers_to_drop_it(check):
    [finding] = check(local("nn.TransformerDecoderLayer(64, 8, batch_first=True)", "m(x, mem, memory_is_causal=True)"))
    assert finding.severity == Severity.WARNING
    assert finding.message == f"memory_is_causal=True without memory_mask: nn.TransformerDecoderLayer {RAISES}"
    assert finding.help == "pass the memory_mask it describes, or drop memory_is_causal=True"
    assert "Cross-attention never takes the fast path" in " ".join(finding.explanation.split())


def test_a_named_none_mask_is_quoted_with_its_value(check):
    source = ("import torch.nn as nn\nNO_MASK = None\nmha = nn.MultiheadAttention(64, 8, batch_first=True)\n"
              "def f(x):\n    return mha(x, x, x, attn_mask=NO_MASK, is_causal=True)\n")
    [finding] = check(source)
    assert finding.message.startswith("is_causal=True with attn_mask=NO_MASK (None): nn.MultiheadAttention")
    assert "attn_mask=NO_MASK at line 5" in finding.evidence


# ---- probe: confirmed with the site's flags and module, reproduced with an assumed fast path ----------------------
def probe(arguments: dict, torch) -> tuple[str, str]:
    torch.manual_seed(0)  # as the probe worker does before every site
    return RULE.probe(dict(arguments), torch)


def away(evidence: str) -> float:
    return float(re.search(r"is ([0-9.]+) away from the causal one", evidence).group(1))


def test_probe_with_the_sites_construction_is_confirmed(torch, check):
    [finding] = check(local("nn.MultiheadAttention(64, 8, batch_first=True)", "m(x, x, x, is_causal=True)"))
    arguments = dict(finding.arguments)
    assert (arguments["batch_first"], arguments["num_heads"]) == (True, 8)
    status, evidence = probe(arguments, torch)
    assert status == CONFIRMED, evidence
    assert evidence.startswith("in eval + no_grad the output equals the unmasked output")
    assert 0.1 < away(evidence) < 20


def test_probe_without_batch_first_at_the_site_is_only_reproduced(torch, check):
    [finding] = check(local("nn.TransformerEncoderLayer(64, 8)", "m(x, is_causal=True)"))
    arguments = dict(finding.arguments)
    assert "batch_first" not in arguments
    status, evidence = probe(arguments, torch)
    assert status == REPRODUCED, evidence
    assert evidence.startswith("reproduced with assumed batch_first=True: in eval + no_grad the output equals the "
                               "unmasked output"), evidence
    assert 0.1 < away(evidence) < 20


def test_probe_of_a_module_the_rule_could_not_rebuild_names_every_assumption(torch):
    status, evidence = probe({"api": torchapi.MHA, "flag": "is_causal", "mask": "attn_mask"}, torch)
    assert status == REPRODUCED, evidence
    assert evidence.startswith("reproduced with assumed batch_first=True, num_heads=8 and embed_dim=64: "), evidence


def test_probe_of_a_call_that_always_raises_is_confirmed_without_assumptions(torch):
    arguments = {"api": torchapi.DECODER_LAYER, "d_model": 64, "nhead": 8, "batch_first": True,
                 "flag": "memory_is_causal", "mask": "memory_mask"}
    status, evidence = probe(arguments, torch)
    assert status == CONFIRMED, evidence
    assert evidence.startswith("raises in training and in inference: Need attn_mask if specifying the is_causal hint")


def test_probe_with_the_mask_given_is_not_confirmed(torch):
    arguments = {"api": torchapi.MHA, "embed_dim": 64, "num_heads": 8, "batch_first": True, "flag": "is_causal",
                 "mask": "attn_mask", "mask_given": True}
    status, evidence = probe(arguments, torch)
    assert status == NOT_CONFIRMED, evidence


# ---- a flag through callers that disagree (mhalint.analysis.values.taking) --------------------------------------
CALLERS = """\
import torch.nn as nn
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
    def forward(self, x, causal=False):
        return self.attn(x, x, x, is_causal=causal)[0]
block = Block()
def encode(x):
    return block(x)
def decode(x):
    return block(x, causal={decoding})
"""


def test_a_caller_that_passes_true_is_reported_even_when_others_pass_false(check):
    found = check(CALLERS.format(decoding="True"))
    assert [(f.line, f.severity) for f in found] == [(7, Severity.ERROR)]
    trail = " ".join(found[0].evidence)
    assert "line 12 passes causal=True" in trail and "other calls pass False (line 10)" in trail


def test_callers_that_never_pass_true_or_pass_an_unknown_value_are_not_guessed(check):
    assert check(CALLERS.format(decoding="False")) == []
    assert check(CALLERS.format(decoding="x.is_causal")) == []  # one unknown caller: no alternatives at all
