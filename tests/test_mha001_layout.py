"""MHA001 layout inference: the layout of the tensors that reach a module's forward picks the severity.

Batch-first data into a sequence-first module is an error, sequence-first data into it is info (correct, but make it
explicit), no evidence is a warning; sequence-first data into a `batch_first=True` module is an error too. Each snippet
is a small, realistic module; the assertions check the severity and that the evidence names the code it rests on.
"""

from __future__ import annotations

import re
import textwrap

import pytest
from wrapped import MODEL_AROUND

from mhalint.finding import HEADLINE_LIMIT, Finding, Severity
from mhalint.fixes import apply_fixes
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

CODE = "MHA001"


@pytest.fixture
def check(lint):
    """MHA001 findings of every severity (info included) for a snippet."""
    def run(source: str) -> list[Finding]:
        found = lint(source, CODE, min_severity="info")
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


@pytest.fixture
def one(check):
    """The single MHA001 finding of a snippet."""
    def run(source: str) -> Finding:
        found = check(source)
        assert len(found) == 1, [(f.line, str(f.severity), f.message) for f in found]
        return found[0]
    return run


def evidence_of(finding: Finding) -> str:
    return " | ".join(finding.evidence)


def assert_evidence(finding: Finding, data: str, *snippets: str) -> None:
    """The evidence lines name `data` (where the roles come from) and the other snippets (what moved the axes,
    where batch_first comes from); the headline quotes, with its line, one step of that chain: the last operation
    that moved the axes, else the code that gave them their roles."""
    assert len(finding.message) <= HEADLINE_LIMIT, finding.message
    quoted = re.search(r"\(`([^`]+)`, line ([0-9]+)\)", finding.message)
    assert quoted, finding.message
    assert f"`{quoted[1]}` at line {quoted[2]}" in evidence_of(finding), (quoted[0], finding.evidence)
    for snippet in (data, *snippets):
        assert snippet in evidence_of(finding), (snippet, finding.evidence)
    assert "docs/torch-facts.md#batch-first" in finding.explanation


def headline_quotes(finding: Finding) -> str:
    return re.search(r"\(`([^`]+)`, line [0-9]+\)", finding.message)[1]


def assert_batch_first_error(finding: Finding, data: str, *snippets: str) -> None:
    """Batch-first data into a sequence-first module."""
    assert finding.severity == Severity.ERROR, finding.message
    assert " gets batch-first data (" in finding.message and re.search(r"but batch_first\S* is False$|but "
                                                                        r"batch_first=False$", finding.message)
    assert finding.help == "pass batch_first=True"
    assert "changing sample 1 moved sample 0's output by 0.47" in finding.explanation
    assert dict(finding.arguments).get("layout") == "batch-first"
    assert_evidence(finding, data, *snippets)


def assert_sequence_first_info(finding: Finding, data: str, *snippets: str) -> None:
    """Sequence-first data into a module that relies on the default: correct, but implicit."""
    assert finding.severity == Severity.INFO, finding.message
    assert ", implicitly right for sequence-first data (" in finding.message
    assert finding.help == "write batch_first=False to make the layout explicit"
    assert dict(finding.arguments).get("layout") == "sequence-first"
    assert_evidence(finding, data, *snippets)


def assert_reverse_error(finding: Finding, data: str, *snippets: str) -> None:
    """Sequence-first data into a batch_first=True module."""
    assert finding.severity == Severity.ERROR, finding.message
    assert " gets sequence-first data (" in finding.message and re.search(r"but batch_first\S* is True$|but "
                                                                          r"batch_first=True$", finding.message)
    assert "set batch_first=False" in finding.help
    arguments = dict(finding.arguments)
    assert (arguments["batch_first"], arguments["layout"]) == (True, "sequence-first")
    assert_evidence(finding, data, *snippets)


def assert_unknown_warning(finding: Finding, missing: str = "") -> None:
    """No layout: a warning whose headline says what is missing (`missing`, where given), never "nothing shows"."""
    assert finding.severity == Severity.WARNING, finding.message
    assert ": it reads (L, N, E), and " in finding.message and "nothing shows" not in finding.message
    assert missing in finding.message, (missing, finding.message)
    assert len(finding.message) <= HEADLINE_LIMIT
    assert "pass batch_first=True" in finding.help and "write batch_first=False" in finding.help
    assert "docs/torch-facts.md#batch-first" in finding.explanation
    assert "layout" not in dict(finding.arguments)


# ---- one attention module, one forward: every kind of evidence -------------------------------------------------
ATTENTION = '''\
import torch
import torch.nn as nn
{imports}

class SelfAttention(nn.Module):
    def __init__(self, dim, heads, vocab=1000):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.embed = nn.Embedding(vocab, dim)
        self.attn = nn.MultiheadAttention(dim, heads{batch_first})

    def forward(self, {param}):
{body}
        out, _ = self.attn(x, x, x, need_weights=False)
        return out
'''


def attention(body: str, param: str = "x", imports: str = "", batch_first: str = "") -> str:
    return ATTENTION.format(imports=imports, param=param, batch_first=batch_first,
                            body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8))


# (forward parameter, forward body that leaves the query in `x`, imports, evidence text the finding must quote)
BATCH_FIRST_KINDS = [
    pytest.param("x", "B, T, C = x.shape\nx = self.norm(x)", "", "B, T, C = x.shape", id="shape-unpacking"),
    pytest.param("x", "bsz, tgt_len, embed_dim = x.size()", "", "bsz, tgt_len, embed_dim = x.size()",
                 id="size-unpacking"),
    pytest.param("x", "batch_size, seq_len, _ = x.shape", "", "batch_size, seq_len, _ = x.shape",
                 id="shape-unpacking-long-names"),
    pytest.param("feats", "B, C, H, W = feats.shape\nx = feats.flatten(2).transpose(1, 2)", "", "B, C, H, W = feats.shape",
                 id="flatten-transpose"),
    pytest.param("feats", "x = rearrange(feats, 'b c h w -> b (h w) c')", "from einops import rearrange",
                 "rearrange(feats, 'b c h w -> b (h w) c')", id="einops-rearrange"),
    pytest.param("feats", "x = einops.rearrange(feats, 'b c n -> b n c')", "import einops",
                 "einops.rearrange(feats, 'b c n -> b n c')", id="einops-module-rearrange"),
    pytest.param("tokens", "B, L = tokens.shape\nx = self.embed(tokens)\nx = self.norm(x)", "", "B, L = tokens.shape",
                 id="embedding-output"),
]

SEQUENCE_FIRST_KINDS = [
    pytest.param("x", "B, T, C = x.shape\nx = x.permute(1, 0, 2)", "", "B, T, C = x.shape", id="permute-1-0-2"),
    pytest.param("x", "B, T, C = x.shape\nx = self.norm(x).transpose(0, 1)", "", "B, T, C = x.shape",
                 id="transpose-0-1"),
    pytest.param("feats", "B, C, H, W = feats.shape\nx = feats.flatten(2).permute(2, 0, 1)", "", "B, C, H, W = feats.shape",
                 id="flatten-permute-2-0-1"),
    pytest.param("feats", "x = rearrange(feats, 'b n c -> n b c')", "from einops import rearrange",
                 "rearrange(feats, 'b n c -> n b c')", id="einops-rearrange"),
    pytest.param("feats", "x = einops.rearrange(feats, 'b c h w -> (h w) b c')", "import einops",
                 "einops.rearrange(feats, 'b c h w -> (h w) b c')", id="einops-module-rearrange"),
]

