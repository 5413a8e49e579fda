"""Each file is parsed with libcst at most once per run (issue 37, item 1), on a litgpt-shaped project: one model
file whose classes thirty other files build, subclass and call. The analyses of the model file ask every importer
what its classes get; the importers' own checks then reuse those trees, and no question parses a file again."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import libcst
import pytest

from mhalint.rule import load_rules
from mhalint.run.engine import Checker

IMPORTERS = 30

MODEL = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    n_embd = 64
    n_head = 8


class CausalSelfAttention(nn.Module):
    def __init__(self, config, dropout=0.0):
        super().__init__()
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.n_head = config.n_head
        self.dropout = dropout

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout)
        return y.transpose(1, 2).reshape(B, T, C)


class Block(nn.Module):
    def __init__(self, config, batch_first):
        super().__init__()
        self.attn = CausalSelfAttention(config)
        self.mha = nn.MultiheadAttention(config.n_embd, config.n_head, batch_first=batch_first)

    def forward(self, x, mask=None):
        x = x + self.attn(x, mask)
        return x + self.mha(x, x, x, need_weights=False)[0]


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.blocks = nn.ModuleList(Block(config, True) for _ in range(4))

    def forward(self, x, mask=None):
        for block in self.blocks:
            x = block(x, mask)
        return x
'''

IMPORTER = '''import torch
from model import GPT, Block, Config, CausalSelfAttention


def run{i}(tokens):
    model = GPT(Config())
    mask = torch.ones(tokens.shape[1], tokens.shape[1], dtype=torch.bool).tril()
    return model(tokens, mask)


class Adapter{i}(Block):
    def forward(self, x, mask=None):
        return super().forward(x, mask)


def attend{i}(x):
    return CausalSelfAttention(Config(), dropout=0.1)(x)


block{i} = Block(Config(), batch_first=True)
probe{i} = torch.nn.MultiheadAttention(64, 8, batch_first=True)  # a trigger of its own: checked alone, it is parsed
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(MODEL)
    for i in range(IMPORTERS):
        (tmp_path / f"user{i}.py").write_text(IMPORTER.format(i=i))
    return tmp_path


@pytest.fixture
def parses(monkeypatch) -> Counter:
    """Each libcst parse, counted by the text parsed (`mhalint.parse.lazy.cst` may be a stand-in holding its own copy)."""
    counted: Counter = Counter()
    real = libcst.parse_module

    def parse(text, *args, **kwargs):
        counted[text] += 1
        return real(text, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", parse)
    monkeypatch.setattr(sys.modules["mhalint.parse.lazy"].cst, "parse_module", parse, raising=False)
    return counted


@pytest.mark.parametrize("given", ["the whole project", "the model file alone", "one importer alone"])
def test_each_file_is_parsed_at_most_once(project: Path, parses: Counter, given: str):
    paths = {"the whole project": [project], "the model file alone": [project / "model.py"],
             "one importer alone": [project / "user7.py"]}[given]
    Checker(list(load_rules().values())).check_paths(paths, jobs=1)
    assert parses, "nothing was parsed: the test no longer exercises the analyses"
    assert max(parses.values()) == 1, {text.splitlines()[-1]: count for text, count in parses.items() if count > 1}
    if given != "one importer alone":  # what the model's classes get is read from every importer
        assert len(parses) == IMPORTERS + 1
