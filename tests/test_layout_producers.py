"""MHA001 on producers whose axes the trace alone cannot read (issue 35): pieces of a split, slices with an
ellipsis, and values whose layout shows in what a project callee does with them (`N, Len_q, _ = query.shape` in a
deformable cross-attention's forward), in this file or another, through a package's re-export. Each both ways:
batch-first data into a default module is an error, sequence-first data is info, and nothing telling stays a warning.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_mha001_layout import (
    assert_batch_first_error,
    assert_sequence_first_info,
    assert_unknown_warning,
    attention,
    evidence_of,
)

from mhalint.finding import Severity
from mhalint.rule import load_rules
from mhalint.run.engine import Checker


def mha001(lint, source: str):
    found = lint(source, "MHA001", min_severity="info")
    assert len(found) == 1, [(f.line, str(f.severity), f.message) for f in found]
    return found[0]


# ---- pieces of a split, slices with an ellipsis -----------------------------------------------------------------
@pytest.mark.parametrize("body", [
    "B, T, C = feats.shape\nx, gate = feats.chunk(2, dim=-1)",
    "B, T, C = feats.shape\nx, gate = torch.split(feats, C // 2, dim=2)",
    "B, T, C = feats.shape\nx = torch.split(feats, C // 2, dim=2)[0]",
    "B, T, C = feats.shape\nx = feats[..., :C // 2]",
])
def test_a_piece_of_batch_first_data_cut_along_the_features_is_batch_first(lint, body):
    assert_batch_first_error(mha001(lint, attention(body, "feats")), "B, T, C = feats.shape")


@pytest.mark.parametrize("body", [
    "T, B, C = feats.shape\nx, gate = feats.chunk(2, dim=-1)",
    "T, B, C = feats.shape\nx, rest = torch.tensor_split(feats, 2, dim=0)",
    "T, B, C = feats.shape\nx = feats[..., :C // 2]",
])
def test_a_piece_of_sequence_first_data_is_sequence_first(lint, body):
    assert_sequence_first_info(mha001(lint, attention(body, "feats")), "T, B, C = feats.shape")


def test_a_piece_of_data_nothing_describes_stays_unknown(lint):
    assert_unknown_warning(mha001(lint, attention("x, gate = feats.chunk(2, dim=-1)", "feats")))


def test_a_string_split_is_no_tensor(lint):
    source = attention("name, _ = 'a.b'.split('.')\nx = feats", "feats")
    assert_unknown_warning(mha001(lint, source))


# ---- layout from a callee's use: a deformable decoder layer ------------------------------------------------------
DECODER = """\
import copy
import torch
import torch.nn as nn
from kernels import sample


class SparseCross(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.offsets = nn.Linear(dim, 8)

    def forward(self, query, points, feats):
        {unpack}
        return sample(feats, self.offsets(query), points)


class QueryLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.cross = SparseCross(dim)
        self.self_attn = nn.MultiheadAttention(dim, heads)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)

    @staticmethod
    def add_pos(t, pos):
        return t if pos is None else t + pos

    def forward(self, tgt, pos, points, feats):
        q = k = self.add_pos(tgt, pos)
        out = {attend}
        tgt = self.norm1(tgt + out)
        tgt = tgt + self.cross(self.add_pos(tgt, pos), points, feats)
        return self.norm2(tgt)


class Decoder(nn.Module):
    def __init__(self, layer, n):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(n)])

    def forward(self, tgt, points, feats, pos=None):
        out = tgt
        for layer in self.layers:
            out = layer(out, pos, points, feats)
        return out
"""
TRANSPOSED = "self.self_attn(q.transpose(0, 1), k.transpose(0, 1), tgt.transpose(0, 1))[0].transpose(0, 1)"
AS_GIVEN = "self.self_attn(q, k, tgt)[0]"


def decoder(unpack: str = "N, Len_q, _ = query.shape", attend: str = TRANSPOSED) -> str:
    return DECODER.format(unpack=unpack, attend=attend)


def test_data_a_callee_unpacks_as_batch_first_transposed_before_the_attention_is_info(lint):
    finding = mha001(lint, decoder())
    assert_sequence_first_info(finding, "N, Len_q, _ = query.shape", "passes it as `query` to `SparseCross.forward`")


def test_data_a_callee_unpacks_as_batch_first_given_to_the_attention_as_is_is_an_error(lint):
    finding = mha001(lint, decoder(attend=AS_GIVEN))
    assert_batch_first_error(finding, "N, Len_q, _ = query.shape", "passes it as `query` to `SparseCross.forward`")
    assert finding.fix is not None


def test_data_a_callee_unpacks_into_names_that_say_nothing_stays_unknown(lint):
    assert_unknown_warning(mha001(lint, decoder(unpack="d0, d1, d2 = query.shape")))


def test_data_a_callee_unpacks_as_sequence_first_given_as_is_is_info(lint):
    finding = mha001(lint, decoder(unpack="L, N, E = query.shape", attend=AS_GIVEN))
    assert_sequence_first_info(finding, "L, N, E = query.shape")


# ---- the callee in another file, re-exported by its package -------------------------------------------------------
CROSS = """\
import torch.nn as nn
from kernels import sample


