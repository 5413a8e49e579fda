"""Methods that return the module (`.eval()`, `.to(device)`) and wrappers that pass calls on to it
(`torch.compile`, `DataParallel`, `DistributedDataParallel`, `torch.jit.script`): the module they give back is the
construction, and their calls are its calls, so the data layout decides the site (issue 35, item 3)."""

from __future__ import annotations

import pytest

from mhalint.finding import Severity

CODE = "MHA001"
BATCH_FIRST = "B, T, C = x.shape"
SEQUENCE_FIRST = "T, B, C = x.shape"


@pytest.fixture
def check(lint):
    def run(source: str):
        found = lint(source, CODE, min_severity="info")
        assert all(f.code == CODE for f in found), found
        return [(f.line, f.severity, f.message) for f in found]
    return run


def function_using(built: str, unpack: str) -> str:
    return f"""
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

def run(x, device):
    attn = {built}
    {unpack}
    return attn(x, x, x)[0]
"""


CHAINS = ["nn.MultiheadAttention(64, 8).eval()", "nn.MultiheadAttention(64, 8).to(device).half()",
          "nn.MultiheadAttention(64, 8).cuda().train(False)", "nn.MultiheadAttention(64, 8).requires_grad_(False)",
          "torch.compile(nn.MultiheadAttention(64, 8))", "torch.jit.script(nn.MultiheadAttention(64, 8).eval())",
          "nn.DataParallel(nn.MultiheadAttention(64, 8)).cuda()", "DDP(nn.MultiheadAttention(64, 8).to(device))"]


@pytest.mark.parametrize("built", CHAINS)
def test_a_chained_or_wrapped_module_with_batch_first_data_is_an_error(check, built):
    found = check(function_using(built, BATCH_FIRST))
    assert [(line, severity) for line, severity, _ in found] == [(7, Severity.ERROR)]
    assert "gets batch-first data (`B, T, C = x.shape`, line 8) but batch_first is False" in found[0][2]


@pytest.mark.parametrize("built", CHAINS)
def test_a_chained_or_wrapped_module_with_sequence_first_data_is_info(check, built):
    assert [(line, severity) for line, severity, _ in check(function_using(built, SEQUENCE_FIRST))] == \
        [(7, Severity.INFO)]


@pytest.mark.parametrize("built", ["nn.MultiheadAttention(64, 8, batch_first=True).eval()",
                                   "torch.compile(nn.MultiheadAttention(64, 8, batch_first=True))"])
def test_a_wrapped_batch_first_module_with_batch_first_data_is_clean(check, built):
    assert check(function_using(built, BATCH_FIRST)) == []


MODEL = """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 8)

    def forward(self, x):
        return self.attn(x, x, x)[0]

def main(x, device, rank):
    model = Encoder()
    {rebinding}
    {unpack}
    return model(x)
"""


@pytest.mark.parametrize("rebinding", [
    "model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])",
    "model = model.to(device)",
    "model = torch.compile(model.eval())",
])
def test_a_model_rebound_to_its_wrapper_still_runs_its_forward(check, rebinding):
    found = check(MODEL.format(rebinding=rebinding, unpack=BATCH_FIRST))
    assert [(line, severity) for line, severity, _ in found] == [(8, Severity.ERROR)]
    found = check(MODEL.format(rebinding=rebinding, unpack=SEQUENCE_FIRST))
    assert [(line, severity) for line, severity, _ in found] == [(8, Severity.INFO)]


def test_a_wrapper_stored_on_self_is_the_module_it_wraps(check):
    found = check("""
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.compile(nn.MultiheadAttention(64, 8))

    def forward(self, x):
        B, T, C = x.shape
        return self.attn(x, x, x)[0]
""")
    assert [(line, severity) for line, severity, _ in found] == [(8, Severity.ERROR)]


def test_a_tensor_method_of_the_same_name_is_not_a_module(check):
    """`.float()` and `.to()` on data give no module: the call of a tensor finds no construction."""
    found = check("""
import torch.nn as nn

def run(x, device):
    attn = nn.MultiheadAttention(64, 8)
    weights = x.float().to(device)
    B, T, C = x.shape
    return weights(x)
""")
    assert [(line, severity) for line, severity, _ in found] == [(5, Severity.WARNING)]


def test_a_wrapper_of_something_unknown_stays_unknown(check):
    """A module built in another installed package, wrapped: nothing is paired, the site keeps its warning."""
    found = check("""
import torch
import torch.nn as nn
from elsewhere import make_model

def run(x):
    attn = nn.MultiheadAttention(64, 8)
    model = torch.compile(make_model(attn))
    B, T, C = x.shape
    return model(x)
""")
    assert [(line, severity) for line, severity, _ in found] == [(7, Severity.WARNING)]
