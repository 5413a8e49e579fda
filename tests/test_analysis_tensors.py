"""mhalint/analysis/tensors.py: the shape reader on small programs, one source of roles or one transfer per test,
both ways: it finds the roles where the code establishes them, and gives unknown (or only a name's strength)
where it does not. Each snippet passes the tensor under test to `sink(...)`."""

from __future__ import annotations

import textwrap

import pytest

from mhalint.analysis.axes import BATCH_FIRST, SEQ_FIRST, Role, Strength, layout
from mhalint.analysis.tensors import ShapeReader
from mhalint.context import ModuleContext
from mhalint.parse.lazy import cst

B, S, E, H, P, U = Role.BATCH, Role.SEQUENCE, Role.EMBEDDING, Role.HEADS, Role.SPATIAL, Role.UNKNOWN


def traced(source: str):
    """What the reader finds for the argument of the last `sink(...)` call, with torch imported."""
    source = IMPORTS + textwrap.dedent(source)
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    call, scope = [(c, s) for c, s in ctx.calls() if isinstance(c.func, cst.Name) and c.func.value == "sink"][-1]
    return ShapeReader(ctx).of(call.args[0].value, scope, call)


def roles(source: str):
    found = traced(source)
    return None if found is None else tuple(axis.role if axis.known else U for axis in found.shape)


def kind(source: str) -> tuple[str, Strength] | None:
    found = traced(source)
    seen = layout(found.shape) if found is not None else None
    return None if seen is None else (seen.kind, seen.strength)


IMPORTS = "import torch\nimport torch.nn as nn\nfrom torch.nn.utils.rnn import pad_sequence\n"


# ---- producers with a known layout -----------------------------------------------------------------------------
def test_a_convolution_gives_batch_channels_and_spatial_axes():
    assert roles("""
        conv = nn.Conv2d(3, 64, 16, 16)
        def f(images):
            sink(conv(images))
    """) == (B, E, P, P)
    assert roles("conv = nn.Conv1d(3, 64, 3)\ndef f(x):\n    sink(conv(x))\n") == (B, E, S)


def test_flattened_convolution_features_are_batch_first_until_permuted():
    body = """
        conv = nn.Conv2d(3, 64, 16, 16)
        def f(images):
            sink(conv(images).flatten(2).{op})
    """
    assert kind(body.format(op="transpose(1, 2)")) == (BATCH_FIRST, Strength.ESTABLISHED)
    assert kind(body.format(op="permute(2, 0, 1)")) == (SEQ_FIRST, Strength.ESTABLISHED)


@pytest.mark.parametrize(("op", "expected"), [
    ("torch.transpose(x, 0, 1)", (S, B, E)),
    ("torch.permute(x, (1, 0, 2))", (S, B, E)),
    ("torch.swapaxes(x, 1, 2)", (B, E, S)),
    ("torch.flatten(x, 1)", (B, U)),
    ("torch.unsqueeze(x, 0)", (U, B, S, E)),
    ("torch.transpose(x, 0, d)", None),  # a dim that is not known: unknown, never a guess
])
def test_torch_function_forms_move_axes_as_the_methods_do(op, expected):
    assert roles(f"def f(x, d):\n    B, T, C = x.shape\n    sink({op})\n") == expected


@pytest.mark.parametrize(("made", "expected"), [
    ("x.new_zeros(*x.shape)", (S, B, E)),
    ("torch.zeros(x.shape)", (S, B, E)),
    ("x.new_full(x.size(), 0.5)", (S, B, E)),
    ("x.new_zeros(T, B, C)", (S, B, E)),
    ("torch.zeros(*p.shape)", None),  # the shape of a tensor whose axes are not known
])
def test_a_tensor_made_with_the_shape_of_another_has_its_axes(made, expected):
    assert roles(f"def f(y, p):\n    B, T, C = y.shape\n    x = y.transpose(0, 1)\n    sink({made})\n") == expected


@pytest.mark.parametrize(("index", "expected"), [
    ("x[:, 0]", (B, E)),  # the first token of each sample
    ("x[:, -1, :]", (B, E)),
    ("x[0, :]", (S, E)),
    ("x[:, 1:, 0]", (B, S)),
    ("x[:, i]", None),  # an index that is not a literal: which axes remain is not known
    ("x[:, 0, 0, 0]", None),  # more indices than axes
])
def test_an_index_at_several_axes_drops_the_picked_ones(index, expected):
    assert roles(f"def f(x, i):\n    B, T, C = x.shape\n    sink({index})\n") == expected


