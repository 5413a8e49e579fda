"""Applying fixes: text edits, a fixed point over re-linting, and writes that never leave a file half-written.

Fixes are applied to the decoded source (libcst keeps it byte-for-byte, newlines included), then the result must
parse again before anything is written; it is encoded back with the file's own encoding and written to a
temporary file in the same directory that replaces the original with `os.replace`, keeping its mode. A file
that changed on disk since it was read is left alone.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from mhalint.finding import SAFE, Finding, Fix
from mhalint.lazy import cst
from mhalint.source import decode, line_starts

MAX_ROUNDS = 10  # ruff's limit too: fixes that keep producing fixes are a bug, not a reason to loop forever


class FixError(Exception):
    """A fix could not be applied or written; the message says why and the file is untouched."""


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (unsafe or finding.fix.applicability == SAFE)


def apply_fixes(source: str, findings: Iterable[Finding], unsafe: bool) -> tuple[str, int]:
    """The source with every applicable, non-overlapping fix applied (earlier ones win an overlap), and how many
    fixes were applied. Overlapping fixes are picked up by the next round of `fix_source`."""
    fixes = sorted((f.fix for f in findings if applicable(f, unsafe)), key=lambda fix: _start(fix))
    starts = line_starts(source)
    chosen: list[tuple[int, int, str]] = []
    end_of_last = -1
    applied = 0
    for fix in fixes:
        spans = sorted((_offset(starts, e.line, e.column), _offset(starts, e.end_line, e.end_column), e.content)
                       for e in fix.edits)
        if spans[0][0] < end_of_last or any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
            continue
        chosen.extend(spans)
        end_of_last = spans[-1][1]
        applied += 1
    for start, end, content in reversed(chosen):
        source = source[:start] + content + source[end:]
    return source, applied


def fix_source(source: str, lint: Callable[[str], Sequence[Finding]], unsafe: bool) -> tuple[str, int]:
    """Apply fixes until none applies (at most MAX_ROUNDS rounds); the result must still parse."""
    total = 0
    for _ in range(MAX_ROUNDS):
        source_after, applied = apply_fixes(source, lint(source), unsafe)
        if not applied:
            break
        try:
            cst.parse_module(source_after)
        except cst.ParserSyntaxError as error:
            raise FixError(f"the fixed code would not parse ({error.message}); nothing was written") from None
        source, total = source_after, total + applied
    return source, total


@dataclass(frozen=True)
class SourceFile:
    """A file as read: its bytes (to detect concurrent changes), decoded text and encoding."""

    path: Path
    raw: bytes
    text: str
    encoding: str

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        raw = path.read_bytes()
        text, encoding = decode(raw)
        return cls(path, raw, text, encoding)

    def diff(self, new_text: str) -> str:
        name = str(self.path)
        return "".join(difflib.unified_diff(self.text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                            fromfile=name, tofile=name))

    def write(self, new_text: str) -> None:
        """Atomically replace the file with `new_text`, unless it changed on disk since it was read."""
        data = new_text.encode(self.encoding)
        current = self.path.read_bytes()
        if hashlib.sha256(current).digest() != hashlib.sha256(self.raw).digest():
            raise FixError("the file changed on disk while mhalint was fixing it; nothing was written")
        mode = self.path.stat().st_mode
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".mhalint")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, mode & 0o7777)
            os.replace(temporary, self.path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise


def _start(fix: Fix) -> tuple[int, int]:
    first = min(fix.edits, key=lambda e: (e.line, e.column))
    return first.line, first.column


def _offset(starts: list[int], line: int, column: int) -> int:
    if not 1 <= line <= len(starts):
        raise FixError(f"a fix points at line {line}, outside the file")
    return starts[line - 1] + column - 1