COMMENT_KINDS = [
    pytest.param("x", "# x: (B, L, E)\nx = self.norm(x)", "", "(B, L, E)", id="comment-above"),
    pytest.param("x", "x = self.norm(x)  # (B, L, E)", "", "(B, L, E)", id="comment-inline"),
    pytest.param("x", '"""Self-attention over x of shape (B, L, E)."""\nx = self.norm(x)', "", "(B, L, E)",
                 id="docstring-shape"),
    pytest.param("x", '"""\nArgs:\n    x: (batch, seq_len, embed_dim) token features.\n"""', "",
                 "(batch, seq_len, embed_dim)", id="docstring-args-section"),
]


@pytest.mark.parametrize(("param", "body", "imports", "evidence"), BATCH_FIRST_KINDS + COMMENT_KINDS)
def test_batch_first_evidence_into_default_module_is_an_error(one, param, body, imports, evidence):
    finding = one(attention(body, param, imports))
    assert_batch_first_error(finding, evidence)


@pytest.mark.parametrize(("param", "body", "imports", "evidence"), BATCH_FIRST_KINDS + COMMENT_KINDS)
def test_batch_first_evidence_into_batch_first_module_is_clean(check, param, body, imports, evidence):
    assert check(attention(body, param, imports, batch_first=", batch_first=True")) == []


@pytest.mark.parametrize(("param", "body", "imports", "evidence"), BATCH_FIRST_KINDS)
def test_batch_first_evidence_into_literal_false_module_is_an_error(one, param, body, imports, evidence):
    """A literal batch_first=False states the layout, but batch-first data contradicts it."""
    finding = one(attention(body, param, imports, batch_first=", batch_first=False"))
    assert_batch_first_error(finding, evidence)
    assert "batch_first=False" in finding.evidence[0]


@pytest.mark.parametrize(("param", "body", "imports", "evidence"), SEQUENCE_FIRST_KINDS)
def test_sequence_first_evidence_into_default_module_is_info(one, param, body, imports, evidence):
    assert_sequence_first_info(one(attention(body, param, imports)), evidence)


@pytest.mark.parametrize(("param", "body", "imports", "evidence"), SEQUENCE_FIRST_KINDS)
def test_sequence_first_evidence_into_batch_first_module_is_an_error(one, param, body, imports, evidence):
    assert_reverse_error(one(attention(body, param, imports, batch_first=", batch_first=True")), evidence)


@pytest.mark.parametrize(("param", "body", "imports", "evidence"), SEQUENCE_FIRST_KINDS)
def test_sequence_first_evidence_into_literal_false_module_is_clean(check, param, body, imports, evidence):
    assert check(attention(body, param, imports, batch_first=", batch_first=False")) == []


def test_sequence_first_shape_unpacking_names(one):
    """fairseq's `tgt_len, bsz, embed_dim = query.size()` names a sequence-first tensor: the default is right."""
    finding = one(attention("tgt_len, bsz, embed_dim = x.size()"))
    assert_sequence_first_info(finding, "tgt_len, bsz, embed_dim = x.size()")


NO_CALLER = "the data, `x`, is a parameter of `forward` with no caller found in this file"


@pytest.mark.parametrize(("body", "missing"), [
    pytest.param("x = self.norm(x)", NO_CALLER, id="no-evidence"),
    pytest.param("h, w, c = x.shape", "`h, w, c = x.shape` (line 13) shows the spatial and embedding axes, not the batch",
                 id="unpacking-without-batch-name"),
    pytest.param("d_model = 64\nx = torch.zeros(7, 1, d_model)", "shows the embedding axis, not the batch",
                 id="only-the-embedding-axis"),
    pytest.param("B, T, C = feats.shape", NO_CALLER, id="unpacking-of-another-tensor"),
    pytest.param("x = x.permute(0, 2, 1, 3)", NO_CALLER, id="4d-permute"),
    pytest.param("# feats: (B, HW, C)\nfeats = feats.mean(1, keepdim=True)\nx = self.norm(x)", NO_CALLER,
                 id="shape-comment-on-another-tensor"),
    pytest.param('"""feats: (B, S, E) encoder output."""\nx = self.norm(x)', NO_CALLER,
                 id="docstring-of-another-parameter"),
])
def test_unknown_layout_is_a_warning_that_says_where_the_trace_stopped(one, body, missing):
    param = "x, feats=None" if "feats" in body else "x"
    finding = one(attention(body, param))
    assert_unknown_warning(finding, missing)
    if missing == NO_CALLER:  # the evidence names the class and the parameter's line
        assert "`x` at line 12 is a parameter of `SelfAttention.forward`: no call in this file passes it" in \
            evidence_of(finding)


def test_module_built_but_never_called_is_a_warning(one):
    assert_unknown_warning(one("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\n"),
                           "`attn` is never called in this file")


# ---- the other modules, and keyword queries --------------------------------------------------------------------
def test_encoder_layer_called_with_src_keyword(one):
    source = """\
        import torch.nn as nn

        class PatchEncoder(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()
                self.layer = nn.TransformerEncoderLayer(d_model=dim, nhead=heads, dim_feedforward=4 * dim)

            def forward(self, images):
                B, C, H, W = images.shape
                tokens = images.flatten(2).transpose(1, 2)
                return self.layer(src=tokens)
    """
    finding = one(source)
    assert_batch_first_error(finding, "B, C, H, W = images.shape", "images.flatten(2).transpose(1, 2)")
    assert finding.message.startswith("nn.TransformerEncoderLayer")


def test_decoder_layer_reads_the_layout_of_tgt(one):
    source = """\
        import torch.nn as nn

        class Captioner(nn.Module):
            def __init__(self, vocab, dim, heads):
                super().__init__()
                self.tok = nn.Embedding(vocab, dim)
                self.dec = nn.TransformerDecoderLayer(dim, heads)

            def forward(self, captions, memory):
                N, T = captions.shape
                tgt = self.tok(captions)
                return self.dec(tgt, memory)
    """
    assert_batch_first_error(one(source), "N, T = captions.shape", "self.tok(captions)", "nn.Embedding output")


# ---- following the tensor through the class --------------------------------------------------------------------
SA_BLOCK = """\
    import torch.nn as nn
    import torch.nn.functional as F

    class EncoderLayer(nn.Module):
        def __init__(self, d_model, nhead, dropout=0.1):
            super().__init__()
            self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout{batch_first})
            self.norm1 = nn.LayerNorm(d_model)
            self.dropout1 = nn.Dropout(dropout)

        def _sa_block(self, x, attn_mask=None):
            x = self.self_attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]
            return self.dropout1(x)

        def forward(self, feats):
            {prepare}
            x = x + self._sa_block(self.norm1(x))
            return x
"""


def test_helper_method_batch_first_data_is_an_error(one):
    source = SA_BLOCK.format(batch_first="", prepare="B, C, H, W = feats.shape\n            x = feats.flatten(2).transpose(1, 2)")
    assert_batch_first_error(one(source), "B, C, H, W = feats.shape", "feats.flatten(2).transpose(1, 2)")


def test_helper_method_sequence_first_data_is_info(one):
    source = SA_BLOCK.format(batch_first="", prepare="B, C, H, W = feats.shape\n            x = feats.flatten(2).permute(2, 0, 1)")
    assert_sequence_first_info(one(source), "B, C, H, W = feats.shape", "feats.flatten(2).permute(2, 0, 1)")


def test_helper_method_sequence_first_data_into_batch_first_module_is_an_error(one):
    source = SA_BLOCK.format(batch_first=", batch_first=True", prepare="B, C, H, W = feats.shape\n            x = feats.flatten(2).permute(2, 0, 1)")
    assert_reverse_error(one(source), "B, C, H, W = feats.shape", "feats.flatten(2).permute(2, 0, 1)")


