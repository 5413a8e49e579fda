"""mhalint/analysis: the axis-role transfer functions, the name vocabulary and the documented-shape readers,
each both ways: it finds the role where the code shows it, and refuses to guess where it does not."""

from __future__ import annotations

import pytest

from mhalint.analysis import axes, documented
from mhalint.analysis.axes import BATCH_FIRST, SEQ_FIRST, Axis, Evidence, Role, Strength
from mhalint.analysis.names import role_of_size_name, roles_of_names

PROOF = Evidence("B, T, C = x.shape", 3, "unpacks the shape", Strength.ESTABLISHED)
NAME = Evidence("bsz", 4, "named", Strength.NAMED)
B, T, E = Axis(Role.BATCH, PROOF), Axis(Role.SEQUENCE, PROOF), Axis(Role.EMBEDDING, PROOF)
U = axes.UNKNOWN_AXIS


def roles(shape):
    return None if shape is None else [axis.role for axis in shape]


def test_transpose_swaps_and_a_swap_of_unknown_axes_stays_unknown():
    assert roles(axes.transpose((B, T, E), 0, 1)) == [Role.SEQUENCE, Role.BATCH, Role.EMBEDDING]
    assert roles(axes.transpose((B, T, E), -1, -2)) == [Role.BATCH, Role.EMBEDDING, Role.SEQUENCE]
    assert roles(axes.transpose((U, U, U), 0, 1)) == [Role.UNKNOWN] * 3
    assert axes.transpose((B, T, E), 0, 3) is None


def test_padded_gives_an_open_shape_the_axes_a_dim_names_and_a_closed_one_none():
    assert roles(axes.padded((B, axes.OPEN), 2)) == [Role.BATCH, Role.UNKNOWN, Role.UNKNOWN]
    assert axes.padded((B, axes.OPEN), 2)[-1] is axes.OPEN  # still zero or more axes after
    assert roles(axes.transpose(axes.padded((B, axes.OPEN), 2), 0, 1))[:2] == [Role.UNKNOWN, Role.BATCH]
    assert axes.padded((B, T), 3) is None and axes.padded((B, T), 2) == (B, T)


def test_permute_needs_a_full_order():
    assert roles(axes.permute((B, T, E), [1, 0, 2])) == [Role.SEQUENCE, Role.BATCH, Role.EMBEDDING]
    assert axes.permute((B, T, E), [1, 0]) is None
    assert axes.permute((B, T, E), [0, 0, 1]) is None


def test_permute_gives_an_open_shape_the_rank_its_order_names():
    assert roles(axes.permute((B, axes.OPEN), [1, 0, 2])) == [Role.UNKNOWN, Role.BATCH, Role.UNKNOWN]
    assert roles(axes.permute((B, axes.OPEN), [1, 0])) == [Role.UNKNOWN, Role.BATCH]
    assert axes.permute((B, T, axes.OPEN), [1]) is None


def test_movedim_unsqueeze_squeeze():
    assert roles(axes.movedim((B, T, E), 0, 2)) == [Role.SEQUENCE, Role.EMBEDDING, Role.BATCH]
    assert roles(axes.unsqueeze((T, E), 1, B)) == [Role.SEQUENCE, Role.BATCH, Role.EMBEDDING]
    assert roles(axes.squeeze((B, U, E), 1)) == [Role.BATCH, Role.EMBEDDING]
    assert axes.squeeze((B, T, E), None) is None  # squeeze() depends on sizes


def test_flatten_folds_spatial_axes_into_a_sequence_and_keeps_the_batch():
    h, w = Axis(Role.SPATIAL, PROOF), Axis(Role.SPATIAL, PROOF)
    assert roles(axes.flatten((B, E, h, w), 2)) == [Role.BATCH, Role.EMBEDDING, Role.SEQUENCE]
    assert roles(axes.flatten((B, Axis(Role.HEADS, PROOF), T, E), 0, 1)) == [Role.BATCH, Role.SEQUENCE,
                                                                              Role.EMBEDDING]
    assert roles(axes.flatten((U, E, h, U), 2)) == [Role.UNKNOWN, Role.EMBEDDING, Role.UNKNOWN]


