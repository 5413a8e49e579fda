"""A run's first pass over its files: each read once, its trigger words looked for in code (the prefilter), its
`from ... import` lines collected for the project index, and its digest taken for the cache.

On the 3-million-line speed corpus this pass is about 1.3 s of CPU, and in one process it held every other core
idle until the parse began (on 4 cores, by the serial profile's shares, it would be about a quarter of the wall
time; measured on 2: 1.25 s to 0.83 s). With enough files and cores it runs in forked worker processes, a chunk
of files at a time, and the results are handed on in the files' order.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple

from mhalint.configuration.schema import pool_size
from mhalint.parse.source import regular_only
from mhalint.run import deep_stack

if TYPE_CHECKING:
    from mhalint.analysis.project import Project
    from mhalint.finding import Finding
    from mhalint.run.prefilter import Prefilter

IN_WORKERS_FROM = 400  # files to read: below this, forking costs more than it saves
_CHUNK = 64  # files a worker reads per task: few enough messages, small enough for the cores to finish together


class Scanned(NamedTuple):
    raw: bytes | None  # the bytes of a file to parse; None for the others (not kept)
    stat: os.stat_result | None  # None when the file changed while it was read: nothing may be cached for it
    digest: str | None  # for the cache, when there is one
    matched: bool  # a trigger in code, or a notebook (opened even to say it is broken)
    imports: tuple | None  # its entries for the project index (Project.imports_in), when collected
    syntax: list[Finding] | None = None  # a file not matched, read by `syntax` when given: what it found


Syntax = Callable[[bytes, str], "list[Finding]"]  # a file's bytes and path -> what its syntax check found


def scan(paths: list[str], prefilter: Prefilter, project: Project, digest: Callable[[bytes], str] | None,
         jobs: int | None, syntax: Syntax | None = None) -> Iterator[tuple[str, Scanned | str]]:
    """(path, what was read of it, or why it could not be read) for each path, in order. One process collects
    imports only from the first file that matches on (a run without a trigger never asks for the index); workers collect
    them for every file, as they cannot know what the others found. `jobs`: as in Checker.check_paths. `syntax`:
    given, it reads the files the prefilter does not match (`--parse-all`)."""
    size = pool_size(jobs, -(-len(paths) // _CHUNK))
    if size >= 2 and len(paths) >= IN_WORKERS_FROM:
        from mhalint.run.workers import can_fork

        if can_fork():
            yield from _in_workers(paths, prefilter, project, digest, syntax, size)
            return
    learn = False
    for path in paths:
        scanned = _scan_one(path, prefilter, project, digest, syntax, learn)
        learn = learn or (not isinstance(scanned, str) and scanned.matched)
        yield path, scanned


def read(path: str) -> tuple[bytes, os.stat_result | None]:
    """The file's bytes and its status; the status is None when the file changed while it was read (its status
    before and after differ), so that no findings are cached under a status whose bytes were not the ones read.
    Only a regular file is read: never a FIFO or a device."""
    with open(path, "rb", opener=regular_only) as handle:
        before = os.fstat(handle.fileno())
        raw = handle.read()
        after = os.fstat(handle.fileno())
    unchanged = (before.st_size, before.st_mtime_ns, before.st_ctime_ns) == \
        (after.st_size, after.st_mtime_ns, after.st_ctime_ns) and len(raw) == after.st_size
    return raw, after if unchanged else None


def _scan_one(path: str, prefilter: Prefilter, project: Project, digest: Callable[[bytes], str] | None,
              syntax: Syntax | None, learn: bool) -> Scanned | str:
    try:
        raw, stat = read(path)
    except OSError as error:
        return error.strerror or str(error)
    matched = path.endswith(".ipynb") or prefilter.matches(raw)
    return Scanned(raw if matched else None, stat, digest(raw) if digest is not None and stat is not None else None,
                   matched, project.imports_in(path, raw) if learn or matched else None,
                   syntax(raw, path) if syntax is not None and not matched else None)


_JOB: tuple | None = None  # (prefilter, project, digest, syntax): inherited by the forked workers, never pickled


def _in_workers(paths: list[str], prefilter: Prefilter, project: Project, digest: Callable[[bytes], str] | None,
                syntax: Syntax | None, jobs: int) -> Iterator[tuple[str, Scanned | str]]:
    from mhalint.run.workers import WorkerLost, Workers

    global _JOB
    chunks = [paths[start:start + _CHUNK] for start in range(0, len(paths), _CHUNK)]
    done: dict[int, list | None] = {}
    handed_on = 0  # the chunks before this one have been yielded
    project.name_modules()  # once, before the fork, instead of once in each worker
    deep_stack.stop()  # no thread of ours may be running when the workers are forked
    _JOB = (prefilter, project, digest, syntax)
    try:
        with Workers(_scan_chunk, jobs) as pool:
            submitted = running = 0
            while submitted < len(chunks) or running:
                while submitted < len(chunks) and running < jobs:
                    pool.submit(submitted, chunks[submitted])
                    submitted += 1
                    running += 1
                for index, outcome in pool.finished():
                    running -= 1
                    done[index] = None if isinstance(outcome, WorkerLost) else outcome
                while handed_on in done:  # in the files' order, while the workers go on
                    outcome = done.pop(handed_on)
                    if outcome is None:  # its worker died (a crash, the system's memory killer): read here instead
                        outcome = _scan_all(chunks[handed_on], prefilter, project, digest, syntax)
                    yield from outcome
                    handed_on += 1
    finally:
        _JOB = None


def _scan_chunk(paths: list[str]) -> list[tuple[str, Scanned | str]]:
    return _scan_all(paths, *_JOB)


def _scan_all(paths: list[str], prefilter: Prefilter, project: Project, digest: Callable[[bytes], str] | None,
              syntax: Syntax | None) -> list[tuple[str, Scanned | str]]:
    return [(path, _scan_one(path, prefilter, project, digest, syntax, True)) for path in paths]
