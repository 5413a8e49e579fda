"""A progress line on a terminal's standard error while a long check runs: files checked of files found, and
the findings so far.

It is drawn only once the run has taken `delay` seconds (a short run shows nothing), redrawn at most ten times a
second, erased before the report writes to the terminal and at the end, and never drawn when standard error is
not a terminal (the CLI also leaves it out for the machine formats and with --quiet).
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Callable, TextIO

_REDRAW_EVERY = 0.1  # seconds
_ERASE = "\r\x1b[K"


class Progress:
    def __init__(self, stream: TextIO | None = None, delay: float = 2.0,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self._show_from = clock() + delay
        self._next_draw = 0.0
        self._drawn = False
        self._done = self._total = self._findings = 0

    def update(self, done: int, total: int, findings: int) -> None:
        self._done, self._total, self._findings = done, total, findings
        now = self.clock()
        if now >= self._show_from and now >= self._next_draw:
            self._next_draw = now + _REDRAW_EVERY
            self._write(_ERASE + self.line(shutil.get_terminal_size((80, 24)).columns - 1))
            self._drawn = True

    def line(self, width: int) -> str:
        """`[#####-----] 1234/6606 files, 12 findings`, fitted to `width` characters; numbers written as the
        summary writes them (as ruff's summary does, without separators)."""
        counts = f" {self._done}/{self._total} files, {self._findings} finding" + (
            "" if self._findings == 1 else "s")
        room = min(40, width - len(counts) - 2)
        if room < 5:
            return counts.strip()[:max(width, 0)]
        filled = room * self._done // self._total if self._total else room
        return f"[{'#' * filled}{'-' * (room - filled)}]{counts}"

    def clear(self) -> None:
        """Erase the line, if it is drawn, so that the report's next line starts at the left margin."""
        if self._drawn:
            self._write(_ERASE)
            self._drawn = False
            self._next_draw = 0.0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal: the report matters, not the progress
            pass
