"""The cyclic garbage collector around the check of one file.

A parse allocates hundreds of thousands of nodes, and each allocation-triggered pass would walk the growing tree
again (about 15% of a parse), so the collector is off while a file is checked. The tree holds no cycles and the
engine breaks those the analyses build on it (ModuleContext.release), so most of the file's objects are freed by
reference counting when the check lets go of them.

What outlives the check is mostly the trees the project keeps for later files' analyses (Project.checked): tens of
thousands of objects a file, which the collector's young-generation passes would each walk once or twice more for
nothing (3% of a cold run on speed.py's corpus, benchmarks/profile.py's `collector`). So after each file what is
alive is frozen (`gc.freeze`: no pass walks it; reference counting still frees it). The few cycles that do escape
(libcst's `ast.literal_eval`, an analysis of another file) would then wait for the next unfreeze, so once what is
frozen has grown by as much again as it held after the last full pass, it is unfrozen and collected: memory stays
within about twice what is alive, like CPython's own rule for its oldest generation, and each object is walked a
bounded number of times on average.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_SMALLEST_GROWTH = 1_000_000  # objects: below this a full pass is not worth its walk
_batch = False  # a run over many files is under way (batch)
_alive = 0  # the objects frozen just after the last full pass
# the objects frozen since: each file's allocations less its deallocations (frozen objects freed later are not
# taken off: the young generation's count does not see them, so this is an upper bound)
_grown = 0


@contextlib.contextmanager
def batch() -> Iterator[None]:
    """A run over many files (Checker.check_paths, its workers included): the files' survivors are frozen, and
    everything is unfrozen when it ends, so that a caller in the same process (a test, the API) leaves with no
    cycle held back. (The console script's own start-up freeze is undone too: it freezes again before its exit.)"""
    global _batch, _alive, _grown
    outer, _batch, _alive, _grown = _batch, True, 0, 0
    try:
        yield
    finally:
        _batch = outer
        if not outer:
            gc.unfreeze()


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No collection while the body runs; in a batch, what it leaves alive is frozen after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if _batch:
                _freeze_survivors()
            gc.enable()


def _freeze_survivors() -> None:
    """Freeze; a full pass once the frozen objects have grown by as many as were alive after the last one. The
    young generation's count (allocations less deallocations since it was last emptied, which a freeze does) is
    the growth; gc.get_freeze_count walks the whole frozen list, so it is asked only after a full pass."""
    global _alive, _grown
    _grown += gc.get_count()[0]
    gc.freeze()
    if _grown > max(_alive, _SMALLEST_GROWTH):
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        _alive, _grown = gc.get_freeze_count(), 0
