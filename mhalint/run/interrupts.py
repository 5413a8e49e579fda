"""Interrupts as exceptions: Ctrl-C (SIGINT) raises `Interrupted`, a KeyboardInterrupt, and SIGTERM `Terminated`.

Both are BaseExceptions, so `except Exception` never swallows them and every `finally` on the way out runs: a
temporary file is removed, worker processes are stopped, the cache index is left as it was. The command line
turns them into exit codes 130 and 143 (128 + the signal's number, as a shell reports a process the signal
killed). This module imports nothing of mhalint, so that any module can raise or catch them.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143
_HELD = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT arrived while `raised_as_exceptions()` was in effect (Ctrl-C).

    A subclass, not KeyboardInterrupt itself: CPython remembers a KeyboardInterrupt (exactly that class) that
    passed through an `exec` or `eval` of a string, as when a dataclass is created during an import, and a
    program run with `python -m` then kills itself with SIGINT at exit even though the exception was caught
    and the program asked for exit code 130."""


class Terminated(BaseException):
    """SIGTERM arrived while `raised_as_exceptions()` was in effect (a CI job cancelled, `kill PID`)."""


def behind(error: BaseException) -> KeyboardInterrupt | Terminated | None:
    """The interrupt an exception stands for: Python 3.11 wraps what a `__set_name__` raises while a class is
    created (as when libcst's dataclasses are made during its import) in a RuntimeError whose cause is it, so a
    signal that lands there arrives as that error."""
    while error is not None:
        if isinstance(error, (KeyboardInterrupt, Terminated)):
            return error
        error = error.__cause__
    return None


def _raise(exception: type[BaseException]):
    def handler(signum, frame) -> None:
        raise exception()
    return handler


@contextlib.contextmanager
def raised_as_exceptions() -> Iterator[None]:
    """While the block runs, SIGINT raises `Interrupted` and SIGTERM `Terminated` in the main thread; each only
    where it has its default handling (a signal the parent process set to be ignored stays ignored), and the
    previous handlers are put back after. Outside the main thread, where Python cannot set handlers, nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum, default, exception in ((signal.SIGINT, signal.default_int_handler, Interrupted),
                                       (signal.SIGTERM, signal.SIG_DFL, Terminated)):
        if signal.getsignal(signum) is default:
            previous[signum] = signal.signal(signum, _raise(exception))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back while the block runs, then delivered: for the few steps that must not stop
    half-way (writing and renaming the cache index, forking or stopping the worker processes), so that an
    interrupt never strands a temporary file or a worker. Outside the main thread signals are not delivered to
    Python code anyway, and the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {}
    for signum in _HELD:
        handler = signal.getsignal(signum)
        if handler is None:  # set outside Python: it could not be put back
            continue
        previous[signum] = signal.signal(signum, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if received:
            signal.raise_signal(received[0])  # the handler now in place runs (raises) here