def test_an_augmented_assignment_keeps_the_axes_of_the_value_it_updates():
    # `x *= s`, `x += pos` broadcast into x; in a loop, each round keeps them; a value that is not known stays so
    source = """
        def f(y, p):
            B, T, C = y.shape
            x = {value}
            x *= 2
            for i in range(3):
                x += p
            sink(torch.transpose(x, 0, 1))
    """
    assert roles(source.format(value="y.float()")) == (S, B, E)
    assert traced(source.format(value="p.float()")) is None


@pytest.mark.parametrize(("call", "expected"), [
    ("pad_sequence(seqs)", (S, B, U)),
    ("pad_sequence(seqs, batch_first=True)", (B, S, U)),
    ("pad_sequence(seqs, True)", (B, S, U)),
])
def test_pad_sequence_is_sequence_first_unless_told(call, expected):
    assert roles(f"def f(seqs):\n    sink({call})\n")[:2] == expected[:2]


def test_pad_sequence_with_an_unknown_flag_is_unknown():
    assert traced("def f(seqs, flag):\n    sink(pad_sequence(seqs, batch_first=flag))\n") is None


def test_embedding_adds_an_axis_to_the_ids_it_gets():
    source = """
        emb = nn.Embedding(100, 64)
        def f(seqs):
            sink(emb(pad_sequence(seqs)))
    """
    assert kind(source) == (SEQ_FIRST, Strength.ESTABLISHED)


def test_embedding_of_unknown_ids_is_unknown():
    assert traced("emb = nn.Embedding(100, 64)\ndef f(ids):\n    sink(emb(ids))\n") is None


def test_an_embedding_table_repeated_over_a_measured_batch_is_sequence_first():
    source = """
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.queries = nn.Embedding(100, 256)
            def forward(self, memory):
                bs = memory.shape[1]
                sink(self.queries.weight.unsqueeze(1).repeat(1, bs, 1))
    """
    assert roles(source) == (U, B, E)
    assert kind(source) == (SEQ_FIRST, Strength.ESTABLISHED)


def test_a_factory_takes_the_roles_of_its_sizes():
    source = """
        def f(x):
            B, T, C = x.shape
            sink(torch.zeros(T, B, C, device=x.device))
    """
    assert roles(source) == (S, B, E)
    assert traced("def f(n, m):\n    sink(torch.zeros(n, m, 4))\n") is None


@pytest.mark.parametrize(("made", "expected"), [
    ("torch.Tensor(T, B, C)", (S, B, E)),  # the legacy constructor given sizes
    ("torch.FloatTensor(T, B, C)", (S, B, E)),
    ("torch.Tensor([T, B, C])", None),  # given data: a tensor of three numbers, not of that shape
])
def test_a_legacy_constructor_is_a_factory_only_when_given_sizes(made, expected):
    assert roles(f"def f(x):\n    B, T, C = x.shape\n    sink({made})\n") == expected


# ---- documented shapes -----------------------------------------------------------------------------------------
def test_a_comment_below_an_assignment_that_names_the_variable():
    source = """
        def f(x):
            x = x.transpose(1, -1)
            # x is batch, seq_len, channels
            sink(x)
    """
    assert kind(source) == (BATCH_FIRST, Strength.ESTABLISHED)


def test_a_comment_below_about_another_variable_is_not_read():
    assert traced("""
        def f(x, y):
            x = x.transpose(1, -1)
            # y is batch, seq_len, channels
            sink(x)
    """) is None


def test_a_shape_comment_that_the_code_contradicts_gives_unknown():
    assert traced("""
        def f(x):
            B, T, C = x.shape
            y = x.transpose(0, 1)  # (B, T, C)
            sink(y)
    """) is None


def test_a_comment_on_the_def_line_documents_a_parameter():
    assert kind("def f(x):  # x: (B, L, E)\n    sink(x)\n") == (BATCH_FIRST, Strength.ESTABLISHED)
    assert traced("def f(x, y):  # y: (B, L, E)\n    sink(x)\n") is None


