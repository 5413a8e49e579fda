"""MHA001 on axes of size one that the module's own tensors broadcast over (issue 35).

A positional table registered as a buffer or built as an nn.Parameter is the same for every sample: added to the
data, its axis of size one meets the samples (the batch), and an axis sliced to the data's length meets the
positions (the sequence). That shows how the module reads its input, not where the input comes from: at most a
warning, and the data's own trace wins. A learned query repeated or expanded by a batch size the code unpacks is
established. Each both ways, and the tables that show nothing stay unknown.
"""

from __future__ import annotations

import pytest
from test_mha001_layout import assert_batch_first_error, assert_sequence_first_info, assert_unknown_warning, evidence_of

from mhalint.finding import Severity

ENCODING = """\
import math
import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000):
        super().__init__()
{table}

    def forward(self, x):
        return {added}


class Model(nn.Module):
    def __init__(self, d_model=64):
        super().__init__()
        self.pos = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4{batch_first})
        self.encoder = nn.TransformerEncoder(layer, 2)

    def forward(self, src):
{body}
        src = self.pos(src)
        return self.encoder(src)
"""

# the tutorial's table: (max_len, 1, d_model), and the batch-first variant (1, max_len, d_model)
TUTORIAL = """\
pe = torch.zeros(max_len, d_model)
position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
pe[:, 0::2] = torch.sin(position * div_term)
pe[:, 1::2] = torch.cos(position * div_term)
pe = pe.unsqueeze(0).transpose(0, 1)
self.register_buffer("pe", pe)"""
BATCH_FIRST_TABLE = TUTORIAL.replace("pe.unsqueeze(0).transpose(0, 1)", "pe.unsqueeze(0)")
PARAMETER = "self.pe = nn.Parameter(torch.zeros(1, max_len, d_model))"


def encoding(table: str, added: str, body: str = "pass", batch_first: str = "") -> str:
    indent = lambda text, n: "\n".join(" " * n + line for line in text.splitlines())  # noqa: E731
    return ENCODING.format(table=indent(table, 8), added=added, body=indent(body, 8), batch_first=batch_first)


def mha001(lint, source: str):
    found = lint(source, "MHA001", min_severity="info")
    assert len(found) == 1, [(f.line, str(f.severity), f.message) for f in found]
    return found[0]


@pytest.mark.parametrize("added", ["x + self.pe[:x.size(0), :]", "x + self.pe[:x.shape[0]]",
                                   "self.pe[:x.size(0)].to(x.device) + x",
                                   "x + self.pe.squeeze(1)[:x.size(0)].unsqueeze(1)"])
def test_the_tutorial_table_shows_sequence_first_data(lint, added):
    finding = mha001(lint, encoding(TUTORIAL, added))
    assert_sequence_first_info(finding, "`self.pe` is the module's own tensor, the same for every sample: its axis "
                                        "of size 1 broadcasts over the batch")


@pytest.mark.parametrize("table, added", [(BATCH_FIRST_TABLE, "x + self.pe[:, :x.size(1)]"),
                                          (PARAMETER, "x + self.pe[:, :x.size(1), :]")])
def test_a_table_spread_over_axis_0_into_a_default_module_is_a_warning(lint, table, added):
    """The table shows how the module reads its input, not what the data is: no error, no fix."""
    finding = mha001(lint, encoding(table, added))
    assert finding.severity == Severity.WARNING and " gets batch-first data (" in finding.message, finding.message
    assert finding.fix is None
    assert "its axis of size 1 broadcasts over the batch" in evidence_of(finding)


def test_a_table_read_through_a_name_is_the_modules_own(lint):
    finding = mha001(lint, encoding(TUTORIAL, "x + pos", body="pass").replace(
        "        return x + pos", "        pos = self.pe[:x.size(0)]\n        return x + pos"))
    assert_sequence_first_info(finding, "its axis of size 1 broadcasts over the batch")


def test_the_datas_own_shape_gives_the_error(lint):
    finding = mha001(lint, encoding(BATCH_FIRST_TABLE, "x + self.pe[:, :x.size(1)]", body="B, T, C = src.shape"))
    assert_batch_first_error(finding, "B, T, C = src.shape")


def test_the_datas_own_shape_wins_over_the_table(lint):
    finding = mha001(lint, encoding(BATCH_FIRST_TABLE, "x + self.pe[:, :x.size(1)]", body="T, B, C = src.shape"))
    assert_sequence_first_info(finding, "T, B, C = src.shape")


def test_the_tutorial_table_into_a_batch_first_module_is_a_warning(lint):
    """Either the table or the module reads the data the wrong way: a warning, without a fix."""
    finding = mha001(lint, encoding(TUTORIAL, "x + self.pe[:x.size(0), :]", batch_first=", batch_first=True"))
    assert finding.severity == Severity.WARNING and " gets sequence-first data (" in finding.message
    assert finding.fix is None


@pytest.mark.parametrize("table, added", [
    pytest.param("self.register_buffer('pe', torch.zeros(max_len, d_model))", "x + self.pe[:x.size(1)]",
                 id="no-axis-of-size-one"),
    pytest.param(TUTORIAL, "x + self.pe[:x.size(0), :].repeat(1, x.shape[1], 1)", id="repeated-to-the-datas-size"),
    pytest.param("self.pe = torch.zeros(max_len, 1, d_model)", "x + self.pe[:x.size(0)]", id="not-registered"),
    pytest.param("self.register_buffer('pe', torch.zeros(1, 1, d_model))", "x + self.pe", id="two-axes-of-size-one"),
])
def test_a_table_that_shows_no_one_axis_of_samples_leaves_the_data_unknown(lint, table, added):
    assert_unknown_warning(mha001(lint, encoding(table, added)))


