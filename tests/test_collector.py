"""mhalint.run.collector: the cyclic collector paused around a file's check, its survivors frozen in a batch and
nothing held back once the batch ends."""

from __future__ import annotations

import gc
import weakref

import pytest

from mhalint.run import collector


class Node:
    """A cycle: only the cyclic collector frees it."""

    def __init__(self):
        self.me = self


@pytest.fixture
def clean_collector():
    """Each test starts with the collector on and nothing frozen, and leaves it so."""
    enabled = gc.isenabled()
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    if not enabled:
        gc.disable()


def test_paused_turns_the_collector_off_and_back_on(clean_collector):
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # outside a batch nothing is frozen


def test_paused_leaves_a_collector_that_was_off_off(clean_collector):
    gc.disable()
    with collector.paused():
        pass
    assert not gc.isenabled()


def test_a_batch_freezes_what_a_file_leaves_alive_and_unfreezes_at_its_end(clean_collector):
    with collector.batch():
        with collector.paused():
            kept = [Node() for _ in range(100)]
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_freeze_count() == 0


def test_a_cycle_left_by_a_file_is_freed_once_the_batch_ends(clean_collector):
    with collector.batch():
        with collector.paused():
            dropped = weakref.ref(Node())
        gc.collect()
        assert dropped() is not None  # frozen: no pass sees it during the batch
    gc.collect()
    assert dropped() is None


def test_a_full_pass_frees_cycles_once_the_frozen_objects_have_grown(clean_collector, monkeypatch):
    monkeypatch.setattr(collector, "_SMALLEST_GROWTH", 1_000)
    with collector.batch():
        with collector.paused():
            dropped = weakref.ref(Node())
        assert dropped() is not None
        with collector.paused():
            grown = [Node() for _ in range(2_000)]  # alive: they count as growth
        assert dropped() is None  # the full pass after this file found the first file's cycle
        assert len(grown) == 2_000