class SparseCross(nn.Module):
    def forward(self, query, points, feats):
        N, Len_q, _ = query.shape
        return sample(feats, query, points)
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _findings(root: Path):
    rules = [load_rules()["MHA001"]]
    return [f for f in Checker(rules).check_paths([root], jobs=1).findings if f.code == "MHA001"]


def _layer_importing(module: str) -> str:
    return decoder(attend=AS_GIVEN).replace("class SparseCross", f"from {module} import SparseCross\n\n\nclass Unused")


def test_a_callee_re_exported_by_a_package_init_shows_the_layout(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/ops/__init__.py": "from .cross import SparseCross\n",
                      "pkg/ops/cross.py": CROSS, "pkg/layer.py": _layer_importing(".ops")})
    [finding] = _findings(tmp_path)
    assert finding.severity == Severity.ERROR, finding.message
    assert "N, Len_q, _ = query.shape" in evidence_of(finding) and "cross.py:7" in evidence_of(finding)


def test_each_copy_of_a_package_without_init_files_reads_its_own_callee(tmp_path):
    """`ops/` has no `__init__.py`, so `ops.modules` of every copy is the module `modules`: the one the importer
    means is the one beside it. The other copy's callee says nothing: its layer stays a warning."""
    files = {"models/__init__.py": ""}
    for copy, unpack in (("a", "N, Len_q, _ = query.shape"), ("b", "d0, d1, d2 = query.shape")):
        files |= {f"models/{copy}/__init__.py": "", f"models/{copy}/layer.py": _layer_importing(".ops.modules"),
                  f"models/{copy}/ops/modules/__init__.py": "from .cross import SparseCross\n",
                  f"models/{copy}/ops/modules/cross.py": CROSS.replace("N, Len_q, _ = query.shape", unpack)}
    _write(tmp_path, files)
    found = {Path(f.path).parent.name: f.severity for f in _findings(tmp_path)}
    assert found == {"a": Severity.ERROR, "b": Severity.WARNING}


# ---- branches: an unpacking in the other branch, paths that agree on the layout -----------------------------------
BY_RANK = """\
if feats.dim() == 4:
    B, C, H, W = feats.shape
    x = feats.flatten(2).{four}
else:
    B, L, C = feats.shape
    x = {three}
"""


PREFIXED = """\
B, L, C = feats.shape
x = {x}
if extra is not None:
    x = {extended}
"""


BRANCHES = [  # (forward body, parameters, what it is, the evidence it names)
    pytest.param(BY_RANK.format(four="permute(2, 0, 1)", three="feats.permute(1, 0, 2)"), "feats",
                 assert_sequence_first_info, "B, C, H, W = feats.shape", id="each-branch-its-unpacking-info"),
    pytest.param(BY_RANK.format(four="transpose(1, 2)", three="feats"), "feats", assert_batch_first_error,
                 "B, C, H, W = feats.shape", id="each-branch-its-unpacking-error"),
    # `torch.cat([extra, x])` along the tokens of an unknown `extra`: its sequence axis is not known, its batch
    # is; the other path shows both. Every path puts the batch in the same place.
    pytest.param(PREFIXED.format(x="feats.permute(1, 0, 2)", extended="torch.cat([extra, x], dim=0)"),
                 "feats, extra", assert_sequence_first_info, "B, L, C = feats.shape", id="paths-agree-info"),
    pytest.param(PREFIXED.format(x="feats", extended="torch.cat([extra, x], dim=1)"), "feats, extra",
                 assert_batch_first_error, "B, L, C = feats.shape", id="paths-agree-error"),
]


@pytest.mark.parametrize(("body", "params", "is_", "evidence"), BRANCHES)
def test_branches_decide_where_every_path_agrees(lint, body, params, is_, evidence):
    is_(mha001(lint, attention(body, params)), evidence)


@pytest.mark.parametrize(("body", "params", "missing"), [
    pytest.param(BY_RANK.format(four="permute(2, 0, 1)", three="feats"), "feats", "disagree", id="opposite-layouts"),
    pytest.param(PREFIXED.format(x="feats.permute(1, 0, 2)", extended="extra"), "feats, extra", "",
                 id="a-path-not-read"),
])
def test_branches_stay_unknown_where_a_path_disagrees_or_is_not_read(lint, body, params, missing):
    assert_unknown_warning(mha001(lint, attention(body, params)), missing)