def test_helper_method_batch_first_data_into_batch_first_module_is_clean(check):
    source = SA_BLOCK.format(batch_first=", batch_first=True", prepare="B, N, C = feats.shape\n            x = feats")
    assert check(source) == []


def test_tensor_followed_through_two_helper_methods(one):
    source = """\
        import torch.nn as nn

        class Layer(nn.Module):
            def __init__(self, d_model, nhead):
                super().__init__()
                self.attn = nn.MultiheadAttention(d_model, nhead)

            def _sa_block(self, x):
                return self.attn(x, x, x)[0]

            def _block(self, x):
                return x + self._sa_block(x)

            def forward(self, feats):
                B, C, H, W = feats.shape
                x = feats.flatten(2).transpose(1, 2)
                return self._block(x)
    """
    assert_batch_first_error(one(source), "B, C, H, W = feats.shape", "feats.flatten(2).transpose(1, 2)")


BLOCK_IN_BACKBONE = """\
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads{batch_first})

        def forward(self, x):
            h = self.norm(x)
            x = x + self.attn(h, h, h)[0]
            return x

    class Backbone(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.proj = nn.Conv2d(3, dim, 16, 16)
            self.block = Block(dim, heads)

        def forward(self, x):
            x = self.proj(x)
            x = {tokens}
            x = self.block(x)
            return x.mean(1)
"""


def test_forward_called_from_another_class_batch_first(one):
    source = BLOCK_IN_BACKBONE.format(batch_first="", tokens="x.flatten(2).transpose(1, 2)")
    finding = one(source)
    assert_batch_first_error(finding, "x.flatten(2).transpose(1, 2)")
    assert finding.message.startswith("nn.MultiheadAttention")


def test_forward_called_from_another_class_sequence_first(one):
    source = BLOCK_IN_BACKBONE.format(batch_first="", tokens="x.flatten(2).permute(2, 0, 1)")
    assert_sequence_first_info(one(source), "x.flatten(2).permute(2, 0, 1)")


def test_forward_called_from_another_class_sequence_first_into_batch_first_module(one):
    source = BLOCK_IN_BACKBONE.format(batch_first=", batch_first=True", tokens="x.flatten(2).permute(2, 0, 1)")
    assert_reverse_error(one(source), "x.flatten(2).permute(2, 0, 1)")


def test_forward_called_from_another_class_batch_first_into_batch_first_module(check):
    source = BLOCK_IN_BACKBONE.format(batch_first=", batch_first=True", tokens="x.flatten(2).transpose(1, 2)")
    assert check(source) == []


# ---- containers: nn.TransformerEncoder and a project encoder of clones ------------------------------------------
TORCH_ENCODER = """\
    import torch.nn as nn

    class TextEncoder(nn.Module):
        def __init__(self, vocab, d_model, nhead, num_layers):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            layer = nn.TransformerEncoderLayer(d_model, nhead, 4 * d_model{batch_first})
            self.encoder = nn.TransformerEncoder(layer, num_layers)

        def forward(self, tokens, padding_mask):
            x = self.embed(tokens)
            {prepare}
            return self.encoder(x, src_key_padding_mask=padding_mask)
"""


def test_torch_encoder_of_a_layer_fed_permuted_data_is_info(one):
    finding = one(TORCH_ENCODER.format(batch_first="", prepare="B, T, C = x.shape\n            x = x.permute(1, 0, 2)"))
    assert_sequence_first_info(finding, "B, T, C = x.shape", "x.permute(1, 0, 2)")
    assert finding.message.startswith("nn.TransformerEncoderLayer")


def test_torch_encoder_of_a_batch_first_layer_fed_permuted_data_is_an_error(one):
    finding = one(TORCH_ENCODER.format(batch_first=", batch_first=True", prepare="B, T, C = x.shape\n            x = x.permute(1, 0, 2)"))
    assert_reverse_error(finding, "B, T, C = x.shape", "x.permute(1, 0, 2)")


def embeddings_of_unpacked_ids(batch_first: str) -> str:
    return TORCH_ENCODER.format(batch_first=batch_first, prepare="x = x * 8.0").replace(
        "x = self.embed(tokens)", "B, T = tokens.shape\n            x = self.embed(tokens)")


def test_torch_encoder_of_a_layer_fed_embeddings_is_an_error(one):
    finding = one(embeddings_of_unpacked_ids(""))
    assert_batch_first_error(finding, "B, T = tokens.shape", "self.embed(tokens)", "nn.Embedding output")


def test_torch_encoder_of_a_batch_first_layer_fed_embeddings_is_clean(check):
    assert check(embeddings_of_unpacked_ids(", batch_first=True")) == []


def test_embeddings_of_ids_of_unknown_layout_are_unknown(one):
    """nn.Embedding adds an axis to its ids; what the ids' axes hold is not known here, so neither is the layout."""
    assert_unknown_warning(one(TORCH_ENCODER.format(batch_first="", prepare="x = x * 8.0")))


def test_transposed_embeddings_of_ids_of_unknown_layout_are_unknown(one):
    """A swap of an unknown layout stays unknown: the ids may be (N, L), or (L, N) as in torch's old word
    language model tutorial."""
    source = """\
        import math
        import torch.nn as nn

        class LanguageModel(nn.Module):
            def __init__(self, ntoken, d_model, nhead, nlayers):
                super().__init__()
                self.embedding = nn.Embedding(ntoken, d_model)
                self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model, nhead), nlayers)
                self.d_model = d_model

            def forward(self, ids):
                x = self.embedding(ids) * math.sqrt(self.d_model)
                x = x.transpose(0, 1)
                return self.encoder(x)
    """
    assert_unknown_warning(one(source))


@pytest.mark.parametrize("container", [
    pytest.param("nn.TransformerEncoder(encoder_layer=layer, num_layers=6)", id="encoder-keyword"),
    pytest.param("nn.Sequential(*[copy.deepcopy(layer) for _ in range(6)])", id="sequential-of-copies"),
    pytest.param("nn.Sequential(layer)", id="sequential-of-one"),
])
def test_layer_inside_other_containers_fed_batch_first_data(one, container):
    source = f"""\
        import copy
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self, d_model, nhead):
                super().__init__()
                layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead)
                self.encoder = {container}

            def forward(self, feats):
                B, C, H, W = feats.shape
                return self.encoder(feats.flatten(2).transpose(1, 2))
    """
    finding = one(source)
    assert_batch_first_error(finding, "B, C, H, W = feats.shape", "feats.flatten(2).transpose(1, 2)")
    assert finding.message.startswith("nn.TransformerEncoderLayer")


PROJECT_ENCODER = """\
    import copy
    import torch.nn as nn

    def _get_clones(module, n):
        return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])

    class Encoder(nn.Module):
        def __init__(self, layer, num_layers):
            super().__init__()
            self.layers = _get_clones(layer, num_layers)

        def forward(self, src):
            x = src
            for layer in self.layers:
                x = layer(x)
            return x

    class Detector(nn.Module):
        def __init__(self, d_model=256, nhead=8, num_layers=6):
            super().__init__()
            self.input_proj = nn.Conv2d(2048, d_model, kernel_size=1)
            layer = nn.TransformerEncoderLayer(d_model, nhead{batch_first})
            self.encoder = Encoder(layer, num_layers)

        def forward(self, features):
            src = self.input_proj(features)
            src = {tokens}
            return self.encoder(src)
"""