def test_a_def_line_comment_documents_each_parameter_of_its_clauses():
    source = "def f(x, pad):  # x: (B, L, E); pad: (B, L), True at padding\n    sink(pad)\n"
    assert roles(source) == (B, S)
    assert roles("def f(x, lengths):  # lengths: (B, 1)\n    sink(lengths)\n") == (B, U)


def test_two_names_document_a_shape_only_in_the_parameter_s_own_entry():
    """`(N, S)` in a parameter's entry is its shape; in free prose two words in brackets are not."""
    documented = '''
        def f(pad):
            """Args:
                pad: (N, S), True at padding.
            """
            sink(pad)
    '''
    assert roles(documented) == (B, S)
    assert traced("def f(pad):\n    y = pad  # (N, S)\n    sink(y)\n") is None
    assert traced("def f(pad):  # pad: (1, 2)\n    sink(pad)\n") is None  # numbers alone name no axis


def test_a_numpy_docstring_documents_a_parameter():
    source = '''
        def f(x):
            """Attend.

            Parameters
            ----------
            x : torch.Tensor
                Tensor shape [B, L, N]
            """
            sink(x)
    '''
    assert kind(source) == (BATCH_FIRST, Strength.ESTABLISHED)


def test_a_class_inputs_section_documents_the_one_input_of_forward():
    source = '''
        class Rows(nn.Module):
            """Embeds rows.

            Inputs:
                - **input** (batch, seq_len, ncols): rows
            """
            def forward(self, input_ids):
                sink(input_ids)
    '''
    assert roles(source) == (B, S, U)


def test_a_class_inputs_section_is_not_read_for_a_forward_of_two_inputs():
    assert traced('''
        class Pair(nn.Module):
            """Inputs:
                - **input** (batch, seq_len, ncols): rows
            """
            def forward(self, a, b):
                sink(a)
    ''') is None


def test_an_einops_group_holding_the_batch_is_the_batch():
    source = """
        from einops import rearrange
        def f(x):
            sink(rearrange(x, 'b c h w1 w2 -> (b w1) (h w2) c'))
    """
    assert roles(source) == (B, S, E)


def test_einsum_gives_each_output_letter_the_role_its_operands_give_it():
    source = """
        def f(q, k):
            B, L, E = q.shape
            B, S, E = k.shape
            sink(torch.einsum({spec!r}, q, k))
    """
    assert roles(source.format(spec="ble,bse->bls")) == (B, S, S)
    assert roles(source.format(spec="ble,bse->lbs")) == (S, B, S)
    assert traced(source.format(spec="...e,...e->...")) is None  # an ellipsis: nothing known
    assert traced("def f(q, k):\n    sink(torch.einsum('ble,bse->bls', q, k))\n") is None  # operands unknown


def test_repeat_interleave_along_an_axis_keeps_its_role_and_without_dim_flattens():
    source = """
        def f(x, h):
            B, T, C = x.shape
            sink(x.repeat_interleave({args}))
    """
    assert roles(source.format(args="h, dim=0")) == (B, S, E)
    assert roles(source.format(args="h, 1")) == (B, S, E)
    assert traced(source.format(args="h")) is None  # flattened


# ---- batches from a DataLoader -----------------------------------------------------------------------------------
LOADER = """
    from torch.utils.data import DataLoader
    from tqdm import tqdm
    def f(dataset):
        loader = DataLoader(dataset, batch_size=8{options})
        for {target} in {iterable}:
            sink({read})
"""


@pytest.mark.parametrize(("target", "iterable", "read"), [
    ("batch", "loader", "batch"),
    ("x, y", "loader", "x"),
    ("i, batch", "enumerate(loader)", "batch"),
    ("batch", "tqdm(loader)", "batch['input_ids']"),
    ("batch", "loader", "batch[0]"),
])
def test_what_a_default_collate_yields_has_the_batch_first(target, iterable, read):
    found = traced(LOADER.format(options="", target=target, iterable=iterable, read=read))
    assert found.shape[0].role is B and found.shape[0].evidence.strength is Strength.ESTABLISHED
    assert "default collate" in found.shape[0].evidence.reason


