"""Applying fixes: text edits, a fixed point over re-linting, and writes that never lose data.

Fixes are applied to the decoded source (libcst keeps it byte-for-byte, newlines included). Edits of different
fixes that overlap, touch or abut wait for the next round, which lints the result again (ruff's loop), so no fix is
applied to code that another fix has just changed. The result must parse before anything is written.

The text is encoded back with the file's own encoding and written to a temporary file in the file's directory,
which replaces it with `os.replace`: a reader never sees half a file. Through a symlink, the file it points to is
fixed and the link stays, but only when its real path lies inside the project being checked (`project_roots`): the
tree may be someone else's (a fork's pull request), whose links must not lead a fix to files outside it. Owner,
group and mode are kept; a file they cannot be kept for, a read-only file and a file with several hard links (a
rename would split them) are refused, as is a file that changed in any way since it was read or whose real path
changed, both checked again just before the rename. The temporary file is removed on every way out, including an
interrupt's exception.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

from mhalint.finding import SAFE, Finding, Fix
from mhalint.names import printable
from mhalint.parse.lazy import cst
from mhalint.parse.source import decode, line_starts

MAX_ROUNDS = 10  # ruff's limit too: fixes that keep producing fixes are a bug, not a reason to loop forever
NOTHING_WRITTEN = "nothing was written"

Document = TypeVar("Document")


class FixError(Exception):
    """A fix could not be applied or written; the message says why and the file is untouched."""


def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (unsafe or finding.fix.applicability == SAFE)


def apply_fixes(source: str, findings: Iterable[Finding], unsafe: bool) -> tuple[str, int]:
    """The source with every applicable fix applied that neither overlaps nor touches an earlier one, and how many
    fixes were applied. The others are picked up by the next round of `fix_source`, computed on the new text: two
    insertions at one place (`attn_mask=m` + `, need_weights=False` + ` == 0`) would otherwise interleave."""
    fixes = sorted((f.fix for f in findings if applicable(f, unsafe)), key=lambda fix: _start(fix))
    starts = line_starts(source)
    chosen: list[tuple[int, int, str]] = []
    end_of_last = -1
    applied = 0
    for fix in fixes:
        spans = sorted((_offset(starts, e.line, e.column), _offset(starts, e.end_line, e.end_column), e.content)
                       for e in fix.edits)
        overlaps_itself = any(a[1] > b[0] for a, b in zip(spans, spans[1:]))
        if overlaps_itself or spans[0][0] <= end_of_last:  # at the end of the last one counts: both insert there
            continue
        chosen.extend(spans)
        end_of_last = spans[-1][1]
        applied += 1
    for start, end, content in reversed(chosen):
        source = source[:start] + content + source[end:]
    return source, applied


def fix_source(source: Document, lint: Callable[[str], Sequence[Finding]], unsafe: bool, *,
               apply: Callable[[Document, Sequence[Finding], bool], tuple[Document, int]] = apply_fixes,
               module: Callable[[Document], str] = str) -> tuple[Document, int]:
    """Apply fixes until none applies (at most MAX_ROUNDS rounds); the result must still parse. `source` is a
    file's text; a notebook passes its cells, with `apply` to edit them and `module` to join them into the Python
    module that `lint` checks. The count is of the findings the fixes removed (`fixed_codes`), not of the fixes
    applied: a later round may fix what an earlier fix made, and one fix may remove several findings. Callers
    write or show the result only for a count above 0."""
    before = found = lint(module(source))
    for _ in range(MAX_ROUNDS):
        source_after, applied = apply(source, found, unsafe)
        if not applied:
            break
        try:
            cst.parse_module(module(source_after))
        except cst.ParserSyntaxError as error:
            raise FixError(f"the fixed code would not parse ({error.message}); {NOTHING_WRITTEN}") from None
        source = source_after
        found = lint(module(source))
    return source, sum(fixed_codes(before, found, unsafe).values())


def fixed_codes(before: Sequence[Finding], after: Sequence[Finding], unsafe: bool) -> Counter:
    """(path, code) -> how many findings the fixes resolved: fixable ones before them, gone after them."""
    fixable = Counter((f.path, f.code) for f in before if applicable(f, unsafe))
    found, left = Counter((f.path, f.code) for f in before), Counter((f.path, f.code) for f in after)
    return Counter({key: min(count, found[key] - left[key]) for key, count in fixable.items()
                    if found[key] > left[key]})


def unified_diff(old: str, new: str, name: str) -> str:
    """`diff -u`'s text, `\\ No newline at end of file` included, so that `patch` can apply it (a name with a
    control character quoted as git quotes it, which GNU patch reads)."""
    import difflib  # only --diff needs it

    lines = difflib.unified_diff(_lines(old), _lines(new), fromfile=printable(name), tofile=printable(name))
    return "".join(line if line.endswith(("\n", "\r")) else f"{line}\n\\ No newline at end of file\n"
                   for line in lines)


def _lines(text: str) -> list[str]:
    """The lines of `text` with their line breaks, broken where Python breaks them (not at a form feed)."""
    starts = line_starts(text)
    return [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)]) if start < end]


@dataclass(frozen=True)
class SourceFile:
    """A file as read: its bytes and status (to detect any change before writing), decoded text and encoding."""

    path: Path
    raw: bytes
    text: str
    encoding: str
    status: os.stat_result

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        with open(path, "rb") as handle:
            raw = handle.read()
            status = os.fstat(handle.fileno())
        text, encoding = decode(raw)
        return cls(path, raw, text, encoding, status)

    def diff(self, new_text: str) -> str:
        return unified_diff(self.text, new_text, str(self.path))

    def write(self, new_text: str, within: Sequence[Path]) -> None:
        """Replace the file's content with `new_text` atomically, keeping links, owner, group and mode, unless the
        file changed since it was read, its real path is outside `within` (`project_roots`), or it cannot be
        written so; FixError says why nothing was written."""
        data = new_text.encode(self.encoding)
        target = self._target(within)  # through a symlink: fix the file it points to, keep the link
        status = os.stat(target)
        _refuse_unless_writable(target, status)
        name = f".{target.name}.{os.urandom(4).hex()}.mhalint"
        temporary: Path | None = target.with_name(name)
        try:  # everything from the file's creation on, so that an exception at any point removes it
            try:
                descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # not ours: leave it alone
                temporary = None
                raise FixError(f"{name} is in the way; {NOTHING_WRITTEN}") from None
            with open(descriptor, "wb") as out:
                out.write(data)
                out.flush()
                _keep_owner_and_mode(out.fileno(), status)
                os.fsync(out.fileno())
            if not self._unchanged(target):  # as late as possible: an edit made while the fix was written stays
                raise FixError(f"the file changed on disk while mhalint was fixing it; {NOTHING_WRITTEN}")
            if self._target(within) != target:  # a link or directory on the way changed meanwhile
                raise FixError(f"its path changed while mhalint was fixing it; {NOTHING_WRITTEN}")
            os.replace(temporary, target)
        finally:
            if temporary is not None:
                temporary.unlink(missing_ok=True)

    def _target(self, within: Sequence[Path]) -> Path:
        """The real path of the file, which a write replaces; FixError unless it lies inside one of `within`."""
        target = Path(os.path.realpath(self.path))
        if not any(target.is_relative_to(root) for root in within):
            raise FixError(f"it leads to {printable(str(target))}, outside the project being checked; "
                           f"{NOTHING_WRITTEN}")
        return target

    def _unchanged(self, target: Path) -> bool:
        """Whether `target` is still the file that was read (same inode), with the same size, mtime and bytes."""
        now, then = os.stat(target), self.status
        return ((now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) ==
                (then.st_dev, then.st_ino, then.st_size, then.st_mtime_ns) and target.read_bytes() == self.raw)


def project_roots(paths: Iterable[str | Path], project_root: Path) -> tuple[Path, ...]:
    """Where fixes may write: the real path of each path given, its last component not followed (a link given as
    a path, or a linked directory, does not bring its target in), and of the project's root."""
    given = [os.path.abspath(path) for path in paths]
    return (*(Path(os.path.realpath(os.path.dirname(path)), os.path.basename(path)) for path in given),
            Path(os.path.realpath(project_root)))