def test_project_encoder_of_clones_fed_sequence_first_data_is_info(one):
    finding = one(PROJECT_ENCODER.format(batch_first="", tokens="src.flatten(2).permute(2, 0, 1)"))
    assert_sequence_first_info(finding, "src.flatten(2).permute(2, 0, 1)")


def test_project_encoder_of_clones_fed_batch_first_data_is_an_error(one):
    finding = one(PROJECT_ENCODER.format(batch_first="", tokens="src.flatten(2).transpose(1, 2)"))
    assert_batch_first_error(finding, "src.flatten(2).transpose(1, 2)")


def test_project_encoder_of_batch_first_clones_fed_sequence_first_data_is_an_error(one):
    source = PROJECT_ENCODER.format(batch_first=", batch_first=True", tokens="src.flatten(2).permute(2, 0, 1)")
    assert_reverse_error(one(source), "src.flatten(2).permute(2, 0, 1)")


def test_project_encoder_of_batch_first_clones_fed_batch_first_data_is_clean(check):
    source = PROJECT_ENCODER.format(batch_first=", batch_first=True", tokens="src.flatten(2).transpose(1, 2)")
    assert check(source) == []


# ---- DETR's queries, folded embeddings, reassignment -----------------------------------------------------------
DETR_QUERIES = """\
    import torch
    import torch.nn as nn

    class QueryDecoder(nn.Module):
        def __init__(self, d_model, nhead, num_queries):
            super().__init__()
            self.query_embed = nn.Embedding(num_queries, d_model)
            self.cross_attn = nn.MultiheadAttention(d_model, nhead{batch_first})

        def forward(self, memory, pos):
            bs = memory.shape[1]
            query_embed = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)
            tgt = torch.zeros_like(query_embed)
            out, _ = self.cross_attn(tgt + query_embed, memory + pos, memory)
            return out
"""


def test_detr_query_embedding_repeated_over_the_batch_is_sequence_first(one):
    """`weight.unsqueeze(1).repeat(1, bs, 1)` is (num_queries, bs, d): not an nn.Embedding output."""
    finding = one(DETR_QUERIES.format(batch_first=""))
    assert_sequence_first_info(finding, "self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)")


def test_detr_query_embedding_into_batch_first_module_is_an_error(one):
    finding = one(DETR_QUERIES.format(batch_first=", batch_first=True"))
    assert_reverse_error(finding, "self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)")


FOLDED_EMBEDDING = """\
    import torch.nn as nn

    class SentenceEncoder(nn.Module):
        def __init__(self, vocab, dim, heads):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.attn = nn.MultiheadAttention(dim, heads{batch_first})

        def forward(self, tokens):
            B, N, L = tokens.shape
            x = self.embed(tokens)
            x = x.view(-1, tokens.size(-1), x.size(-1))
            out, _ = self.attn(x, x, x)
            return out.view(*tokens.shape, -1)
"""


def test_view_folding_leading_axes_of_an_embedding_stays_batch_first(one):
    finding = one(FOLDED_EMBEDDING.format(batch_first=""))
    assert_batch_first_error(finding, "B, N, L = tokens.shape", "nn.Embedding output",
                             "x.view(-1, tokens.size(-1), x.size(-1))")
    assert headline_quotes(finding) == "x.view(-1, tokens.size(-1), x.size(-1))"


def test_view_folding_leading_axes_into_batch_first_module_is_clean(check):
    assert check(FOLDED_EMBEDDING.format(batch_first=", batch_first=True")) == []


DETR_TRANSFORMER = """\
    import torch.nn as nn

    class Transformer(nn.Module):
        def __init__(self, d_model=256, nhead=8):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(d_model, nhead{batch_first})

        def forward(self, src, pos_embed):
            {unpack}
            src = src.flatten(2).permute(2, 0, 1)
            pos_embed = pos_embed.flatten(2).permute(2, 0, 1)
            memory = self.layer(src + pos_embed)
            return memory.permute(1, 2, 0).view({view})
"""


@pytest.mark.parametrize(("unpack", "view"), [
    pytest.param("bs, c, h, w = src.shape", "bs, c, h, w", id="four-names"),
    pytest.param("bs, c, hw = src.shape", "bs, c, hw", id="three-names"),
])
def test_reassignment_after_shape_unpacking_is_sequence_first(one, unpack, view):
    """`bs, c, ... = src.shape` describes `src` before it is rebound to the permuted tensor: the permute moves the
    batch axis it names to position 1."""
    source = DETR_TRANSFORMER.format(batch_first="", unpack=unpack, view=view)
    finding = one(source)
    assert_sequence_first_info(finding, unpack, "src.flatten(2).permute(2, 0, 1)")
    assert headline_quotes(finding) == "src.flatten(2).permute(2, 0, 1)"


def test_reassignment_after_shape_unpacking_into_batch_first_module_is_an_error(one):
    source = DETR_TRANSFORMER.format(batch_first=", batch_first=True", unpack="bs, c, hw = src.shape",
                                     view="bs, c, hw")
    assert_reverse_error(one(source), "bs, c, hw = src.shape", "src.flatten(2).permute(2, 0, 1)")


def test_reassignment_of_unpacked_tensor_to_sequence_first(one):
    source = attention("B, T, C = x.shape\nx = x.transpose(0, 1)")
    finding = one(source)
    assert_sequence_first_info(finding, "B, T, C = x.shape", "x.transpose(0, 1)")
    assert headline_quotes(finding) == "x.transpose(0, 1)"


def test_unpacking_after_the_reassignment_describes_the_new_tensor(one):
    source = attention("x = x.transpose(0, 1)\nT, B, C = x.shape")
    assert_sequence_first_info(one(source), "T, B, C = x.shape")


# ---- batch_first given by a parameter --------------------------------------------------------------------------
PARAMETER_BLOCK = """\
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, dim, heads{param}):
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=batch_first)

        def forward(self, x):
            {prepare}
            return self.attn(x, x, x)[0]
"""
BATCH_DATA = "B, N, C = x.shape"
SEQUENCE_DATA = "B, T, C = x.shape\n            x = x.permute(1, 0, 2)"


def parameter_block(param: str, prepare: str, instantiation: str = "") -> str:
    return textwrap.dedent(PARAMETER_BLOCK.format(param=param, prepare=prepare)) + textwrap.dedent(instantiation)


def test_parameter_default_false_with_batch_first_data_is_an_error(one):
    finding = one(parameter_block(", batch_first=False", BATCH_DATA))
    assert_batch_first_error(finding, "B, N, C = x.shape", "batch_first=batch_first")
    assert finding.message.endswith("but batch_first=batch_first is False")
    assert "batch_first=batch_first at line 6 resolves to False" in evidence_of(finding)
    assert "`batch_first` defaults to False" in evidence_of(finding)


def test_parameter_default_true_with_batch_first_data_is_clean(check):
    assert check(parameter_block(", batch_first=True", BATCH_DATA)) == []


def test_parameter_default_true_with_sequence_first_data_is_an_error(one):
    finding = one(parameter_block(", batch_first=True", SEQUENCE_DATA))
    assert_reverse_error(finding, "B, T, C = x.shape", "x.permute(1, 0, 2)", "batch_first=batch_first")
    assert "`batch_first` defaults to True" in evidence_of(finding)


def test_parameter_default_false_with_sequence_first_data_is_info(one):
    finding = one(parameter_block(", batch_first=False", SEQUENCE_DATA))
    assert_sequence_first_info(finding, "B, T, C = x.shape", "x.permute(1, 0, 2)")


