"""Forked worker processes, one pipe each, that stop at once when the run does.

Why not concurrent.futures.ProcessPoolExecutor: its workers share one result queue guarded by a lock, and its
shutdown joins them and a manager thread. A Ctrl-C from a terminal reaches the whole process group, so a worker
could be interrupted while holding that lock, and the parent then waited in shutdown forever (issue 16). Here:

- each worker has its own pipe, so no worker can block another, and one that dies shows up as the end of its
  pipe (its file is then reported, and a new worker takes its place);
- workers ignore SIGINT (the parent decides what an interrupt does) and keep SIGTERM's default (they write
  nothing, so dying at once is safe);
- the parent kills them (SIGKILL, which nothing can block) whenever it leaves the pool by an exception,
  KeyboardInterrupt and `Terminated` included, and forks and kills with interrupts held back, so that none is
  ever left running unseen;
- a worker also dies with its parent: the parent's end of its pipe closes (it reads EOF once idle), and on Linux
  the kernel kills it at once (PR_SET_PDEATHSIG), even when the parent was killed with SIGKILL mid-file.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import signal
from dataclasses import dataclass
from typing import Any, Callable, Hashable

from mhalint.run import interrupts

_STOP_SECONDS = 5  # how long idle workers get to exit on their own at the end of a run before they are killed


def can_fork() -> bool:
    """Whether this platform can fork workers (not Windows)."""
    return "fork" in multiprocessing.get_all_start_methods()


class WorkerLost(Exception):
    """The worker process checking an item died (killed by the system for memory, a crash in native code)."""

    def __init__(self, exitcode: int | None):
        self.exitcode = exitcode
        how = f"killed by signal {-exitcode}" if exitcode is not None and exitcode < 0 else f"exit code {exitcode}"
        super().__init__(f"the worker process died ({how})")


@dataclass
class _Worker:
    process: Any  # multiprocessing's forked Process
    connection: multiprocessing.connection.Connection
    key: Hashable | None = None  # what it is working on; None when idle


class Workers:
    """`size` forked processes that run `work(item)`; use as a context manager.

    `submit(key, item)` hands an item to an idle worker; `finished()` waits until at least one busy worker is
    done and returns `(key, outcome)` pairs. An exception `work` raised is
    raised by `finished()`; an item whose worker died gets a `WorkerLost` as its outcome."""

    def __init__(self, work: Callable[[Any], Any], size: int):
        self._work = work
        self._size = size
        self._context = multiprocessing.get_context("fork")
        self._workers: list[_Worker] = []

    def __enter__(self) -> Workers:
        try:
            for _ in range(self._size):
                self._start()
        except BaseException:  # an interrupt held back while one was forked: the others are stopped too
            self._stop(kill=True)
            raise
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self._stop(kill=kind is not None)

    def submit(self, key: Hashable, item: Any) -> None:
        """Hand `item` to an idle worker; there must be one (at most `size` items are out at once)."""
        worker = next(worker for worker in self._workers if worker.key is None)
        try:
            worker.connection.send(item)
        except OSError:  # it died while idle: its replacement takes the item
            self._replace(worker)
            worker = self._workers[-1]
            worker.connection.send(item)
        worker.key = key

    def finished(self) -> list[tuple[Hashable, Any]]:
        busy = {worker.connection: worker for worker in self._workers if worker.key is not None}
        outcomes = []
        for connection in multiprocessing.connection.wait(list(busy)):
            worker = busy[connection]
            key, worker.key = worker.key, None
            try:
                succeeded, outcome = connection.recv()
            except (EOFError, OSError):  # it died: its end of the pipe closed
                outcomes.append((key, WorkerLost(self._replace(worker))))
                continue
            if not succeeded:
                raise outcome
            outcomes.append((key, outcome))
        return outcomes

    def _start(self) -> None:
        with interrupts.deferred():  # a worker forked but not yet recorded would be left running
            ours, theirs = self._context.Pipe()
            inherited = [worker.connection for worker in self._workers] + [ours]
            process = self._context.Process(target=_serve, args=(self._work, theirs, inherited, os.getpid()),
                                            daemon=True, name="mhalint-worker")
            process.start()
            theirs.close()
            self._workers.append(_Worker(process, ours))

    def _replace(self, lost: _Worker) -> int | None:
        """Reap a dead worker and start another in its place; its exit code."""
        lost.connection.close()
        lost.process.join()
        self._workers.remove(lost)
        self._start()
        return lost.process.exitcode

    def _stop(self, kill: bool) -> None:
        """Idle workers read the end of their pipe and exit; at an error or an interrupt, or when they do not
        exit in time, they are killed. Every worker is reaped before this returns."""
        with interrupts.deferred():  # a second Ctrl-C must not leave the rest running
            for worker in self._workers:
                worker.connection.close()
                if kill:
                    worker.process.kill()
            for worker in self._workers:
                worker.process.join(None if kill else _STOP_SECONDS)
                if worker.process.exitcode is None:
                    worker.process.kill()
                    worker.process.join()
            self._workers.clear()


def _serve(work: Callable[[Any], Any], connection, inherited: list, parent: int) -> None:
    """A worker's life: items from the pipe, outcomes back, until the parent closes it or dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, copied by the fork
    _die_with(parent)
    for other in inherited:  # the parent's ends of the pipes, copied by the fork: only the parent may hold them
        other.close()
    while True:
        try:
            item = connection.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, work(item))
        except Exception as error:  # raised again in the parent
            reply = (False, error)
        try:
            connection.send(reply)
        except OSError:  # the parent is gone
            return
        except Exception as error:  # an exception that cannot be pickled
            connection.send((False, RuntimeError(f"{reply[1]!r} (and it could not be sent back: {error})")))


_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Ask Linux to kill this process when its parent dies; elsewhere the closed pipe ends it once it is idle."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)
