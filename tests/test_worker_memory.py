"""What a file's check leaves in memory (issue 18): its tree is freed when the check ends, not by the cyclic
collector; and a worker hands freed memory back to the system only once it holds more than the threshold (the
collection that takes walks every object, too dear after each of thousands of small files)."""

from __future__ import annotations

import gc

import pytest

from mhalint.run import parallel


@pytest.mark.parametrize(("resident", "collects"), [
    (parallel._RELEASE_ABOVE - 1, False),  # a worker that parsed only small files keeps its pages
    (parallel._RELEASE_ABOVE, True),  # one that parsed a large file gives them back
    (None, True),  # where /proc does not say, after every file, as before the threshold
])
def test_a_worker_releases_memory_only_past_the_threshold(monkeypatch: pytest.MonkeyPatch, resident: int | None,
                                                          collects: bool):
    collected = []
    monkeypatch.setattr(parallel, "resident_bytes", lambda: resident)
    monkeypatch.setattr(gc, "collect", lambda *generation: collected.append(generation) or 0)
    parallel._release_memory()
    assert bool(collected) is collects


def test_the_resident_size_is_read_where_proc_says():
    resident = parallel.resident_bytes()
    if resident is None:
        pytest.skip("no /proc/self/statm here")
    assert 10 * 2**20 < resident < 64 * 2**30  # a Python process with mhalint imported, in bytes


SOURCE = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


def padding(tokens, pad_id):
    return tokens == pad_id


class Encoder(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads)

    def forward(self, x, tokens):
        b, t, c = x.shape
        mask = padding(tokens, 0)
        out, _ = self.mha(x, x, x, key_padding_mask=mask)
        return F.scaled_dot_product_attention(out, out, out, attn_mask=mask)


def run(encoder, x, tokens):
    return encoder(x, tokens)
'''


def test_a_checked_file_leaves_no_tree_for_the_cyclic_collector():
    """The scopes and the analyses' readers point at one another; the engine breaks those cycles when a file is
    done, so its libcst tree is freed at once instead of by a collector pass over all of it after each file."""
    import libcst

    from mhalint.rule import load_rules
    from mhalint.run.engine import Checker

    checker = Checker(list(load_rules().values()))
    assert checker.check_source(SOURCE.encode(), "model.py")  # the analyses ran: there are findings
    gc.collect()
    enabled, flags = gc.isenabled(), gc.get_debug()
    gc.disable()
    try:
        checker.check_source(SOURCE.encode(), "model.py")
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector would free is kept in gc.garbage, to look at
        gc.collect()
        left = [type(found).__name__ for found in gc.garbage if isinstance(found, libcst.CSTNode)]
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert left == []
