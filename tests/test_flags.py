"""Branches a call cannot take (analysis/flags.py): a test of a parameter whose value the call, its default or
every caller fixes. What such a branch binds or returns does not reach the attention: `if grid:` with grid left
at False, `if return_weights: return x, w` for a caller that never asks."""

from __future__ import annotations

import pytest

from mhalint.finding import Severity

BLOCK = """\
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.attn = nn.MultiheadAttention(width, 8)

        def forward(self, x, grid=False):
            if grid:  # a feature map
                n, c, h, w = x.shape
                x = x.flatten(2).permute(2, 0, 1)
            return self.attn(x, x, x)[0]

    class Model(nn.Module):
        def __init__(self, width, grid_input):
            super().__init__()
            self.block = Block(width)
            self.grid_input = grid_input

        def forward(self, tokens):
            {unpack} = tokens.shape
            return self.block(tokens{flag})
"""


@pytest.mark.parametrize(("unpack", "flag", "severity"), [
    ("b, t, c", "", Severity.ERROR),
    ("t, b, c", "", Severity.INFO),
    ("t, b, c", ", grid=False", Severity.INFO),
    ("b, t, c", ", grid=self.grid_input", Severity.WARNING),  # either branch may run: the two disagree
])
def test_a_branch_on_a_flag_the_caller_leaves_false_does_not_reach_the_attention(lint, unpack, flag, severity):
    [finding] = lint(BLOCK.format(unpack=unpack, flag=flag), select="MHA001")
    assert finding.severity == severity
    if severity != Severity.WARNING:
        assert f"`{unpack} = tokens.shape`" in finding.message


STACK = """\
    import torch.nn as nn

    class Layer(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.attn = nn.MultiheadAttention(width, 8)

        def forward(self, x, return_weights=False):
            out, weights = self.attn(x, x, x)
            if return_weights:
                return out, weights
            return out

    class Stack(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.layers = nn.ModuleList([Layer(width) for _ in range(4)])

        def forward(self, x):
            {unpack} = x.shape
            for layer in self.layers:
                x = layer(x)
            return x
"""


@pytest.mark.parametrize(("unpack", "severity"), [("b, t, c", Severity.ERROR), ("t, b, c", Severity.INFO)])
def test_a_return_for_a_flag_the_loop_never_passes_does_not_stop_the_loops_trace(lint, unpack, severity):
    [finding] = lint(STACK.format(unpack=unpack), select="MHA001")
    assert finding.severity == severity and f"`{unpack} = x.shape`" in finding.message