def test_instantiation_argument_true_overrides_a_false_default(check):
    source = parameter_block(", batch_first=False", BATCH_DATA, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block(64, 8, batch_first=True)
    """)
    assert check(source) == []


def test_instantiation_argument_false_overrides_a_true_default(one):
    source = parameter_block(", batch_first=True", BATCH_DATA, """
        block = Block(64, 8, batch_first=False)
    """)
    finding = one(source)
    assert_batch_first_error(finding, "B, N, C = x.shape")
    assert "passes batch_first=False" in evidence_of(finding)


def test_instantiation_argument_resolves_a_parameter_without_default(one):
    source = parameter_block(", batch_first", SEQUENCE_DATA, """
        class Model(nn.Module):
            def __init__(self, dim=64):
                super().__init__()
                self.block = Block(dim, 8, batch_first=True)
    """)
    finding = one(source)
    assert_reverse_error(finding, "B, T, C = x.shape", "x.permute(1, 0, 2)")
    assert "passes batch_first=True" in evidence_of(finding)


def test_instantiation_argument_through_a_module_constant(one):
    source = parameter_block(", batch_first", BATCH_DATA, """
        BATCH_FIRST = False
        block = Block(64, 8, batch_first=BATCH_FIRST)
    """)
    assert_batch_first_error(one(source), "B, N, C = x.shape", "BATCH_FIRST")


def test_batch_first_parameter_passed_down_from_an_outer_default(one):
    source = parameter_block(", batch_first", BATCH_DATA, """
        class Model(nn.Module):
            def __init__(self, batch_first=False):
                super().__init__()
                self.block = Block(64, 8, batch_first)
    """)
    finding = one(source)
    assert_batch_first_error(finding, "B, N, C = x.shape")
    assert "`batch_first` defaults to False" in evidence_of(finding)


def test_instantiations_that_disagree_are_reported_for_the_one_the_data_contradicts(one):
    source = parameter_block(", batch_first=False", BATCH_DATA, """
        a = Block(64, 8, batch_first=True)
        b = Block(64, 8)
    """)
    finding = one(source)
    assert finding.severity == Severity.ERROR
    assert finding.message == ("nn.MultiheadAttention gets batch-first data (`B, N, C = x.shape`, line 9) but "
                               "batch_first=batch_first is False in the instance at line 13")
    assert "takes several values, False in the instance at line 13" in evidence_of(finding)
    assert "`Block(...)` at line 13 leaves `batch_first` at its default" in evidence_of(finding)
    assert finding.fix is None  # the fix belongs at `Block(64, 8)`, not at the shared construction


def test_instantiations_that_disagree_without_layout_evidence_are_not_guessed(check):
    source = parameter_block(", batch_first=False", "pass", """
        a = Block(64, 8, batch_first=True)
        b = Block(64, 8)
    """)
    assert check(source) == []


# ---- decoys ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("definition", [
    pytest.param("""
        class MultiheadAttention(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)
                self.heads = heads

            def forward(self, q, k, v):
                return self.qkv(q)
    """, id="project-class"),
    pytest.param("from .layers import MultiheadAttention\n", id="relative-import"),
])
def test_project_multihead_attention_fed_batch_first_data_is_not_flagged(lint, definition):
    source = "import torch.nn as nn\n" + textwrap.dedent(definition) + textwrap.dedent("""
        class Model(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()
                self.attn = MultiheadAttention(dim, heads)

            def forward(self, x):
                B, T, C = x.shape
                return self.attn(x, x, x)
    """)
    assert [f for f in lint(source, min_severity="info") if f.code == CODE] == []


def test_a_batch_first_key_is_batch_first_data_whatever_the_query(one):
    """The key must have the batch where the query has it (torch raises otherwise): read as (S, N, E), a (B, T, C)
    key mixes samples, so its shape unpacking decides the call."""
    source = """\
        import torch.nn as nn

        class CrossAttention(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()
                self.attn = nn.MultiheadAttention(dim, heads)

            def forward(self, queries, image):
                B, T, C = image.shape
                out, _ = self.attn(queries, image, image)
                return out
    """
    assert_batch_first_error(one(source), "`B, T, C = image.shape` at line 9",
                             "`image` at line 10: the key, whose batch axis the query `queries` shares")


def test_transposing_the_output_is_not_evidence_about_the_input(one):
    source = attention("B, T, C = x.shape\ny = self.attn(x, x, x)[0].transpose(0, 1)")
    assert_batch_first_error(one(source), "B, T, C = x.shape")


# ---- several uses of one module --------------------------------------------------------------------------------
MIXED = """\
    import torch.nn as nn

    class DualEncoder(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, heads{batch_first})

        def {first}(self, text):
            B, T, C = text.shape
            x = text.permute(1, 0, 2)
            return self.attn(x, x, x)[0]

        def {second}(self, feats):
            B, C, H, W = feats.shape
            x = feats.flatten(2).transpose(1, 2)
            return self.attn(x, x, x)[0]
"""


@pytest.mark.parametrize(("first", "second"), [("encode_text", "encode_image"), ("encode_image", "encode_text")])
def test_mixed_uses_of_a_default_module_are_an_error(one, first, second):
    finding = one(MIXED.format(batch_first="", first=first, second=second))
    assert_batch_first_error(finding, "B, C, H, W = feats.shape", "feats.flatten(2).transpose(1, 2)")


def test_mixed_uses_of_a_batch_first_module_are_an_error(one):
    finding = one(MIXED.format(batch_first=", batch_first=True", first="encode_text", second="encode_image"))
    assert_reverse_error(finding, "B, T, C = text.shape", "text.permute(1, 0, 2)")


def test_two_sequence_first_uses_are_info(one):
    source = MIXED.format(batch_first="", first="encode_text", second="encode_image").replace(
        "feats.flatten(2).transpose(1, 2)", "feats.flatten(2).permute(2, 0, 1)")
    assert_sequence_first_info(one(source), "text.permute(1, 0, 2)")  # the first use's evidence


# ---- nothing depends on where the code is ----------------------------------------------------------------------
@pytest.mark.parametrize("source", [
    attention("B, T, C = x.shape"),
    attention("B, T, C = x.shape\nx = x.permute(1, 0, 2)"),
    attention("B, T, C = x.shape\nx = x.permute(1, 0, 2)", batch_first=", batch_first=True"),
    attention("x = self.norm(x)"),
    PROJECT_ENCODER.format(batch_first="", tokens="src.flatten(2).transpose(1, 2)"),
])
@pytest.mark.parametrize("path", ["models/detr/transformer.py", "third_party/vit.py", "x.py"])
def test_verdict_does_not_depend_on_path_or_line(lint, source, path):
    expected = [(f.code, f.severity) for f in lint(source, CODE, min_severity="info")]
    shifted = "\n\n# moved down\n\n\n" + textwrap.dedent(source)
    found = Checker([load_rules()[CODE]]).check_source(shifted.encode(), path)
    assert expected and [(f.code, f.severity) for f in found] == expected


# ---- producers and documented shapes the old idioms got wrong or missed ----------------------------------------
def test_embeddings_of_padded_sequences_are_sequence_first(one):
    """pad_sequence stacks (L, N): the embedding is (L, N, E), which the default reads correctly."""
    source = """\
        import torch.nn as nn
        from torch.nn.utils.rnn import pad_sequence

        class Tagger(nn.Module):
            def __init__(self, vocab, dim, heads):
                super().__init__()
                self.embed = nn.Embedding(vocab, dim)
                self.attn = nn.MultiheadAttention(dim, heads)

            def forward(self, sentences):
                ids = pad_sequence(sentences)
                h = self.embed(ids)
                return self.attn(h, h, h)[0]
    """
    finding = one(source)
    assert_sequence_first_info(finding, "pad_sequence(sentences)", "self.embed(ids)")


@pytest.mark.parametrize("unpack", ["", "B, T, D = hist.shape"])
def test_an_axis_expanded_to_a_measured_sequence_length_is_not_a_batch(check, unpack):
    """`item.unsqueeze(1).expand(-1, n, -1)` with `n = hist.size(1)` grows a sequence axis, not a batch axis."""
    source = f"""\
        import torch
        import torch.nn as nn

        class Recommender(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()
                layer = nn.TransformerEncoderLayer(2 * dim, heads, batch_first=True)
                self.encoder = nn.TransformerEncoder(layer, 2)

            def forward(self, hist, item):
                {unpack}
                n = hist.size(1)
                x = torch.cat([hist, item.unsqueeze(1).expand(-1, n, -1)], dim=-1)
                return self.encoder(x)
    """
    assert check(source) == []


def test_padded_embeddings_swapped_to_batch_first_are_batch_first(check):
    """A swap of a known layout flips it: (L, N, E).transpose(0, 1) is (N, L, E), right for batch_first=True."""
    source = """\
        import torch.nn as nn
        from torch.nn.utils.rnn import pad_sequence

        class Tagger(nn.Module):
            def __init__(self, vocab, dim, heads):
                super().__init__()
                self.embed = nn.Embedding(vocab, dim)
                self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

            def forward(self, s):
                h = self.embed(pad_sequence(s)).transpose(0, 1)
                return self.attn(h, h, h)[0]
    """
    assert check(source) == []


def test_reshape_after_a_permute_keeps_the_batch_in_axis_0(one):
    source = attention("B, T, C, H, W = feats.shape\nx = feats.permute(0, 1, 3, 4, 2).reshape(B * T, H * W, C)",
                       param="feats")
    finding = one(source)
    assert_batch_first_error(finding, "B, T, C, H, W = feats.shape")
    assert headline_quotes(finding) == "feats.permute(0, 1, 3, 4, 2).reshape(B * T, H * W, C)"
    assert finding.fix is not None


def test_a_numpy_style_docstring_documents_the_input(one):
    source = attention('"""Attend over the tokens.\n\nParameters\n----------\nx : torch.Tensor\n'
                       '    Tensor shape [B, L, N]\n"""')
    assert_batch_first_error(one(source), "Tensor shape [B, L, N]")


def test_a_shape_comment_names_a_sequence_first_tensor(one):
    source = attention("tgt = torch.zeros_like(x)  # nq, bs, d_model\nx = tgt", batch_first=", batch_first=True")
    assert_reverse_error(one(source), "nq, bs, d_model")


INJECTED = """\
    import torch.nn as nn

    class Inner(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, heads{batch_first})

        def forward(self, chunks):
            return self.attn(chunks, chunks, chunks)[0]

    class Outer(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            B, T, C = x.shape
            return self.inner(x)

    model = Outer(Inner(64, 8))
"""


def test_a_module_handed_to_another_modules_constructor_is_followed(one):
    assert_batch_first_error(one(INJECTED.format(batch_first="")), "B, T, C = x.shape")


def test_a_module_handed_to_another_modules_constructor_with_the_right_setting_is_clean(check):
    assert check(INJECTED.format(batch_first=", batch_first=True")) == []


def test_data_through_a_module_from_another_file_is_at_most_a_warning(one):
    """`Block` comes from another file: that it keeps the axes is an assumption, so a name's strength."""
    source = attention("B, T, C = x.shape\nx = self.block(x)", imports="from .blocks import Block").replace(
        "self.norm = nn.LayerNorm(dim)", "self.block = Block(dim)")
    finding = one(source)
    assert finding.severity == Severity.WARNING and " gets batch-first data (" in finding.message
    assert finding.fix is None
    assert "assumed to keep its axes" in evidence_of(finding)


# ---- wrappers: a class built around the attention module -------------------------------------------------------
WRAPPER = """\
import torch
import torch.nn as nn
{imports}
class SeqFirst(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer
    def forward(self, x):
        return {body}

""" + MODEL_AROUND


def test_a_wrapper_that_transposes_before_its_layer_is_read_not_assumed_to_pass_the_input_on(one):
    """The container contract would call this batch-first data: the wrapper's own forward says otherwise."""
    source = WRAPPER.format(imports="", wrapper="SeqFirst", body="self.layer(x.transpose(0, 1)).transpose(0, 1)")
    assert_sequence_first_info(one(source), "B, T, C = x.shape", "x.transpose(0, 1)")
    helper = source.replace("        return self.layer(x.transpose(0, 1)).transpose(0, 1)",
                            "        return self.layer(self.to_seq(x))\n"
                            "    def to_seq(self, x):\n        return x.permute(1, 0, 2)")
    assert_sequence_first_info(one(helper), "B, T, C = x.shape", "x.permute(1, 0, 2)")


def test_a_stack_that_moves_no_axis_passes_its_input_on(one):
    source = WRAPPER.format(imports="", wrapper="SeqFirst", body="self.norm(self.layer(x))").replace(
        "        self.layer = layer", "        self.layer = layer\n        self.norm = nn.LayerNorm(64)")
    finding = one(source)
    assert_batch_first_error(finding, "B, T, C = x.shape")
    assert finding.fix is not None


def test_a_wrapper_mhalint_cannot_see_is_assumed_to_pass_its_input_on_at_most_a_warning(one):
    source = WRAPPER.format(imports="from .blocks import PreNorm", wrapper="PreNorm", body="self.layer(x)")
    finding = one(source)
    assert finding.severity == Severity.WARNING and finding.fix is None
    assert "gets batch-first data" in finding.message
    assert any("assuming `PreNorm` passes it on unchanged" in line for line in finding.evidence), finding.evidence


def test_a_dataloader_batch_given_to_a_sequence_first_module_is_an_error(one):
    source = """\
        import torch.nn as nn
        from torch.utils.data import DataLoader

        attn = nn.MultiheadAttention(64, 8)

        def train(dataset):
            for tokens, labels in DataLoader(dataset, batch_size=32, shuffle=True):
                out, _ = attn(tokens, tokens, tokens)
    """
    finding = one(source)
    assert_batch_first_error(finding, "DataLoader(dataset, batch_size=32, shuffle=True)")
    assert any("default collate stacks the samples on a new first axis" in line for line in finding.evidence)


LOADER_PASSED = """\
    import torch.nn as nn
    from torch.utils.data import DataLoader

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 8)

        def forward(self, x):
            return self.attn({data}, {data}, {data})[0]

    def train(model, loader):
        for tokens, labels in loader:
            model(tokens)

    def main(dataset, batches):
        loader = DataLoader(dataset, batch_size=32)
        train(Model(), {passed})
"""


def test_a_dataloader_passed_as_an_argument_batches_what_the_loop_yields(one):
    """Issue 35 item 5: the loader is a parameter that every caller fills with a DataLoader."""
    for passed in ("loader", "DataLoader(dataset, batch_size=32)"):
        finding = one(LOADER_PASSED.format(data="x", passed=passed))
        assert_batch_first_error(finding, "DataLoader(dataset, batch_size=32)")
    assert_sequence_first_info(one(LOADER_PASSED.format(data="x.transpose(0, 1)", passed="loader")),
                               "DataLoader(dataset, batch_size=32)", "x.transpose(0, 1)")


def test_a_loader_parameter_a_caller_fills_with_something_else_stays_unknown(one):
    assert one(LOADER_PASSED.format(data="x", passed="batches")).severity == Severity.WARNING
    twice = LOADER_PASSED.format(data="x", passed="loader") + "    train(Model(), batches)\n"
    assert one(twice).severity == Severity.WARNING
    custom = LOADER_PASSED.format(data="x", passed="loader").replace("batch_size=32)", "batch_size=32, collate_fn=f)")
    assert one(custom).severity == Severity.WARNING


PARTIAL = """\
    from functools import partial
    import torch.nn as nn

    Attn = partial(nn.MultiheadAttention, {fixed})

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attn(64, 8)

        def forward(self, x):
            B, T, C = x.shape
            return self.attn(x, x, x)[0]
"""


def test_a_module_built_through_functools_partial_reads_the_partial_s_arguments(check, one):
    assert check(PARTIAL.format(fixed="batch_first=True")) == []
    finding = one(PARTIAL.format(fixed="dropout=0.1"))
    assert_batch_first_error(finding, "B, T, C = x.shape")
    assert "(nor the partial at line 4) has no batch_first argument" in evidence_of(finding)
    after, applied = apply_fixes(textwrap.dedent(PARTIAL.format(fixed="dropout=0.1")), [finding], unsafe=True)
    assert applied == 1 and "self.attn = Attn(64, 8, batch_first=True)" in after


# ---- layout from what the code documents about a parameter (issue 35 item 8) ------------------------------------
LAYER = '''\
import torch.nn as nn

class DecoderLayer(nn.Module):
    def __init__(self, d_model, nhead):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, nhead)

    def forward(self,
                {signature}):
{body}
        return self.attn(tgt, tgt, tgt)[0]
'''


def layer(signature: str, body: str = "pass") -> str:
    return LAYER.format(signature=signature, body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8))


@pytest.mark.parametrize(("signature", "body", "evidence"), [
    pytest.param("tgt,  # {shape}\nmemory=None", "pass", "# {shape}", id="comment-beside-the-parameter"),
    pytest.param("# tgt: ({shape})\ntgt, memory=None", "pass", "# tgt: ({shape})", id="comment-line-in-signature"),
    pytest.param("tgt, memory=None", "# tgt is {shape}\nmemory = tgt", "# tgt is {shape}", id="comment-in-the-body"),
    pytest.param("tgt, memory=None", '"""\nInput:\n    - tgt: {shape}\n    - memory: hw, bs, d_model\n"""',
                 "tgt: {shape}", id="bulleted-docstring"),
])
@pytest.mark.parametrize("batch_first", [True, False])
def test_a_documented_parameter_decides_the_layout(one, signature, body, evidence, batch_first):
    shape = "bs, nq, d_model" if batch_first else "nq, bs, d_model"
    finding = one(layer(signature.format(shape=shape), body.format(shape=shape)))
    if batch_first:
        assert_batch_first_error(finding, evidence.format(shape=shape), "the comment documents `tgt`"
                                 if "docstring" not in finding.evidence[-1] else "documents `tgt`")
    else:
        assert_sequence_first_info(finding, evidence.format(shape=shape))


def test_a_comment_beside_several_parameters_documents_none_of_them(one):
    finding = one(layer("tgt, memory,  # bs, nq, d_model\npos=None"))
    assert_unknown_warning(finding, "the data, `tgt`, is a parameter of `forward` with no caller found")


def test_a_comment_about_a_parameter_after_it_is_rebound_documents_the_new_value_only(one):
    finding = one(layer("tgt, memory=None", "tgt = self.attn.out_proj(tgt)\nmemory = tgt\n# tgt is bs, nq, d_model"))
    assert_unknown_warning(finding, "the data, `tgt`, is a parameter of `forward`")


@pytest.mark.parametrize(("signature", "body"), [
    pytest.param("tgt,  # nq, bs, d_model\nmemory=None", "bs, nq, d = tgt.shape", id="comment-and-unpacking"),
    pytest.param("tgt, memory=None", '"""tgt: (L, N, E) queries."""\nB, L, E = tgt.shape',
                 id="docstring-and-unpacking"),
])
def test_a_documented_shape_the_code_contradicts_is_unknown_and_the_warning_names_both(one, signature, body):
    finding = one(layer(signature, body))
    assert_unknown_warning(finding, "disagree on the data's layout")
    assert finding.fix is None
    assert any("shows sequence-first data but" in line and "shows batch-first" in line for line in finding.evidence)


def test_a_shape_comment_the_permute_beside_it_contradicts_is_unknown(one):
    source = attention("B, T, C = x.shape\nx = x.permute(1, 0, 2)  # (B, T, C)")
    finding = one(source)
    assert_unknown_warning(finding, "`# (B, T, C)` and `x.permute(1, 0, 2)` disagree on the data's layout")


def test_a_parameter_name_alone_is_no_layout(one):
    """`tgt`, `memory`, `query`: names that DETR uses for sequence-first data, and others for batch-first."""
    finding = one(layer("tgt, memory, pos=None", "tgt = tgt + pos"))
    assert_unknown_warning(finding, "the data, `tgt`, is a parameter of `forward` with no caller found")


def test_data_from_an_iterable_the_reader_cannot_read_names_it(one):
    source = """\
        import torch.nn as nn

        attn = nn.MultiheadAttention(64, 8)

        def train(loader):
            for batch in loader:
                attn(batch, batch, batch)
    """
    finding = one(source)
    assert_unknown_warning(finding, "the data is `batch`, an item of `loader` (line 6)")
    assert "`batch` is an item of `loader` at line 6, a parameter of `train`" in evidence_of(finding)


# ---- recurrent layers give a known layout ----------------------------------------------------------------------
RECURRENT = '''\
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.rnn = nn.{kind}(dim, dim{flag})
        self.attn = nn.MultiheadAttention(dim, 8)

    def forward(self, x):
        {read}
        return self.attn(h, h, h)[0]
'''


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("read", ["h, _ = self.rnn(x)", "h = self.rnn(x)[0]"])
def test_a_batch_first_recurrent_output_into_a_default_module_is_an_error(one, kind, read):
    finding = one(RECURRENT.format(kind=kind, flag=", batch_first=True", read=read))
    assert_batch_first_error(finding, f"nn.{kind}(dim, dim, batch_first=True)", "output is (N, L, H)")


@pytest.mark.parametrize("flag", ["", ", batch_first=False"])
def test_a_sequence_first_recurrent_output_into_a_default_module_is_info(one, flag):
    finding = one(RECURRENT.format(kind="LSTM", flag=flag, read="h, _ = self.rnn(x)"))
    assert_sequence_first_info(finding, f"nn.LSTM(dim, dim{flag})", "output is (L, N, H)")


@pytest.mark.parametrize("flag", [", batch_first=self.batch_first", ", **options"])
def test_a_recurrent_layer_whose_batch_first_cannot_be_read_gives_no_layout(one, flag):
    finding = one(RECURRENT.format(kind="LSTM", flag=flag, read="h, _ = self.rnn(x)"))
    assert_unknown_warning(finding)


def test_a_recurrent_layer_s_tuple_is_not_a_tensor(one):
    finding = one(RECURRENT.format(kind="LSTM", flag=", batch_first=True", read="h = self.rnn(x)"))
    assert_unknown_warning(finding, "the axes of `self.rnn(x)` (line 10) are not known")


# ---- layout from the use of the data and of the attention's output (issue 35 item 8) ------------------------------
USED = '''\
import torch.nn as nn
from einops import rearrange

class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 8)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
{body}
'''


def used(body: str) -> str:
    return USED.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8))


