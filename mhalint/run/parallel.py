"""A run's files over worker processes: forked from the checker, so that the rules need not be pickled, the largest
files first and never two of the heaviest at once, each worker handing memory back after a large file."""

from __future__ import annotations

import functools
import gc
from typing import TYPE_CHECKING, Callable

from mhalint.finding import Finding
from mhalint.parse.lazy import cst
from mhalint.run import deep_stack
from mhalint.run.budget import resident_bytes
from mhalint.run.diagnostics import lost

if TYPE_CHECKING:
    import os

    from mhalint.run.engine import Checker
    from mhalint.run.workers import Workers

PARALLEL_FROM = 8  # files to parse: below this, starting processes costs more than it saves


def run_in_workers(checker: Checker, files: list[tuple[str, bytes, os.stat_result | None]], jobs: int,
                   checked: Callable[[int, tuple[list[Finding], list[str], bool]], None]) -> None:
    """`checked(index, outcome)` for each file, checked by `checker` in `jobs` forked worker processes."""
    from mhalint.run.workers import Workers

    deep_stack.stop()  # no thread of ours may be running when the workers are forked
    global _FORKED_CHECKER
    _FORKED_CHECKER = checker  # inherited by the forked workers, so rules need not be pickled
    cst.Module  # load libcst here, once, so that the workers share its pages instead of each loading a copy
    if checker.project is not None:
        checker.project.prepare()
    gc.freeze()  # and keep the collector from writing to (so copying) every shared object in each worker
    try:
        with Workers(_check_in_worker, jobs) as pool:
            _dispatch_by_size(pool, [(path, raw) for path, raw, _ in files], jobs, checked)
    finally:
        gc.unfreeze()  # a long-lived caller (an editor, flake8) must get its garbage collected again


def _dispatch_by_size(pool: Workers, items: list[tuple[str, bytes]], jobs: int, checked) -> None:
    """`checked(index, outcome)` for each item as its worker finishes it, one file per task, largest first in
    two lanes.

    Time: a 5,000-line file takes as long as fifty small ones; handed out last, it would leave the other workers
    idle. Memory: a worker holds the libcst tree of its file, about 25 KB a line, so two of the largest files at
    once set the peak. The largest files that make up 1/jobs of the bytes are heavy and go one at a time, beside
    the light ones, each lane in descending order; a second heavy file starts only when no light one is left."""
    from mhalint.run.workers import WorkerLost

    order = sorted(range(len(items)), key=lambda index: -len(items[index][1]))
    share = sum(len(raw) for _, raw in items) / jobs
    heavy: list[int] = []
    heavy_bytes = 0
    for index in order:
        if heavy_bytes >= share:
            break
        heavy.append(index)
        heavy_bytes += len(items[index][1])
    is_heavy = set(heavy)
    light = [index for index in order if index not in is_heavy]
    running: set[int] = set()
    while heavy or light or running:
        while len(running) < jobs and (heavy or light):
            heavy_busy = not is_heavy.isdisjoint(running)
            queue = heavy if heavy and (not heavy_busy or not light) else light
            index = queue.pop(0)
            pool.submit(index, items[index])
            running.add(index)
        for index, outcome in pool.finished():
            running.remove(index)
            if isinstance(outcome, WorkerLost):
                outcome = lost(items[index][0], outcome)
            checked(index, outcome)


_FORKED_CHECKER: Checker | None = None


def _check_in_worker(item: tuple[str, bytes]) -> tuple[list[Finding], list[str], bool]:
    try:
        return _FORKED_CHECKER._check_one(*item)
    finally:
        _release_memory()


def _release_memory() -> None:
    """Hand the memory of the last file's trees back to the system once a worker holds more than
    _RELEASE_ABOVE. Python's allocator and glibc's keep freed pages, so a worker that once parsed a 5,000-line
    file (about 130 MB of libcst nodes) would hold them through every later file; collecting and trimming brings it
    back to about 50 MB. Below the threshold the collection (a walk over every object, after each file) costs more
    than the pages are worth. Where the resident size cannot be read, after every file; elsewhere than glibc, a
    no-op."""
    resident = resident_bytes()
    if resident is not None and resident < _RELEASE_ABOVE:
        return
    gc.collect()
    malloc_trim = _malloc_trim()
    if malloc_trim is not None:
        malloc_trim(0)


_RELEASE_ABOVE = 150 * 2**20  # with two workers, keeps a cold run's peak (PSS) near 265 MB instead of 300 MB


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None where there is none."""
    import ctypes  # only a worker that has grown loads it

    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