def test_concatenate_agrees_or_gives_unknown():
    assert roles(axes.concatenate([(B, T, E), (U, U, E)], -1)) == [Role.BATCH, Role.SEQUENCE, Role.EMBEDDING]
    assert roles(axes.concatenate([(B, T, E), (T, B, E)], -1)) == [Role.UNKNOWN, Role.UNKNOWN, Role.EMBEDDING]
    assert roles(axes.concatenate([(B, T, E), (B, U, E)], 1)) == [Role.BATCH, Role.UNKNOWN, Role.EMBEDDING]
    assert axes.concatenate([(B, T, E), (B, E)], 0) is None


@pytest.mark.parametrize(("shape", "kind"), [
    ((B, T, E), BATCH_FIRST), ((T, B, E), SEQ_FIRST), ((U, T, E), BATCH_FIRST), ((T, U, E), SEQ_FIRST),
    ((B, U, U), BATCH_FIRST), ((U, B, U), SEQ_FIRST),
    ((U, U, E), None), ((B, B, E), None), ((U, E, B), None), ((B, E, T), None), ((T, T, E), None),
    ((B, T), None),
])
def test_layout_reads_where_the_batch_is_and_refuses_contradictions(shape, kind):
    found = axes.layout(shape)
    assert (found.kind if found else None) == kind


def test_layout_keeps_the_strength_of_its_evidence():
    assert axes.layout((Axis(Role.BATCH, NAME), U, U)).strength is Strength.NAMED
    assert axes.layout((B, U, U)).strength is Strength.ESTABLISHED


@pytest.mark.parametrize(("names", "expected"), [
    (["B", "T", "C"], [Role.BATCH, Role.SEQUENCE, Role.EMBEDDING]),
    (["bsz", "tgt_len", "embed_dim"], [Role.BATCH, Role.SEQUENCE, Role.EMBEDDING]),
    (["N", "L", "E"], [Role.BATCH, Role.SEQUENCE, Role.EMBEDDING]),
    (["L", "N", "E"], [Role.SEQUENCE, Role.BATCH, Role.EMBEDDING]),
    (["b", "n", "d"], [Role.BATCH, Role.SEQUENCE, Role.EMBEDDING]),  # einops: n is the tokens
    (["nq", "bs", "d_model"], [Role.SEQUENCE, Role.BATCH, Role.EMBEDDING]),
    (["B", "C", "H", "W"], [Role.BATCH, Role.EMBEDDING, Role.SPATIAL, Role.SPATIAL]),
    (["B", "H", "T", "D"], [Role.BATCH, Role.HEADS, Role.SEQUENCE, Role.EMBEDDING]),
    (["bs", "HxW", "C"], [Role.BATCH, Role.SEQUENCE, Role.EMBEDDING]),
    (["(h w)", "b", "c"], [Role.SEQUENCE, Role.BATCH, Role.EMBEDDING]),
    (["h", "w", "c"], [Role.SPATIAL, Role.SPATIAL, Role.EMBEDDING]),
    (["foo", "bar", "baz"], [Role.UNKNOWN] * 3),
])
def test_names_are_read_as_a_group(names, expected):
    assert roles_of_names(names) == expected


def test_a_lone_size_name():
    assert role_of_size_name("bsz") is Role.BATCH
    assert role_of_size_name("n") is Role.UNKNOWN  # batch or tokens: a lone n says nothing
    assert role_of_size_name("h") is Role.UNKNOWN  # heads or height