@pytest.mark.parametrize(("options", "target", "iterable"), [
    (", collate_fn=pad_batch", "batch", "loader"),  # a collate of its own: anything
    ("", "i, batch", "enumerate(loader)"),  # reading i, below
])
def test_a_custom_collate_or_the_loop_counter_is_not_a_batch(options, target, iterable):
    read = "i" if target.startswith("i,") else "batch"
    assert traced(LOADER.format(options=options, target=target, iterable=iterable, read=read)) is None


def test_stacking_adds_an_axis_whose_role_is_unknown():
    """Stacked things may be samples, or q, k and v: the new axis says nothing; the others keep their roles."""
    source = """
        def f(x):
            B, T, C = x.shape
            sink(torch.stack([x, x], dim={dim}))
    """
    assert roles(source.format(dim=0)) == (U, B, S, E)
    assert roles(source.format(dim=1)) == (B, U, S, E)
    assert traced("def f(x, y):\n    B, T, C = x.shape\n    sink(torch.stack([x, y]))\n") is None  # y: unknown


# ---- checked consumers -----------------------------------------------------------------------------------------
def test_a_tensor_also_given_as_key_padding_mask_is_batch_by_keys():
    """torch checks a key padding mask's two sizes against the batch and the keys."""
    found = traced("""
        attn = nn.MultiheadAttention(16, 4)
        def f(x, pad):
            y = attn(x, x, x, key_padding_mask=pad[:, 1:].bool())[0]
            sink(pad)
    """)
    assert tuple(axis.role for axis in found.shape) == (B, S)
    assert found.shape[0].evidence.strength is Strength.ESTABLISHED
    assert "key_padding_mask is (N, S)" in found.shape[0].evidence.reason
    encoder = """
        layer = nn.TransformerEncoderLayer(16, 4)
        def f(x, m):
            layer(x, src_key_padding_mask=m)
            sink(m)
    """
    assert roles(encoder) == (B, S)


def test_a_tensor_given_elsewhere_or_after_a_rebinding_is_not_read_as_a_key_padding_mask():
    # an attn_mask has no batch axis; a row picked (and rebound to the name) is (N, S): the tensor it was picked
    # from has them one axis further on
    assert traced("""
        attn = nn.MultiheadAttention(16, 4)
        def f(x, m):
            attn(x, x, x, attn_mask=m)
            sink(m)
    """) is None
    assert roles("""
        attn = nn.MultiheadAttention(16, 4)
        def f(x, m):
            sink(m)
            m = m[0]
            attn(x, x, x, key_padding_mask=m)
    """) == (U, B, S)
    assert roles("""
        attn = nn.MultiheadAttention(16, 4)
        def f(x, m):
            attn(x, x, x, key_padding_mask=m[0])
            sink(m)
    """) == (U, B, S)


def test_a_tensor_a_key_padding_mask_is_computed_from_has_its_batch_and_sequence():
    # `torch.isnan(x)` keeps x's axes; a mask picked from it at the last axis is (N, S), so x is (N, S, ...); a
    # mask given by position may be an (L, L) attention mask: nothing
    source = """
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4), 2)
        def f(x, y):
            empty = torch.isnan(x)
            sink(x)
            enc(src=torch.transpose(x, 0, 1), {passed})
    """
    assert roles(source.format(passed="src_key_padding_mask=empty[:, :, 0]")) == (B, S, U)
    assert traced(source.format(passed="mask=empty[:, :, 0]")) is None
    transposed = source.replace("sink(x)", "sink(torch.transpose(x, 0, 1))")
    assert roles(transposed.format(passed="src_key_padding_mask=empty[:, :, 0]")) == (S, B, U)


# ---- view and reshape ------------------------------------------------------------------------------------------
def test_reshape_after_permute_reads_the_roles_of_its_sizes():
    source = """
        def f(fmap):
            B, T, C, H, W = fmap.shape
            sink(fmap.permute(0, 1, 3, 4, 2).reshape(B * T, H * W, C))
    """
    assert roles(source) == (B, S, E)
    assert kind(source) == (BATCH_FIRST, Strength.ESTABLISHED)


def test_a_folded_leading_axis_holds_the_batch():
    source = """
        emb = nn.Embedding(100, 64)
        def f(ids):
            N, R, L = ids.shape
            x = emb(ids)
            shape = list(x.size())
            sink(x.view([-1] + shape[-2:]))
    """
    assert roles(source) == (B, S, E)


