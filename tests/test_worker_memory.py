"""A worker hands a file's trees back to the system only once it holds more than the threshold: the collection it
takes walks every object, too dear after each of thousands of small files (issue 18)."""

from __future__ import annotations

import gc

import pytest

from mhalint import engine


@pytest.mark.parametrize(("resident", "collects"), [
    (engine._RELEASE_ABOVE - 1, False),  # a worker that parsed only small files keeps its pages
    (engine._RELEASE_ABOVE, True),  # one that parsed a large file gives them back
    (None, True),  # where /proc does not say, after every file, as before the threshold
])
def test_a_worker_releases_memory_only_past_the_threshold(monkeypatch: pytest.MonkeyPatch, resident: int | None,
                                                          collects: bool):
    collected = []
    monkeypatch.setattr(engine, "resident_bytes", lambda: resident)
    monkeypatch.setattr(gc, "collect", lambda *generation: collected.append(generation) or 0)
    engine._release_memory()
    assert bool(collected) is collects


def test_the_resident_size_is_read_where_proc_says():
    resident = engine.resident_bytes()
    if resident is None:
        pytest.skip("no /proc/self/statm here")
    assert 10 * 2**20 < resident < 64 * 2**30  # a Python process with mhalint imported, in bytes
