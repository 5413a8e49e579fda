"""Where a report goes: standard output or the `--output-file`, at the detail `--quiet` and `--silent` ask for.

Output errors never end in a traceback. A reader that closes the pipe early (`mhalint check | head -1`) ends the
output quietly and the run finishes with its usual exit status, as ruff's does. Any other error writing
standard output (a full disk, `> /dev/full`) is one line on stderr and exit 2 (OutputError). Text is written
as bytes, so a file name that is not valid UTF-8 comes out as the bytes it has on disk.

`--output-file` gets what standard output would have got (findings, summary, statistics, a diff), written when
the report is complete, into a file opened the usual way (so `/dev/stderr` or a named pipe works too); missing
parent directories are created, as ruff creates them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click


class OutputError(Exception):
    """The report could not be written: a one-line message and exit 2."""


class Output:
    """The report's destination. `report` is what `--silent` hides (findings, statistics, a diff); `summary` is
    what `--quiet` hides too (the lines that end a report); `status` goes to stderr unless quiet."""

    def __init__(self, path: Path | None = None, *, quiet: bool = False, silent: bool = False):
        self.path = path
        self.quiet = quiet or silent
        self.silent = silent
        self._kept: list[bytes] = []  # for the output file
        self._closed_pipe = False

    def report(self, text: str, end: str = "\n") -> None:
        if not self.silent:
            self._write(text + end)

    def summary(self, text: str) -> None:
        if not self.quiet and text:
            self._write(text + "\n")

    def status(self, text: str) -> None:
        if not self.quiet and text:
            click.echo(text, err=True)

    def close(self) -> None:
        """Write the output file (standard output has been written as the report went)."""
        if self.path is None:
            return
        try:
            if not os.path.lexists(self.path.parent):
                self.path.parent.mkdir(parents=True)
            with open(self.path, "wb") as handle:
                handle.write(b"".join(self._kept))
        except OSError as error:
            raise OutputError(f"cannot write the report to {self.path}: {error.strerror or error}") from None

    def _write(self, text: str) -> None:
        data = _encode(text, getattr(sys.stdout, "encoding", None) or "utf-8")
        if self.path is not None:
            self._kept.append(data)
            return
        if self._closed_pipe:
            return
        try:
            sys.stdout.flush()  # whatever went through the text layer first
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            self._closed_pipe = True
            _discard_stdout()
        except OSError as error:
            _discard_stdout()
            raise OutputError(f"cannot write the report to standard output: {error.strerror or error}") from None


def _encode(text: str, encoding: str) -> bytes:
    try:
        return text.encode(encoding, "surrogateescape")  # a non-UTF-8 file name: its own bytes back
    except UnicodeEncodeError:  # a character the terminal's encoding lacks
        return text.encode(encoding, "replace")


def _discard_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so that the interpreter's last flush of what is still buffered
    neither fails again nor prints "Exception ignored" at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real descriptor (a test runner's stream): nothing to flush
        pass