def test_a_size_named_like_a_batch_gives_only_a_named_role():
    source = "def f(x, bsz, n):\n    sink(x.view(bsz, n, -1))\n"
    assert kind(source) == (BATCH_FIRST, Strength.NAMED)


def test_expand_over_a_measured_size_takes_its_role():
    source = """
        def f(hist, item):
            B, T, D = hist.shape
            n = hist.size(1)
            sink(torch.cat([hist, item.unsqueeze(1).expand(-1, n, -1)], dim=-1))
    """
    assert roles(source)[:2] == (B, S)


# ---- calls -----------------------------------------------------------------------------------------------------
def test_a_project_helper_is_followed_into_its_returns():
    source = """
        def with_pos(t, pos):
            return t if pos is None else t + pos
        def f(x, pos):
            B, T, C = x.shape
            sink(with_pos(x, pos))
    """
    assert kind(source) == (BATCH_FIRST, Strength.ESTABLISHED)


def test_a_project_helper_that_moves_the_axes_is_followed():
    source = """
        def to_sequence_first(t):
            return t.transpose(0, 1)
        def f(x):
            B, T, C = x.shape
            sink(to_sequence_first(x))
    """
    assert kind(source) == (SEQ_FIRST, Strength.ESTABLISHED)


MAYBE = """
    def maybe(t, flip):
        if flip:
            return t.transpose(0, 1)
        return t
    def f(x, flip):
        B, T, C = x.shape
        sink(maybe(x, {flip}))
"""


def test_returns_that_disagree_give_unknown():
    assert traced(MAYBE.format(flip="flip")) is None  # f's flip: no caller fixes it


@pytest.mark.parametrize(("flip", "expected"), [("True", SEQ_FIRST), ("False", BATCH_FIRST)])
def test_only_the_returns_the_call_can_reach_are_read(flip, expected):
    assert kind(MAYBE.format(flip=flip)) == (expected, Strength.ESTABLISHED)


def test_a_static_method_binds_its_first_argument():
    source = """
        class Layer(nn.Module):
            @staticmethod
            def with_pos(tensor, pos):
                return tensor + pos
            def forward(self, src, pos):
                B, T, C = src.shape
                sink(self.with_pos(src, pos))
    """
    assert kind(source) == (BATCH_FIRST, Strength.ESTABLISHED)


def test_an_unknown_callee_keeps_the_roles_only_at_a_names_strength():
    source = """
        from elsewhere import block
        def f(x):
            B, T, C = x.shape
            sink(block(x))
    """
    found = traced(source)
    assert kind(source) == (BATCH_FIRST, Strength.NAMED)
    assert "`block` at line" in found.shape[0].evidence.reason and "assumed to keep its axes" in \
        found.shape[0].evidence.reason


def test_norms_linear_layers_and_attention_keep_the_axes_at_full_strength():
    source = """
        norm = nn.LayerNorm(64)
        proj = nn.Linear(64, 64)
        attn = nn.MultiheadAttention(64, 8)
        def f(x):
            T, B, C = x.shape
            sink(proj(norm(attn(x, x, x)[0])))
    """
    assert kind(source) == (SEQ_FIRST, Strength.ESTABLISHED)


# ---- control flow (mhalint/analysis/dataflow.py) ---------------------------------------------------------------
def test_branches_that_agree_keep_the_roles():
    assert kind("""
        def f(x, c):
            B, T, C = x.shape
            if c:
                y = x.transpose(0, 1)
            else:
                y = x.permute(1, 0, 2)
            sink(y)
    """) == (SEQ_FIRST, Strength.ESTABLISHED)


def test_branches_that_disagree_give_unknown():
    assert traced("""
        def f(x, c):
            B, T, C = x.shape
            y = x
            if c:
                y = x.transpose(0, 1)
            sink(y)
    """) is None


def test_a_loop_that_keeps_the_axes_keeps_the_roles():
    source = """
        norm = nn.LayerNorm(64)
        def f(x, layers):
            B, T, C = x.shape
            for _ in layers:
                x = norm(x)
            sink(x)
    """
    assert kind(source) == (BATCH_FIRST, Strength.ESTABLISHED)


def test_only_the_assignment_that_reaches_counts():
    assert kind("""
        def f(x, c):
            B, T, C = x.shape
            y = x.transpose(0, 1)
            if c:
                return y
            y = x
            sink(y)
    """) == (BATCH_FIRST, Strength.ESTABLISHED)