# (body, the evidence the finding quotes) for each reader, in its batch-first and its sequence-first form
USE_KINDS = [
    pytest.param("out = self.attn(x, x, x)[0]\nbs = x.shape[{axis}]\nreturn out", "bs = x.shape[{axis}]",
                 id="size-read-after-the-call"),
    pytest.param("b, c = x.shape[{axis}], x.shape[2]\nreturn self.attn(x, x, x)[0]",
                 "b, c = x.shape[{axis}], x.shape[2]", id="sizes-read-in-a-tuple"),
    pytest.param("out, _ = self.attn(x, x, x)\nreturn rearrange(out, '{pattern} -> n b d')",
                 "rearrange(out, '{pattern} -> n b d')", id="rearrange-of-the-output"),
    pytest.param("out = self.attn(x, x, x)[0]{back}\nB, L, E = out.shape\nreturn out", "B, L, E = out.shape",
                 id="output-unpacked-after-a-transpose"),
    pytest.param("out = self.attn(x, x, x)[0]\npooled = self.norm(out).mean(dim={axis_of_sequence})\n"
                 "B, E = pooled.shape\nreturn pooled", "B, E = pooled.shape", id="pooled-output-unpacked"),
    pytest.param("out = self.attn(x, x, x)[0]\ncls = out[{pick}]\nbatch, dim = cls.shape\nreturn cls",
                 "batch, dim = cls.shape", id="picked-token-unpacked"),
]


