"""Run a function on a thread with a large stack, started once per process and reused.

libcst's parser and the rule traversal recurse once per nesting level, and deep but valid code must not overflow
the main thread's stack (a crash, not an exception). Starting a thread with a 256 MiB stack costs about as much as
checking a small file, so one such thread serves every file; a forked worker starts its own.
"""

from __future__ import annotations

import os
import queue
import signal
import threading

STACK_BYTES = 256 * 2**20

_requests: queue.SimpleQueue = queue.SimpleQueue()
_thread: threading.Thread | None = None
_started_in: int | None = None  # the pid whose _thread serves _requests
_starting = threading.Lock()


def run(function, *args):
    """function(*args) on the large-stack thread; its exception is raised here. Calls from several threads are
    served one at a time. The wait can be interrupted (Ctrl-C): the thread finishes that call and takes the next."""
    _ensure_thread()
    outcome = _Outcome()
    _requests.put((function, args, outcome))
    return outcome.result()


def stop() -> None:
    """End the thread (it finishes the call it is in): before forking, so that the child copies no thread's state,
    which is what makes fork unsafe in a multi-threaded process. The next call starts a new one."""
    global _thread, _started_in
    with _starting:
        if _started_in == os.getpid() and _thread is not None:
            _requests.put(None)
            _thread.join()
        _thread = _started_in = None


def _ensure_thread() -> None:
    global _requests, _thread, _started_in
    with _starting:
        if _started_in == os.getpid():
            return
        _requests = queue.SimpleQueue()  # after a fork, requests queued for the parent's thread are not ours
        previous = threading.stack_size(STACK_BYTES)
        try:
            _thread = threading.Thread(target=_serve, args=(_requests,), name="mhalint-check", daemon=True)
            _thread.start()
        finally:
            threading.stack_size(previous)
        _started_in = os.getpid()


def _serve(requests: queue.SimpleQueue) -> None:
    _leave_signals_to_the_main_thread()
    while True:
        request = requests.get()
        if request is None:
            return
        function, args, outcome = request
        try:
            outcome.value = function(*args)
        except BaseException as error:  # re-raised in the caller's thread
            outcome.error = error
        outcome.done.set()


def _leave_signals_to_the_main_thread() -> None:
    """Block Ctrl-C and SIGTERM in this thread. The kernel hands a signal sent to the process to any thread that
    does not block it; Python runs the handler in the main thread, which waits for this one in a lock acquire that
    only a signal delivered to it interrupts. Delivered here, the signal left that wait asleep: the run went on,
    or hung when this thread could not finish (once in a few hundred CI runs of tests/test_interrupts.py)."""
    if hasattr(signal, "pthread_sigmask"):  # not on Windows, where signals reach the main thread only
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


class _Outcome:
    """One call's result or exception, handed from the thread to its caller (concurrent.futures' Future, without
    the import of concurrent.futures and logging: a few ms of a one-file run)."""

    def __init__(self):
        self.done = threading.Event()
        self.value = self.error = None

    def result(self):
        self.done.wait()
        if self.error is not None:
            error, self.error = self.error, None  # no cycle through the traceback's frames
            raise error
        return self.value