def test_unbind_and_an_index_of_a_reshaped_tensor_drop_its_first_axis():
    fused = """
        def f(x, qkv_proj, num_heads):
            B, N, C = x.shape
            qkv = qkv_proj(x).reshape(B, N, 3, num_heads, C // num_heads).permute(2, 0, 3, 1, 4)
            {read}
        """
    assert roles(fused.format(read="q, k, v = qkv.unbind(0)\n            sink(k)")) == (B, H, S, U)
    assert roles(fused.format(read="sink(qkv[2])")) == (B, H, S, U)
    assert roles(fused.format(read="q, k, v = qkv.unbind(dim)\n            sink(k)")) is None  # dim unknown
    # a module's output indexed is a tuple's element, not a tensor's first slice
    assert traced("attn = nn.MultiheadAttention(16, 4)\ndef f(x):\n    B, T, C = x.shape\n"
                  "    out = attn(x, x, x)\n    sink(out[0])\n") is None


def test_unpacking_a_tuple_of_tensors_reads_each_element():
    source = """
        def f(x, qkv_proj, num_heads):
            B, N, C = x.shape
            qkv = qkv_proj(x).reshape(B, N, 3, num_heads, C // num_heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            sink(v)
        """
    assert roles(source) == (B, H, S, U)
    assert traced("def f(x, y):\n    B, T, C = x.shape\n    a, b = y, x\n    sink(a)\n") is None


def test_a_comment_after_code_that_names_a_parameter_documents_it():
    # `if x.dim() == 3:  # x [bz, n, c]` before x is rebound: the shape the caller passes; about another name: no
    source = """
        def f(x, y):
            if x.dim() == 3:  # {name} [bz, n, c]
                pass
            sink(x.transpose(0, 1))
    """
    assert roles(source.format(name="x")) == (S, B, E)
    assert traced(source.format(name="y")) is None
    rebound = """
        def f(x):
            x = x.flatten(2)  # x [bz, n, c]
            sink(x.transpose(0, 1))
    """
    assert roles(rebound) == (S, B, E)  # the rebinding's own comment: its value's shape, not the parameter's


# ---- products and unpackings on the way ------------------------------------------------------------------------
def test_a_product_takes_the_left_rows_and_the_right_columns():
    body = """
        def f(x, n_head):
            B, T, C = x.shape
            q = x.view(B, T, n_head, C // n_head).transpose(1, 2)
            scores = q @ q.transpose(-2, -1)
            sink({out})
    """
    assert roles(body.format(out="scores")) == (B, H, S, S)
    assert roles(body.format(out="scores.softmax(dim=-1) @ q")) == (B, H, S, U)
    assert roles(body.format(out="q @ torch.randn(8, 8)")) == (B, H, S, U)  # the columns: what the right one has


def test_an_unpacking_on_a_path_that_returns_does_not_name_the_axes_after_it():
    body = """
        def f(cache, heads):
            if cache.shape[1] in heads:
                bsz, n_heads, seq_len, head_dim = cache.shape
                return cache
            bsz, seq_len, n_heads, head_dim = cache.shape
            sink(cache)
    """
    assert roles(body) == (B, S, H, U)  # the second unpacking: the first one's path has returned


# ---- answers kept inside followed calls ----------------------------------------------------------------------------
def test_a_helper_followed_from_two_calls_gives_each_call_what_it_passes():
    """The reader keeps what it found inside a followed function with the arguments it read: the same helper
    called again with another tensor is read again, not answered from the first call."""
    source = IMPORTS + textwrap.dedent("""
        conv = nn.Conv1d(3, 64, 3)
        def same(x):
            return x
        def f(signal):
            feats = conv(signal)
            sink(same(feats))
            sink(same(feats.permute(2, 0, 1)))
            sink(same(feats))
    """)
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    reader = ShapeReader(ctx)
    found = [reader.of(call.args[0].value, scope, call) for call, scope in ctx.calls()
             if isinstance(call.func, cst.Name) and call.func.value == "sink"]
    assert [tuple(axis.role if axis.known else U for axis in each.shape) for each in found] == [
        (B, E, S), (S, B, E), (B, E, S)]
    assert ctx.memo["inner shapes"], "the helper's answers were not kept"