def _filled(text: str, batch_first: bool) -> str:
    return text.format(axis=0 if batch_first else 1, pattern="b n d" if batch_first else "n b d",
                       back="" if batch_first else ".transpose(0, 1)", axis_of_sequence=1 if batch_first else 0,
                       pick=":, 0" if batch_first else "0")


@pytest.mark.parametrize(("body", "evidence"), USE_KINDS)
def test_batch_first_use_of_the_data_into_a_default_module_is_an_error(one, body, evidence):
    assert_batch_first_error(one(used(_filled(body, True))), _filled(evidence, True))


@pytest.mark.parametrize(("body", "evidence"), USE_KINDS)
def test_sequence_first_use_of_the_data_into_a_default_module_is_info(one, body, evidence):
    assert_sequence_first_info(one(used(_filled(body, False))), _filled(evidence, False))


def test_the_output_read_by_a_batch_first_recurrent_layer_is_batch_first(one):
    finding = one(used("out = self.attn(x, x, x)[0]\nh, _ = self.lstm(out)\nreturn h"))
    assert_batch_first_error(finding, "nn.LSTM(dim, dim, batch_first=True)", "reads (N, L, H)")


def test_a_caller_s_size_read_shows_the_layout_of_what_it_passes(one):
    source = """\
        import torch.nn as nn

        class Layer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.attn = nn.MultiheadAttention(dim, 8)

            def forward(self, tgt):
                return self.attn(tgt, tgt, tgt)[0]

        class Decoder(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.layer = Layer(dim)

            def forward(self, tgt):
                bs = tgt.shape[1]
                return self.layer(tgt).reshape(-1, bs, 64)
    """
    assert_sequence_first_info(one(source), "bs = tgt.shape[1]")


