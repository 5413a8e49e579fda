"""The time and memory one file's check may take (`file-time-limit`, `file-memory-limit`): past either, the file
is reported as MHA903 with the reason, and the run goes on with the other files.

Memory is judged before each parse, from the size of the syntax tree the file's tokens predict (a tree is built
in one native call that nothing can stop midway), and while the rules run, from the growth of the process's
resident memory. Time is judged cooperatively: a file is checked on the engine's large-stack thread (in the main
process or in a worker), where no signal is delivered (CPython runs signal handlers in the main thread only, and
never inside a native parse), so the walker calls `Limits.check()` at each node and the analyses call it in their
loops. Past the deadline it raises `TooComplex`, a BaseException, so that no rule's `except Exception` (nor the
walker's containment of a failing rule) swallows it. The same check raises `Cancelled` once a caller that no longer
wants the findings (the language server, when the buffer changed again) sets the check's cancel event.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class FileBudget:
    """The limits of one file's check: seconds of wall time, and megabytes of memory."""

    seconds: float = 60.0
    megabytes: int = 2000


# Measured (2026-12-02, libcst 1.9, CPython 3.11) as the growth of resident memory over one parse, on the files
# of the speed corpus, of 11 real repositories and generated ones: libcst's tree takes 1,600 bytes a token for the
# median of the 134 files whose tree is over 8 MB, 2,965 at most (torch's common_methods_invocations.py: 728 MB
# for 268,000 tokens); CPython's `ast` tree 260 bytes a token (median of 26 files over 4 MB), 600 at most. The
# largest figures are used: the prediction errs high (about 2x for the median file), never low on those files.
_LIBCST_BYTES_PER_TOKEN = 3000
_AST_BYTES_PER_TOKEN = 600
_TOKEN = re.compile(r"[A-Za-z_0-9]+|[^\sA-Za-z_0-9]")  # names, numbers and each punctuation mark: about a token
_TREES = {"ast": "Python's", "libcst": "libcst's"}
_MEMORY_EVERY = 0.25  # seconds between two readings of the resident memory
_CANCEL_EVERY = 0.02  # seconds between two looks at the cancel event: a stale check stops within about this


class TooComplex(BaseException):
    """A file's check passed its budget; the message is the reason MHA903 gives."""


class Cancelled(BaseException):
    """The caller set the check's cancel event: nobody wants this file's findings any more."""


class Limits:
    """The budget of the one file being checked, counted from when it was created."""

    def __init__(self, budget: FileBudget | None, cancel: threading.Event | None = None):
        """`cancel`: an event another thread sets to stop the check (Cancelled), or None."""
        self.budget = budget
        self._cancel = cancel
        now = time.monotonic()
        self._deadline = now + budget.seconds if budget is not None else math.inf
        self._resident_at_start = resident_bytes() if budget is not None else None
        self._next_memory_check = now + _MEMORY_EVERY if self._resident_at_start is not None else math.inf
        self._next = self._following(now)
        self._counted: str | None = None  # the text whose tokens were counted
        self._tokens = 0

    def check(self) -> None:
        """Raise TooComplex when the time is up or the memory the check has taken is over the limit, Cancelled
        when the cancel event is set: cheap enough to call at every node."""
        if time.monotonic() < self._next:
            return
        now = time.monotonic()
        if self._cancel is not None and self._cancel.is_set():
            raise Cancelled("the check was cancelled")
        if now >= self._deadline:
            raise TooComplex(f"checking it passed the {self.budget.seconds:g} s time limit (file-time-limit)")
        if now >= self._next_memory_check:
            self._next_memory_check = now + _MEMORY_EVERY
            used = (resident_bytes() or 0) - self._resident_at_start
            if used > self.budget.megabytes * 2**20:
                raise TooComplex(f"checking it took about {_megabytes(used)} of memory, over the "
                                 f"{self.budget.megabytes:,} MB limit (file-memory-limit)")
        self._next = self._following(now)

    def _following(self, now: float) -> float:
        """When `check` next has something to look at: the deadline, a memory reading or the cancel event."""
        cancel = now + _CANCEL_EVERY if self._cancel is not None else math.inf
        return min(self._deadline, self._next_memory_check, cancel)

    @contextlib.contextmanager
    def excluded(self):
        """What is not the file's (loading libcst, once per process): its time moves the deadline on, and the
        memory it takes is not counted."""
        start, resident = time.monotonic(), resident_bytes() if self._resident_at_start is not None else None
        try:
            yield
        finally:
            self._deadline += time.monotonic() - start
            self._next = self._following(time.monotonic())
            if resident is not None:
                self._resident_at_start += (resident_bytes() or resident) - resident

    def check_tree(self, text: str, parser: str) -> None:
        """Raise TooComplex when the syntax tree `parser` ("ast" or "libcst") would build for the file's `text`
        is predicted to pass the memory limit, before it is built."""
        expected = self._expected_tree(text, parser)
        if self.budget is not None and expected > self.budget.megabytes * 2**20:
            raise TooComplex(f"about {_megabytes(expected)} of {_TREES[parser]} syntax tree expected for "
                             f"{text.count(chr(10)) + 1:,} lines ({self._tokens:,} tokens), over the "
                             f"{self.budget.megabytes:,} MB limit (file-memory-limit)")

    def allows_tree(self, text: str, parser: str) -> bool:
        """Whether the tree of another file's `text` (read to follow a class into it) fits the memory limit."""
        return self.budget is None or self._expected_tree(text, parser) <= self.budget.megabytes * 2**20

    def _expected_tree(self, text: str, parser: str) -> int:
        if self.budget is None:
            return 0
        if self._counted is not text:  # the file's two parsers ask of the same text: counted once
            self._counted, self._tokens = text, _TOKEN.subn("", text)[1]
        return self._tokens * (_LIBCST_BYTES_PER_TOKEN if parser == "libcst" else _AST_BYTES_PER_TOKEN)


def _megabytes(count: int) -> str:
    return f"{count / 2**30:.1f} GB" if count >= 2**30 else f"{math.ceil(count / 2**20):,} MB"


def resident_bytes() -> int | None:
    """The process's resident memory now (Linux), or None where /proc does not say."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