QUERIES = """\
import torch
import torch.nn as nn


class Decoder(nn.Module):
    def __init__(self, d_model=64, num_queries=100):
        super().__init__()
        self.embed = nn.Embedding(num_queries, d_model)
        self.attn = nn.MultiheadAttention(d_model, 8)

    def forward(self, src):
        {size}
        query = self.embed.weight.{grown}
        return self.attn(query, query, query)[0]
"""


@pytest.mark.parametrize("grown", ["unsqueeze(1).repeat(1, bs, 1)", "unsqueeze(1).expand(-1, bs, -1)"])
def test_a_query_table_grown_over_axis_1_by_the_batch_size_is_sequence_first(lint, grown):
    finding = mha001(lint, QUERIES.format(size="bs, c, h, w = src.shape", grown=grown))
    assert_sequence_first_info(finding, "bs, c, h, w = src.shape")


def test_a_query_table_grown_over_axis_0_by_the_batch_size_is_batch_first(lint):
    finding = mha001(lint, QUERIES.format(size="bs, c, h, w = src.shape", grown="unsqueeze(0).repeat(bs, 1, 1)"))
    assert_batch_first_error(finding, "bs, c, h, w = src.shape")


def test_an_embedding_table_with_an_axis_of_size_one_at_axis_1_is_sequence_first(lint):
    source = QUERIES.format(size="pass", grown="unsqueeze(1)").replace("self.attn(query, query, query)",
                                                                        "self.attn(src + query, src, src)")
    assert_sequence_first_info(mha001(lint, source), "adds the module's `self.embed.weight`")


def test_a_query_table_grown_by_a_size_nothing_names_stays_unknown(lint):
    assert_unknown_warning(mha001(lint, QUERIES.format(size="n = src.shape[2]", grown="unsqueeze(1).repeat(1, n, 1)")))


SET_ATTENTION = """\
import torch.nn as nn


class QueryInteraction(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.attn = nn.MultiheadAttention(dim, 8{batch_first})

    def forward(self, tracks, memory):
        {body}
        q = k = self.proj(embed)
        out = self.attn({query}, {key}, value={value})[0][:, 0]
        return embed + out
"""


def set_attention(query="q[:, None]", key="k[:, None]", value="embed[:, None]", body="embed = tracks.embedding",
                  batch_first=""):
    return SET_ATTENTION.format(query=query, key=key, value=value, body=body, batch_first=batch_first)


@pytest.mark.parametrize("query, key, value", [("q[:, None]", "k[:, None]", "embed[:, None]"),
                                               ("q.unsqueeze(1)", "k.unsqueeze(1)", "embed.unsqueeze(1)"),
                                               ("q[:, None, :]", "k[:, None, :]", "embed[:, None, :]")])
def test_a_set_attending_to_itself_with_an_axis_of_size_one_at_axis_1_is_one_sample(lint, query, key, value):
    finding = mha001(lint, set_attention(query, key, value))
    assert_sequence_first_info(finding, f"`{key}` at line 13: the key has an axis of size 1 put at axis 1")


def test_the_key_of_length_one_into_a_batch_first_module_is_a_warning(lint):
    finding = mha001(lint, set_attention(batch_first=", batch_first=True"))
    assert finding.severity == Severity.WARNING and " gets sequence-first data (`k[:, None]`" in finding.message
    assert finding.fix is None


def test_a_tensor_whose_first_axis_is_the_batch_gives_the_error(lint):
    finding = mha001(lint, set_attention(body="B, C = tracks.shape\nembed = tracks".replace("\n", "\n        ")))
    assert_batch_first_error(finding, "B, C = tracks.shape")


@pytest.mark.parametrize("query, key", [
    pytest.param("q[:, None]", "memory", id="a-query-alone"),  # one query token over batch-first memory
    pytest.param("q", "k[:, None]", id="a-key-alone"),  # one conditioning token
    pytest.param("q[:, None]", "k[None]", id="the-key-inserted-at-axis-0"),
])
def test_an_axis_of_size_one_on_one_side_only_decides_nothing(lint, query, key):
    assert_unknown_warning(mha001(lint, set_attention(query, key, "memory" if key == "memory" else key)))


PARAMETER_QUERIES = """\
import torch
import torch.nn as nn


class ModeDecoder(nn.Module):
    def __init__(self, weights, num_modes=6, d_model=64):
        super().__init__()
        self.modes = nn.Parameter({table}, requires_grad=True)
        self.attn = nn.MultiheadAttention(d_model, 8)

    def forward(self, src):
        bs, c, h, w = src.shape
        query = self.modes.repeat({repeat})
        return self.attn(query, query, query)[0]
"""


@pytest.mark.parametrize("table", ["torch.Tensor(num_modes, 1, d_model)", "torch.zeros(num_modes, 1, d_model)"])
def test_a_parameter_repeated_over_axis_1_by_the_batch_size_is_sequence_first(lint, table):
    finding = mha001(lint, PARAMETER_QUERIES.format(table=table, repeat="1, bs, 1"))
    assert_sequence_first_info(finding, "bs, c, h, w = src.shape")


def test_a_parameter_repeated_over_axis_0_by_the_batch_size_is_batch_first(lint):
    finding = mha001(lint, PARAMETER_QUERIES.format(table="torch.Tensor(1, num_modes, d_model)", repeat="bs, 1, 1"))
    assert_batch_first_error(finding, "bs, c, h, w = src.shape")


@pytest.mark.parametrize("table", ["weights", "torch.Tensor([[0.0] * 64] * 6).unsqueeze(1)"])
def test_a_parameter_of_unknown_sizes_stays_unknown(lint, table):
    assert_unknown_warning(mha001(lint, PARAMETER_QUERIES.format(table=table, repeat="1, bs, 1")))