def _refuse_unless_writable(target: Path, status: os.stat_result) -> None:
    """FixError for a file mhalint must not replace: what an editor refuses, and what a rename cannot keep."""
    if not stat.S_ISREG(status.st_mode):
        raise FixError(f"it is not a regular file; {NOTHING_WRITTEN}")
    if not status.st_mode & stat.S_IWUSR:  # the mode bits, since root may write anything
        raise FixError(f"the file is read-only (mode {stat.S_IMODE(status.st_mode):o}); {NOTHING_WRITTEN}")
    if not os.access(target, os.W_OK):
        raise FixError(f"you may not write to it; {NOTHING_WRITTEN}")
    if status.st_nlink > 1:
        raise FixError(f"it has {status.st_nlink} hard links, which the fix (a new file renamed over it) would "
                       f"split; {NOTHING_WRITTEN}")


def _keep_owner_and_mode(descriptor: int, status: os.stat_result) -> None:
    """Give the new file the original's owner, group and mode (in that order: chown clears set-id bits)."""
    made = os.fstat(descriptor)
    if (made.st_uid, made.st_gid) != (status.st_uid, status.st_gid):
        try:
            os.fchown(descriptor, status.st_uid, status.st_gid)
        except OSError as error:
            raise FixError(f"the fixed file would belong to {_owner(made)} instead of {_owner(status)} "
                           f"({error.strerror}); {NOTHING_WRITTEN}") from None
    os.fchmod(descriptor, stat.S_IMODE(status.st_mode))


def _owner(status: os.stat_result) -> str:
    """`user:group`, by name where the system knows it."""
    import grp  # POSIX only, as is a file whose owner cannot be kept
    import pwd

    try:
        user = pwd.getpwuid(status.st_uid).pw_name
    except KeyError:
        user = str(status.st_uid)
    try:
        group = grp.getgrgid(status.st_gid).gr_name
    except KeyError:
        group = str(status.st_gid)
    return f"{user}:{group}"


def _start(fix: Fix) -> tuple[int, int]:
    first = min(fix.edits, key=lambda e: (e.line, e.column))
    return first.line, first.column


def _offset(starts: list[int], line: int, column: int) -> int:
    if not 1 <= line <= len(starts):
        raise FixError(f"a fix points at line {line}, outside the file")
    return starts[line - 1] + column - 1