@pytest.mark.parametrize("body", [
    pytest.param("out = self.attn(x, x, x)[0]\nreturn out.mean(dim=1)", id="pooling-alone"),
    pytest.param("out = self.attn(x, x, x)[0]\nreturn self.norm(out[:, 0])", id="picking-alone"),
    pytest.param("out = self.attn(x, x, x)[0]\nn = x.shape[1]\nreturn out", id="a-size-whose-name-says-nothing"),
])
def test_a_use_that_names_no_axis_leaves_the_layout_unknown(one, body):
    assert_unknown_warning(one(used(body)), "the data, `x`, is a parameter of `Block.forward` with no caller found")


def test_uses_that_show_different_layouts_are_unknown_and_named(one):
    finding = one(used("out = self.attn(x, x, x)[0]\nbs = x.shape[0]\nreturn rearrange(out, 'n b d -> b n d')"))
    assert_unknown_warning(finding, "disagree on the data's layout")
    assert "`bs = x.shape[0]`" in finding.message and "rearrange(out" in finding.message
    assert finding.fix is None


# ---- an arrow comment beside a reorder inside an expression ----------------------------------------------------
INLINE = """\
import torch.nn as nn

class Mixer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 8)

    def forward(self, x):
        {before}
        return self.attn({query}, x, x)[0]  # {comment}
"""


def test_an_arrow_comment_beside_an_inline_permute_documents_its_result(one):
    finding = one(INLINE.format(before="pass", query="x.permute(1, 0, 2)", comment="(T, B, C) -> (B, T, C)"))
    assert_batch_first_error(finding, "# (T, B, C) -> (B, T, C)")


def test_an_arrow_comment_to_sequence_first_beside_an_inline_permute_is_info(one):
    finding = one(INLINE.format(before="pass", query="x.permute(1, 0, 2)", comment="(B, T, C) -> (T, B, C)"))
    assert_sequence_first_info(finding, "# (B, T, C) -> (T, B, C)")


def test_an_arrow_comment_the_permute_s_input_contradicts_is_unknown(one):
    finding = one(INLINE.format(before="B, T, C = x.shape", query="x.permute(1, 0, 2)",
                                comment="(T, B, C) -> (B, T, C)"))
    assert_unknown_warning(finding, "`# (T, B, C) -> (B, T, C)` and `x.permute(1, 0, 2)` disagree")


def test_an_arrow_comment_on_a_line_of_two_reorders_documents_neither(one):
    finding = one(INLINE.format(before="pass", query="x.transpose(0, 1).contiguous(), x.transpose(0, 1)",
                                comment="(B, T, C) -> (T, B, C)").replace(", x, x)[0]", ", x)[0]"))
    assert_unknown_warning(finding, "the data, `x`, is a parameter of `Mixer.forward` with no caller found")



# ---- the arguments of one call decide each other: the key and value have the query's batch axis -----------------
CROSS_ATTENTION = '''\
import torch.nn as nn

class CrossAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(256, 8)

    def forward(self, queries, features, other):
        b, c, h, w = features.shape
        memory = features.flatten(2).{move}
        return self.attn(queries, {key}, {value})[0]
'''


@pytest.mark.parametrize("keyword", [False, True])
def test_a_key_whose_layout_is_known_decides_a_query_whose_layout_is_not(one, keyword):
    call = "queries, key=memory, value=memory" if keyword else "queries, memory, memory"
    sequence_first = CROSS_ATTENTION.format(move="permute(2, 0, 1)", key="memory", value="memory")
    sequence_first = sequence_first.replace("queries, memory, memory", call)
    assert_sequence_first_info(one(sequence_first), "`b, c, h, w = features.shape` at line 9",
                               "`memory` at line 11: the key, whose batch axis the query `queries` shares")
    batch_first = sequence_first.replace("permute(2, 0, 1)", "transpose(1, 2)")
    assert_batch_first_error(one(batch_first), "`b, c, h, w = features.shape` at line 9",
                             "`features.flatten(2).transpose(1, 2)` at line 10")


@pytest.mark.parametrize(("key", "value", "missing"), [
    ("other", "other", "the data, `queries`, is a parameter of `forward`"),  # the key unknown too
    ("memory", "memory.transpose(0, 1)", "the data, `queries`, is a parameter"),  # key and value disagree
])
def test_partners_that_show_no_one_layout_leave_the_query_unknown(one, key, value, missing):
    finding = one(CROSS_ATTENTION.format(move="permute(2, 0, 1)", key=key, value=value))
    assert_unknown_warning(finding, missing)
    assert "`other`" not in evidence_of(finding)  # where the key's trace stopped is not what the query misses
