"""mhalint/run/deep_stack.py: one long-lived large-stack thread per process runs each file's check."""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest

from mhalint.run import deep_stack


def _depth(n: int) -> int:
    """Each level passes through C (sum, map), as libcst's parser does, so it uses the C stack: 100,000 levels
    overflow a main thread's 8 MiB stack (a segmentation fault)."""
    return 0 if n == 0 else 1 + sum(map(_depth, [n - 1]))


def _recurse(levels: int) -> int:
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(levels + 1000)
    try:
        return _depth(levels)
    finally:
        sys.setrecursionlimit(previous)


def test_calls_share_one_thread_that_is_not_the_callers():
    first = deep_stack.run(threading.get_ident)
    assert first != threading.get_ident()
    assert deep_stack.run(threading.get_ident) == first


def test_recursion_far_deeper_than_the_main_threads_stack_allows():
    assert deep_stack.run(_recurse, 100_000) == 100_000


def test_an_exception_is_raised_in_the_caller_and_the_thread_serves_on():
    with pytest.raises(ZeroDivisionError):
        deep_stack.run(lambda: 1 / 0)
    assert deep_stack.run(lambda: 41 + 1) == 42


def test_stop_ends_the_thread_and_the_next_call_starts_another():
    before = deep_stack.run(threading.current_thread)
    assert [t for t in threading.enumerate() if t.name == "mhalint-check"] == [before]
    deep_stack.stop()
    assert not before.is_alive()
    assert not [t for t in threading.enumerate() if t.name == "mhalint-check"]
    assert deep_stack.run(threading.current_thread) is not before  # (an ident may be reused; the object is not)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_thread():
    deep_stack.run(int)  # the parent's thread exists; the child has only a copy of its state
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, b"ok" if deep_stack.run(_recurse, 50_000) == 50_000 else b"bad")
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 16) == b"ok" and os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_the_check_thread_leaves_ctrl_c_and_sigterm_to_the_main_thread():
    """A signal sent to the process goes to a thread that does not block it; the main thread, waiting for the check
    thread, is woken only by one delivered to it: the check thread blocks both, and the main thread neither."""
    blocked_there = deep_stack.run(signal.pthread_sigmask, signal.SIG_BLOCK, [])
    assert {signal.SIGINT, signal.SIGTERM} <= blocked_there
    assert not {signal.SIGINT, signal.SIGTERM} & signal.pthread_sigmask(signal.SIG_BLOCK, [])
