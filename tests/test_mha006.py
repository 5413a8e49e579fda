"""MHA006 mask-repeat-layout: a per-sample (N, L, S) mask tiled head-major with .repeat(num_heads, 1, 1) for MHA."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, NOT_CONFIRMED, REPRODUCED, UNSAFE, Severity
from mhalint.fixes import apply_fixes
from mhalint.rules.mask_repeat_layout import MaskRepeatLayout

CODE = "MHA006"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def check(lint):
    def run(source: str, min_severity=None):
        found = lint(textwrap.dedent(source), CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def site(tiling: str, call: str = "attn(x, x, x, attn_mask=m, need_weights=False)[0]",
         ctor: str = "nn.MultiheadAttention(16, 4, batch_first=True)", imp: str = "from torch import nn",
         mask: str = "key_padding_mask[:, None, :].expand(-1, x.size(1), -1)") -> str:
    """A function that builds a per-sample mask from a key padding mask (its annotation documents the batch
    axis), tiles it, and passes it on."""
    return (f"import torch\n{imp}\nattn = {ctor}\n"
            f"def f(x, key_padding_mask: Bool[Tensor, 'batch keys'], num_heads=4):\n"
            f"    m = {mask}\n"
            f"    m = {tiling}\n"
            f"    return {call}\n")


# ---- the entry points and their mask arguments ----------------------------------------------------------------
@pytest.mark.parametrize(("imp", "ctor", "call", "api"), [
    ("import torch.nn as nn", "nn.MultiheadAttention(16, 4)", "attn(x, x, x, attn_mask=m)[0]", "MultiheadAttention"),
    ("import torch", "torch.nn.MultiheadAttention(16, 4)", "attn(x, x, x, attn_mask=m)[0]", "MultiheadAttention"),
    ("from torch.nn import MultiheadAttention as MHA", "MHA(16, 4)", "attn(x, x, x, attn_mask=m)[0]",
     "MultiheadAttention"),
    ("import torch", "torch.nn.modules.activation.MultiheadAttention(16, 4)", "attn(x, x, x, None, True, m)[0]",
     "MultiheadAttention"),
    ("import torch", "torch.ao.nn.quantizable.MultiheadAttention(16, 4)", "attn(x, x, x, attn_mask=m)[0]",
     "MultiheadAttention"),
    ("from torch import nn", "nn.TransformerEncoderLayer(16, 4)", "attn(x, src_mask=m)", "TransformerEncoderLayer"),
    ("from torch import nn", "nn.TransformerEncoderLayer(16, 4)", "attn(x, m)", "TransformerEncoderLayer"),
    ("from torch import nn", "nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4), 2)", "attn(x, mask=m)",
     "TransformerEncoder"),
    ("from torch import nn", "nn.TransformerDecoderLayer(16, 4)", "attn(x, x, tgt_mask=m)", "TransformerDecoderLayer"),
    ("from torch import nn", "nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4), 2)", "attn(x, x, None, m)",
     "TransformerDecoder"),
    ("from torch import nn", "nn.Transformer(16, 4)", "attn(x, x, tgt_mask=m)", "Transformer"),
])
def test_every_entry_point_and_mask_argument(check, imp, ctor, call, api):
    found = check(site("m.repeat(num_heads, 1, 1)", call, ctor, imp))
    assert [(f.line, f.severity) for f in found] == [(6, Severity.ERROR)]
    assert f"nn.{api} " in found[0].message


def test_functional_multi_head_attention_forward(check):
    found = check("""\
        import torch.nn.functional as F
        def f(q, w, b, ow, ob, key_padding_mask, num_heads=4):
            m = key_padding_mask.unsqueeze(1).expand(-1, q.size(0), -1)
            return F.multi_head_attention_forward(q, q, q, 16, num_heads, w, b, None, None, False, 0.0, ow, ob,
                                                  attn_mask=m.repeat(num_heads, 1, 1))
        """)
    assert [f.line for f in found] == [5]


@pytest.mark.parametrize("call", [
    "attn(x, x, x, m)[0]",  # the 4th positional is key_padding_mask (MHA010's business, not a 3-D mask)
    "attn(x, x, x, key_padding_mask=m)[0]",
    "m.sum()",
    "torch.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=m)",  # SDPA broadcasts (N, h, L, S)
])
def test_a_mask_that_reaches_no_3d_mask_argument_is_not_flagged(check, call):
    assert check(site("m.repeat(num_heads, 1, 1)", call)) == []


# ---- tiling forms ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tiling", [
    "m.repeat(num_heads, 1, 1)",
    "m.repeat((num_heads, 1, 1))",
    "m.tile(num_heads, 1, 1)",
    "m.unsqueeze(0).expand(num_heads, -1, -1, -1).reshape(-1, x.size(1), x.size(1))",
    "m[None].expand(num_heads, -1, -1, -1).flatten(0, 1)",
    "m[None, ...].expand(num_heads, *m.shape).view(-1, x.size(1), x.size(1))",
    "m.unsqueeze(0).repeat(num_heads, 1, 1, 1).flatten(0, 1)",
])
def test_head_major_forms_are_flagged(check, tiling):
    found = check(site(tiling))
    assert [(f.line, f.column) for f in found] == [(6, 9)]


@pytest.mark.parametrize("tiling", [
    "m.repeat_interleave(num_heads, 0)",
    "m.repeat_interleave(num_heads, dim=0)",
    "m.unsqueeze(1).repeat(1, num_heads, 1, 1).flatten(0, 1)",  # Mask2Former
    "m.unsqueeze(1).expand(-1, num_heads, -1, -1).reshape(-1, x.size(1), x.size(1))",
    "m.repeat(num_heads, 2, 1)",
    "m.repeat(1, 1, 1)",
    "m.repeat(x.size(0) * num_heads, 1, 1)",
    "m.unsqueeze(0).expand(num_heads, -1, -1, -1).flatten(1, 2)",
])
def test_batch_major_and_other_forms_are_clean(check, tiling):
    assert check(site(tiling)) == []


# ---- the repeat count is the head count ------------------------------------------------------------------------
@pytest.mark.parametrize(("count", "flagged"), [
    ("num_heads", True),
    ("4", True),  # equal to the module's num_heads
    ("HEADS", True),
    ("2", False),  # not the module's head count
    ("self_heads", False),
    ("x.size(0)", False),
])
def test_repeat_count_must_be_the_head_count(check, count, flagged):
    source = site(f"m.repeat({count}, 1, 1)", ctor="nn.MultiheadAttention(16, HEADS, batch_first=True)")
    source = source.replace("import torch\n", "import torch\nHEADS = 4\n", 1).replace(
        "num_heads=4):", "num_heads=4, self_heads=3):")
    assert len(check(source)) == (1 if flagged else 0)


def test_head_count_through_a_local_and_the_constructor(check):
    found = check("""\
        import torch
        from torch import nn
        class Block(nn.Module):
            def __init__(self, dim=16, heads=4):
                super().__init__()
                self.num_heads = heads
                self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            def forward(self, x, key_padding_mask):
                h = self.num_heads
                m = key_padding_mask[:, None, :].expand(-1, x.size(1), -1)
                return self.attn(x, x, x, attn_mask=m.repeat(h, 1, 1))[0]
        """)
    assert [f.line for f in found] == [11]
    assert "`h` is the head count (by its name)" in found[0].evidence


def test_one_head_is_never_flagged(check):
    assert check(site("m.repeat(num_heads, 1, 1)", ctor="nn.MultiheadAttention(16, 1)").replace(
        "num_heads=4", "num_heads=1")) == []
    assert check(site("m.repeat(1, 1, 1)", ctor="nn.MultiheadAttention(16, 1)")) == []


# ---- is the mask per sample? severities --------------------------------------------------------------------------
ESTABLISHED, NAMED, UNTOLD = "established", "named", "untold"


@pytest.mark.parametrize(("mask", "shown"), [
    # the code establishes a batch axis: an error
    ("key_padding_mask[:, None, :].expand(-1, x.size(1), -1)", ESTABLISHED),  # the annotation documents it
    ("torch.matmul(key_padding_mask[:, :, None].float(), key_padding_mask[:, None, :].float()).bool()",
     ESTABLISHED),
    ("torch.zeros(x.size(0), 5, 5, dtype=torch.bool) | key_padding_mask[:, None, :]", ESTABLISHED),
    # only a name or an idiom says so: a warning that names it
    ("torch.zeros([bs, 5, 5], dtype=torch.bool)", NAMED),
    ("torch.matmul(q.float(), k.float()).bool()", NAMED),
    ("torch.bmm(q, k) > 0", NAMED),
    ("(q @ k).bool()", NAMED),
    ("segment_ids[:, :, None] != segment_ids[:, None, :]", NAMED),
    # nothing says: a warning that says so (`x.size(0)` is the batch only if x is batch-first)
    ("torch.zeros(x.size(0), 5, 5, dtype=torch.bool)", UNTOLD),
    ("x.new_zeros(x.shape[0], 5, 5)", UNTOLD),
    ("torch.zeros(n, 5, 5, dtype=torch.bool)", UNTOLD),
    ("other", UNTOLD),
])
def test_severity_follows_what_the_construction_shows(check, mask, shown):
    source = site("m.repeat(num_heads, 1, 1)", mask=mask).replace(
        "num_heads=4):", "num_heads=4, bs=2, n=2, q=None, k=None, other=None, segment_ids=None):")
    found = check(source, min_severity="info")
    assert [(f.line, f.severity) for f in found] == [(6, Severity.ERROR if shown == ESTABLISHED
                                                      else Severity.WARNING)]
    untold = any("could not be told" in e for e in found[0].evidence)
    if shown == ESTABLISHED:
        assert "tiles a per-sample mask head-major" in found[0].message and not untold
    else:
        assert "tiles a mask that may differ per sample head-major" in found[0].message
        assert found[0].help.startswith("if the mask differs between samples, tile it batch-major")
        assert untold == (shown == UNTOLD)


def test_a_tensor_measured_on_an_established_batch_axis_is_per_sample(check):
    source = site("m.repeat(num_heads, 1, 1)", mask="torch.zeros(B, 5, 5, dtype=torch.bool)").replace(
        "    m = torch.zeros", "    B, T, C = x.shape\n    m = torch.zeros")
    found = check(source)
    assert [f.severity for f in found] == [Severity.ERROR]
    assert any("`B, T, C = x.shape`" in e for e in found[0].evidence)


def test_batch_size_through_a_local(check):
    """A size measured on an established batch axis is the batch; measured on a tensor whose layout is unknown
    (`x.shape[0]` is the sequence of a sequence-first x), it says nothing."""
    source = site("m.repeat(num_heads, 1, 1)", mask="torch.zeros(size, 5, 5, dtype=torch.bool)")
    found = check(source.replace("    m = torch.zeros", "    size = key_padding_mask.shape[0]\n    m = torch.zeros"))
    assert found[0].severity == Severity.ERROR
    assert any("the annotation says so: axis `batch` is the batch" in e for e in found[0].evidence)
    found = check(source.replace("    m = torch.zeros", "    size = x.shape[0]\n    m = torch.zeros"))
    assert found[0].severity == Severity.WARNING and any("could not be told" in e for e in found[0].evidence)


@pytest.mark.parametrize("mask", [
    "torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)",
    "nn.Transformer.generate_square_subsequent_mask(x.size(1))",
    "torch.ones(x.size(1), x.size(1)).triu(1).bool()",
    "torch.full((5, 5), float('-inf')).triu(1)",
    "torch.triu(torch.ones(5, 5, dtype=torch.bool), 1).unsqueeze(0).expand(x.size(0), -1, -1)",
])
def test_a_mask_shared_by_every_sample_is_not_flagged(check, mask):
    assert check(site("m.repeat(num_heads, 1, 1)", mask=mask), min_severity="info") == []


def test_per_sample_through_the_callers(check):
    source = """\
        import torch
        from torch import nn
        class Layer(nn.Module):
            def __init__(self, nhead=4):
                super().__init__()
                self.nhead = nhead
                self.attn = nn.MultiheadAttention(16, nhead)
            def forward(self, x, mask):
                return self.attn(x, x, x, attn_mask=mask.repeat(self.nhead, 1, 1))[0]
        layer = Layer()
        def run(x, lengths):  # lengths: (B, 1)
            pair = (torch.arange(5)[None, :] >= lengths).unsqueeze(1).expand(-1, 5, -1)
            return layer(x, pair)
        """
    found = check(source)
    assert [(f.line, f.severity) for f in found] == [(9, Severity.ERROR)]
    assert any("from the call at line 13" in e for e in found[0].evidence)
    named = check(source.replace("  # lengths: (B, 1)", ""))  # `lengths` alone: a warning that says why
    assert [(f.line, f.severity) for f in named] == [(9, Severity.WARNING)]
    assert any("`lengths` holds per-sample data by its name" in e for e in named[0].evidence)


# ---- following the tiled mask --------------------------------------------------------------------------------------
def test_the_lighthouse_shape(check):
    found = check("""\
        import torch
        from torch import nn
        class T2V(nn.Module):
            def __init__(self, d_model, nhead, dropout=0.1):
                super().__init__()
                self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
                self.nhead = nhead
            def forward(self, src, src_key_padding_mask, video_length):
                q, k, v = src[:video_length], src[video_length:], src[video_length:]
                qmask, kmask = src_key_padding_mask[:, :video_length].unsqueeze(2), \\
                    src_key_padding_mask[:, video_length:].unsqueeze(1)
                attn_mask = torch.matmul(qmask.float(), kmask.float()).bool().repeat(self.nhead, 1, 1)
                src2 = self.self_attn(q, k, value=v, attn_mask=attn_mask,
                                      key_padding_mask=src_key_padding_mask[:, video_length:])[0]
                return src2
        """)
    assert [(f.line, f.column, f.severity) for f in found] == [(12, 21, Severity.ERROR)]
    finding = found[0]
    assert "tiles a per-sample mask head-major, but nn.MultiheadAttention reads attn_mask (line 13) batch-major" in \
        finding.message
    assert finding.evidence[0] == "`self.nhead` is the head count (by its name)"
    assert "it reaches nn.MultiheadAttention attn_mask at line 13" in finding.evidence
    assert finding.help == ("tile it batch-major: `torch.matmul(qmask.float(), kmask.float()).bool()"
                            ".repeat_interleave(self.nhead, dim=0)`")
    assert "docs/torch-facts.md#mask-repeat-layout" in finding.explanation


def test_through_self_attribute_and_a_helper_method(check):
    found = check("""\
        import torch
        from torch import nn
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.num_heads = 4
                self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def build(self, pad):
                pair = pad[:, :, None] | pad[:, None, :]
                return pair.repeat(self.num_heads, 1, 1)
            def prepare(self, pad: Bool[Tensor, "batch seq"]):
                self.mask = self.build(pad)
            def forward(self, x):
                return self.attn(x, x, x, attn_mask=self.mask.to(x.device))[0]
        """)
    assert [(f.line, f.severity) for f in found] == [(10, Severity.ERROR)]
    assert any("returned by `build()`" in e for e in found[0].evidence)


def test_across_classes_through_a_module_list(check):
    found = check("""\
        import torch
        from torch import nn
        class Layer(nn.Module):
            def __init__(self, d, h):
                super().__init__()
                self.self_attn = nn.MultiheadAttention(d, h)
            def forward(self, x, pos, attn_mask=None):
                return self.self_attn(x + pos, x, x, attn_mask=attn_mask)[0]
        class Decoder(nn.Module):
            def __init__(self, d, h, n):
                super().__init__()
                self.layers = nn.ModuleList([Layer(d, h) for _ in range(n)])
            def forward(self, x, pos, attn_mask=None):
                for layer in self.layers:
                    x = layer(x, pos, attn_mask)
                return x
        class Head(nn.Module):
            def __init__(self, d=16, nh=4):
                super().__init__()
                self.nhead = nh
                self.decoder = Decoder(d, nh, 2)
            def forward(self, x, pos, task_mask):
                bs = task_mask.shape[0]
                new_attn_mask = torch.zeros([bs, 7, 7], dtype=torch.bool)
                new_attn_mask[:, :, 3:] = (task_mask == 0).unsqueeze(1)
                if self.training:
                    new_attn_mask = new_attn_mask.repeat(self.nhead, 1, 1)
                    attn_mask = new_attn_mask.to(x.device)
                else:
                    attn_mask = new_attn_mask.repeat(self.nhead, 1, 1).to(x.device)
                return self.decoder(x, pos, attn_mask=attn_mask)
        """)
    assert [(f.line, f.severity) for f in found] == [(27, Severity.ERROR), (30, Severity.ERROR)]
    route = " ".join(found[0].evidence)
    assert "`Decoder.forward()`" in route and "`Layer.forward()`" in route
    assert "reads attn_mask (line 8)" in found[0].message  # where the mask finally reaches torch


def test_a_mask_module_whose_forward_returns_the_tiled_mask(check):
    found = check("""\
        import torch
        from torch import nn
        from config import N_HEAD
        class PrepareMask(nn.Module):
            def __init__(self):
                super().__init__()
                self.num_heads = N_HEAD
            def forward(self, keep):
                pair = torch.bmm(keep, keep.transpose(1, 2))
                pair = pair.repeat(self.num_heads, 1, 1)
                return pair
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                layer = nn.TransformerEncoderLayer(d_model=64, nhead=N_HEAD, batch_first=True)
                self.encoder = nn.TransformerEncoder(layer, num_layers=2)
                self.prepare = PrepareMask()
            def forward(self, x, keep):  # keep: (batch, seq, 1)
                return self.encoder(x, self.prepare(keep))
        """)
    assert [(f.line, f.severity) for f in found] == [(10, Severity.ERROR)]
    assert any("returned by `forward()`" in e for e in found[0].evidence)
    assert "nn.TransformerEncoder reads mask (line 19)" in found[0].message


def test_a_factory_sized_by_len_of_a_list_is_not_enough_for_an_error(check):
    found = check("""\
        import torch
        from torch import nn
        class Pool(nn.Module):
            def __init__(self, dim, num_heads):
                super().__init__()
                self.attn = nn.MultiheadAttention(dim, num_heads)
                self.num_heads = num_heads
            def forward(self, x, groups, max_len):
                mask = torch.ones(len(groups), max_len, max_len)
                for i, g in enumerate(groups):
                    mask[i, :g, :g] = 0
                mask = mask.repeat(self.num_heads, 1, 1)
                return self.attn(x, x, x, attn_mask=mask.bool().to(x.device))[0]
        """)
    assert [(f.line, f.severity) for f in found] == [(12, Severity.WARNING)]  # a list's length is any size
    assert any("could not be told" in e for e in found[0].evidence)


def test_an_untraceable_layer_is_matched_by_parameter_name_only_when_unique(check):
    source = """\
        import torch
        from torch import nn
        from .utils import _get_clones
        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.self_attn = nn.MultiheadAttention(16, 4)
            def forward(self, x, attn_mask=None):
                return self.self_attn(x, x, x, attn_mask=attn_mask)[0]
        class Decoder(nn.Module):
            def __init__(self, layer):
                super().__init__()
                self.nhead = 4
                self.layers = _get_clones(layer, 2)
            def forward(self, x, pad):
                attn_mask = pad.unsqueeze(1).expand(-1, x.size(0), -1).repeat(self.nhead, 1, 1)
                for i, layer in enumerate(self.layers):
                    x = layer(x, attn_mask)
                return x
        """
    found = check(source)
    assert [f.line for f in found] == [16]
    assert any("the only class in this file" in e for e in found[0].evidence)
    twin = source.replace("class Decoder", "class Other(Layer):\n"
                                           "            def forward(self, y, attn_mask=None):\n"
                                           "                return self.self_attn(y, y, y, attn_mask=attn_mask)[0]\n"
                                           "        class Decoder")
    assert check(twin) == []  # two classes could be the layer: no guess


def test_a_rebinding_before_the_call_hides_the_repeat_but_a_sibling_branch_does_not(check):
    rebound = site("m.repeat(num_heads, 1, 1)").replace(
        "    return", "    m = torch.zeros(x.size(1), x.size(1), dtype=torch.bool)\n    return")
    assert check(rebound) == []
    branch = site("m.repeat(num_heads, 1, 1)").replace(
        "    m = m.repeat(num_heads, 1, 1)\n",
        "    if x.size(0) > 1:\n        m = m.repeat(num_heads, 1, 1)\n    else:\n"
        "        m = m.repeat_interleave(num_heads, 0)\n")
    assert [f.line for f in check(branch)] == [7]


# ---- headline, help and explanation --------------------------------------------------------------------------------
@pytest.mark.parametrize("example", MaskRepeatLayout.invalid, ids=lambda e: e.code.splitlines()[-1].strip()[:40])
def test_each_invalid_example_has_a_short_headline_with_the_tiling_and_the_destination(check, example):
    found = check(example.code, min_severity="info")
    assert found and found[0].severity == example.severity
    finding = found[0]
    arguments = dict(finding.arguments)
    assert len(finding.message) <= HEADLINE_LIMIT, finding.message
    assert finding.message.startswith("`") and "head-major" in finding.message
    assert f"reads {arguments['parameter']} (line " in finding.message
    assert ("per-sample mask" in finding.message) == arguments["per_sample"]
    assert "Evidence:" not in finding.message and "Fix:" not in finding.message and "measured" not in finding.message
    assert "repeat_interleave(" in finding.help
    explanation = " ".join(finding.explanation.split())
    assert "docs/torch-facts.md#mask-repeat-layout" in explanation and "torch 2.13 experiment" in explanation
    assert "1.517e-01 off the per-sample result" in explanation


def test_a_long_tiling_is_shortened_in_the_headline_only(check):
    tiling = "(" + " | ".join(["m"] * 20) + ").repeat(num_heads, 1, 1)"
    found = check(site(tiling))
    message = found[0].message
    assert len(message) <= HEADLINE_LIMIT
    assert message.startswith("`(m | m | m") and message.endswith(
        "...` tiles a per-sample mask head-major, but nn.MultiheadAttention reads attn_mask (line 7) batch-major")
    assert found[0].help.startswith("tile it batch-major: `(m | m")  # the fix carries the whole replacement
    after, applied = apply_fixes(site(tiling), found, unsafe=True)
    assert applied == 1 and after.splitlines()[5].endswith(").repeat_interleave(num_heads, dim=0)")


# ---- decoys --------------------------------------------------------------------------------------------------------
def test_a_project_class_named_like_torch_is_followed_into(check):
    source = """\
        import torch
        from torch import nn
        class MultiheadAttention(nn.Module):
            def __init__(self, d, h):
                super().__init__()
                self.h = h
            def forward(self, q, k, v, attn_mask=None):
                return q
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.num_heads = 4
                self.attn = MultiheadAttention(16, 4)
            def forward(self, x, pad):
                m = pad[:, None, :].expand(-1, x.size(0), -1)
                return self.attn(x, x, x, attn_mask=m.repeat(self.num_heads, 1, 1))
        """
    assert check(source) == []  # its forward never reaches torch's attention
    real = source.replace("        return q\n", "        return nn.functional.multi_head_attention_forward(\n"
                                                 "            q, k, v, 16, self.h, None, None, None, None, False, 0.0,"
                                                 " None, None, attn_mask=attn_mask)\n")
    assert [f.line for f in check(real)] == [17]


def test_a_multihead_attention_copied_into_another_module_is_a_warning(check):
    found = check("""\
        import torch
        from torch import nn
        from project.attention import MultiheadAttention as CrossAttention
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.nhead = 4
                self.attn = CrossAttention(16, 4)
            def forward(self, x, key_padding_mask):  # key_padding_mask: (N, S)
                m = key_padding_mask[:, None, :].expand(-1, x.size(0), -1)
                return self.attn(x, x, x, attn_mask=m.repeat(self.nhead, 1, 1))[0]
        """, min_severity="info")
    assert [(f.line, f.severity) for f in found] == [(11, Severity.WARNING)]
    assert "is assumed to read attn_mask (line 11) batch-major like torch" in found[0].message
    assert found[0].message.startswith("`m.repeat(self.nhead, 1, 1)` tiles a per-sample mask head-major; "
                                       "project.attention.Multihead")
    assert len(found[0].message) <= HEADLINE_LIMIT
    assert found[0].help.startswith("if project.attention.MultiheadAttention keeps torch's layout, tile it")
    assert any("taken to keep torch's (N*num_heads, L, S) layout" in e for e in found[0].evidence)


def test_a_copied_multihead_attention_with_a_mask_of_unknown_content(check):
    found = check("""\
        from torch import nn
        from project.attention import MultiheadAttention
        attn = MultiheadAttention(16, 4)
        def f(x, mask, num_heads=4):
            return attn(x, x, x, attn_mask=mask.repeat(num_heads, 1, 1))[0]
        """, min_severity="info")
    assert [(f.line, f.severity) for f in found] == [(5, Severity.WARNING)]
    message = found[0].message
    assert len(message) <= HEADLINE_LIMIT  # the class's long name is shortened, never the fixed words
    assert message.startswith("`mask.repeat(num_heads, 1, 1)` tiles a mask that may differ per sample head-major; "
                              "project.")
    assert message.endswith(" is assumed to read attn_mask (line 5) batch-major like torch")
    assert found[0].help == ("if the mask differs between samples and project.attention.MultiheadAttention keeps "
                             "torch's layout, tile it batch-major: `mask.repeat_interleave(num_heads, dim=0)`")


# ---- the fix ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("tiling", "fixed"), [
    ("m.repeat(num_heads, 1, 1)", "m.repeat_interleave(num_heads, dim=0)"),
    ("m.repeat( num_heads , 1, 1 )", "m.repeat_interleave( num_heads , dim=0 )"),
    ("m.tile((num_heads, 1, 1))", "m.repeat_interleave(num_heads, dim=0)"),
    ("m.unsqueeze(0).expand(num_heads, -1, -1, -1).reshape(-1, x.size(1), x.size(1))",
     "m.repeat_interleave(num_heads, dim=0)"),
    ("(m | m).repeat(num_heads, 1, 1)", "(m | m).repeat_interleave(num_heads, dim=0)"),
])
def test_fix_text_applicability_and_idempotence(check, lint, tiling, fixed):
    source = site(tiling)
    found = check(source)
    assert len(found) == 1
    fix = found[0].fix
    assert fix is not None and fix.applicability == UNSAFE
    after, applied = apply_fixes(source, found, unsafe=True)
    assert applied == 1
    assert after.splitlines()[5] == f"    m = {fixed}"
    assert check(after, min_severity="info") == []
    assert apply_fixes(source, found, unsafe=False) == (source, 0)  # unsafe: not applied without --unsafe-fixes


def test_bad_example_fixed_equals_the_fixed_example(lint):
    bad = (EXAMPLES / "mha006_mask_repeat_layout_bad.py").read_text()
    after, applied = apply_fixes(bad, lint(bad, CODE), unsafe=True)
    assert applied == 1
    assert "other_document.repeat_interleave(self.num_heads, dim=0)" in after
    assert [f for f in lint(after) if f.code == CODE] == []


def test_arguments_carry_what_the_probe_needs(check):
    found = check(site("m.unsqueeze(0).expand(num_heads, -1, -1, -1).reshape(-1, 5, 5)"))
    arguments = dict(found[0].arguments)
    assert arguments == {"api": torchapi.MHA, "parameter": "attn_mask", "form": "expand", "num_heads": 4,
                         "per_sample": True}


# ---- the probe -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["repeat", "expand"])
def test_probe_confirms_a_bad_site(torch, form):
    status, evidence = MaskRepeatLayout.probe({"api": torchapi.MHA, "parameter": "attn_mask", "form": form,
                                               "num_heads": 8, "per_sample": True}, torch)
    assert status == CONFIRMED, evidence
    assert "num_heads=8" in evidence
    # the fixed tiling matches the per-sample loop up to float noise (which depends on threads and kernels)
    assert float(re.search(r"repeat_interleave\(h, 0\) by ([0-9.]+e[+-][0-9]+)", evidence).group(1)) < 1e-5
    assert float(re.search(r"per-sample result by ([0-9.]+e[+-][0-9]+)", evidence).group(1)) > 1e-2


def test_probe_on_a_warning_site_says_it_assumed_a_per_sample_mask(torch):
    status, evidence = MaskRepeatLayout.probe({"api": torchapi.MHA, "form": "repeat", "per_sample": False}, torch)
    assert status == REPRODUCED, evidence
    assert evidence.startswith("reproduced with assumed per-sample mask (the site's mask was not shown to differ "
                               "between samples): repeat(h, 1, 1) differs from the per-sample result by ")
    wrong = float(evidence.split("differs from the per-sample result by ")[1].split(";")[0])
    assert wrong > 1e-4


def test_probe_of_a_per_sample_site_is_confirmed_without_assuming_anything(torch):
    status, evidence = MaskRepeatLayout.probe({"api": torchapi.MHA, "form": "repeat", "per_sample": True}, torch)
    assert status == CONFIRMED and not evidence.startswith("reproduced"), evidence


def test_probe_does_not_confirm_a_fixed_site(torch):
    status, evidence = MaskRepeatLayout.probe({"api": torchapi.MHA, "form": "repeat_interleave",
                                               "per_sample": True}, torch)
    assert status == NOT_CONFIRMED, evidence


def test_probe_runs_through_the_cli_on_the_example(torch, probed_examples):
    result = probed_examples.of("mha006_mask_repeat_layout_bad.py")  # `check --probe` over the examples, once
    assert "probe confirmed" in result.output and "repeat(h, 1, 1) differs" in result.output, result.output