@pytest.mark.parametrize(("text", "names"), [
    ("(B, L, E)", ["B", "L", "E"]),
    ("x: (batch, seq_len, embed_dim) token features.", ["batch", "seq_len", "embed_dim"]),
    ("Tensor shape [B, L, N]", ["B", "L", "N"]),
    ("[bs, HxW, C]", ["bs", "HxW", "C"]),
    ("# nq, bs, d_model", ["nq", "bs", "d_model"]),
    ("# shape - batch_size, max_len, embed_size", ["batch_size", "max_len", "embed_size"]),
    ("shape: B, L, E", ["B", "L", "E"]),
    ("# query positions, as in DAB-DETR", None),  # an acronym, not axis letters
    ("# RGB input", None),
    ("x is NCHW", ["N", "C", "H", "W"]),
    ("shapes differ, see above", None),
    ("shape of x, y, z", None),
    ("B x L x E", ["B", "L", "E"]),
    ("QxNxC", ["Q", "N", "C"]),
    ("# attention expects npoints x batch x channel features", ["npoints", "batch", "channel"]),
    ("# the product matrix x vector x scalar", None),  # long words that name no axis: prose
    ("NLD -> LND", ["L", "N", "D"]),
    ("(B, L, E) to (L, B, E)", ["L", "B", "E"]),
    ("the output of the layer", None),
    ("(a, b)", None),
    ("returns (out, weights, cache) when asked", ["out", "weights", "cache"]),
])
def test_shape_in_text(text, names):
    assert documented.shape_in_text(text) == names


@pytest.mark.parametrize("docstring", [
    "Args:\n    x (Tensor): (B, L, E) tokens.\n    mask: (B, L)\n",
    "Parameters\n----------\nx : torch.Tensor\n    Tensor shape [B, L, E]\nmask : Tensor\n",
    ":param x: the tokens, (B, L, E)\n:param mask: padding\n",
])
def test_docstring_styles(docstring):
    assert documented.in_docstring(docstring, "x")[0] == ["B", "L", "E"]
    assert documented.in_docstring(docstring, "y") is None


def test_a_docstring_entry_of_another_parameter_is_not_read():
    assert documented.in_docstring("Args:\n    feats: (B, S, E)\n    x: the query\n", "x") is None


@pytest.mark.parametrize(("annotation", "names"), [
    ('Float[Tensor, "batch seq dim"]', ["batch", "seq", "dim"]),
    ("Float[torch.Tensor, 'b n d']", ["b", "n", "d"]),
    ('TensorType["batch", "seq", "dim"]', ["batch", "seq", "dim"]),
    ('Float[Tensor, "dim"]', None),
    ("torch.Tensor", None),
])
def test_annotations(annotation, names):
    assert documented.in_annotation(annotation) == names


H = Axis(Role.HEADS, NAME)
S = Axis(Role.SPATIAL, PROOF)


@pytest.mark.parametrize(("before", "after", "pair"), [
    ((B, T, E), [[B], [T], [H], [U]], None),  # view(B, T, H, D): the heads out of the features, after the sequence
    ((B, T, E), [[B], [H], [T], [U]], (1, 2)),  # view(B, H, T, D): the heads stand before the sequence
    ((B, T, E), [[B, H], [T], [U]], (0, 1)),  # view(B * H, T, D)
    ((T, B, E), [[T], [B, H], [U]], None),  # seq-first view(T, B * H, D), as nn.MultiheadAttention does
    ((T, B, E), [[B, H], [T], [U]], (0, 1)),  # ... without the transpose first
    ((B, H, T, U), [[B], [T], [E]], (1, 2)),  # merge of (B, H, T, D) without the transpose
    ((B, T, H, U), [[B], [T], [E]], None),  # merge after the transpose
    ((B, H, T, U), [[B, H], [T], [U]], None),  # (B * H, T, D) out of (B, H, T, D)
    ((B, E, S, S), [[B], [H], [U], [T]], None),  # conv features viewed as heads over H * W positions
    ((B, T, E), [[B], [U], [T], [U]], None),  # a size whose role no code shows decides nothing
    ((U, U, U), [[B], [H], [T], [U]], None),  # the viewed tensor's roles unknown: unknown
])
def test_reordered_finds_new_axes_whose_contents_come_in_the_other_order(before, after, pair):
    assert axes.reordered(before, after) == pair
