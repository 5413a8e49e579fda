"""`# noqa` and `# noqa: MHA001,MHA004` suppression, as flake8 and ruff read them; the directives that suppress
nothing (MHA904, ruff's RUF100); and `--add-noqa`.

A directive applies to the line a finding is reported on (where the call starts). Only real comments count: the
source is tokenized, so `"# noqa"` inside a string suppresses nothing.

Unused directives. A `# noqa: MHA001` on a line without an MHA001 finding is reported, and its fix (safe)
removes the code, or the directive when no code of it is left. Only codes of rules that ran are judged: a code
of another linter (`# noqa: E501`), of a rule that is not enabled, or of the engine is left alone. A bare
`# noqa` that suppresses no mhalint finding is reported at `info` severity (hidden by default), since it most
often serves another linter, and removing it is an unsafe fix for the same reason. A directive that names
MHA904 itself is never reported.
"""

from __future__ import annotations

import bisect
import io
import re
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Collection, Iterable, Sequence

from mhalint.finding import SAFE, UNSAFE, Edit, Finding, Fix, Severity
from mhalint.names import printable
from mhalint.parse.comments import statement_lines_around
from mhalint.parse.source import LINE_BREAK, line_starts

UNUSED_NOQA = "MHA904"
UNUSED_NOQA_NAME = "unused-noqa"

_DIRECTIVE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
_MENTION = re.compile("noqa", re.IGNORECASE)
ALL = frozenset({"*"})


@dataclass(frozen=True)
class Directive:
    """One `# noqa` comment; columns are 0-based character offsets in its line."""

    line: int
    codes: frozenset[str]  # ALL for a bare directive
    start: int  # the directive's `#`
    end: int  # just past its last code (or past `noqa`)
    codes_span: tuple[int, int] | None  # where its code list is written
    comment_start: int  # the comment the directive is in
    comment_end: int


@dataclass(frozen=True)
class _Comments:
    directives: dict[int, Directive]
    open_ends: frozenset[int]  # lines that end outside any string and not in a backslash: a comment can go there


def _scan(source: str) -> _Comments:
    """The comments and directives of `source`; nothing when it does not tokenize."""
    directives: dict[int, Directive] = {}
    open_ends: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source, newline=None).readline):  # \r lines too
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                open_ends.add(token.start[0])
            elif token.type == tokenize.COMMENT:
                match = _DIRECTIVE.search(token.string)
                if match is not None:
                    line, start = token.start
                    directives[line] = _directive(line, start, token.end[1], match)
    except (tokenize.TokenError, SyntaxError):
        return _Comments({}, frozenset())
    return _Comments(directives, frozenset(open_ends))


def _directives_by_statement(source: str, statement_lines: list[int]) -> dict[int, Directive]:
    """`_scan(source).directives`, from the top-level statements that mention noqa, each tokenized alone."""
    starts = line_starts(source)
    found: dict[int, Directive] = {}
    scanned: set[int] = set()
    for mention in _MENTION.finditer(source):
        first, last = statement_lines_around(bisect.bisect_right(starts, mention.start()), statement_lines,
                                              len(starts))
        if first in scanned:
            continue
        scanned.add(first)
        piece = source[starts[first - 1]:starts[last] if last < len(starts) else len(source)]
        for line, directive in _scan(piece).directives.items():
            found[line + first - 1] = replace(directive, line=line + first - 1)
    return found


def _directive(line: int, comment_start: int, comment_end: int, match: re.Match[str]) -> Directive:
    codes = match.group("codes")
    return Directive(line, ALL if codes is None else frozenset(code.upper() for code in _CODE.findall(codes)),
                     comment_start + match.start(), comment_start + match.end(),
                     None if codes is None else (comment_start + match.start("codes"),
                                                 comment_start + match.end("codes")),
                     comment_start, comment_end)


def directives(source: str) -> dict[int, frozenset[str]]:
    """Line number -> the codes suppressed there (ALL for a bare `# noqa`)."""
    return {line: directive.codes for line, directive in _scan(source).directives.items()}


def suppress(findings: Iterable[Finding], source: str, *, path: str, enabled: Collection[str] | None,
             statement_lines: list[int] | None = None) -> list[Finding]:
    """The findings no directive suppresses, then (unless `enabled` is None) an MHA904 finding for each directive
    that suppresses nothing, judging only the codes in `enabled`: the rules that ran. `statement_lines`, the first
    line of each top-level statement (mhalint.parse.positions.first_lines), spares tokenizing the whole file: only the
    statements whose text mentions noqa are (a model file's `# noqa: F401` on an import is not its every class)."""
    findings = list(findings)
    if (enabled is None and not findings) or not _MENTION.search(source):
        return findings
    table = _scan(source).directives if not statement_lines else _directives_by_statement(source, statement_lines)
    kept = [f for f in findings if not _suppressed(f, table.get(f.line))]
    if enabled is None:
        return kept
    codes_by_line: dict[int, set[str]] = {}
    for finding in findings:
        codes_by_line.setdefault(finding.line, set()).add(finding.code)
    lines = None
    for directive in table.values():
        if UNUSED_NOQA in directive.codes:
            continue
        present = codes_by_line.get(directive.line, set())
        if directive.codes is ALL:
            unused = [] if present else ["*"]
        else:
            unused = sorted(code for code in directive.codes if code in enabled and code not in present)
        if unused:
            lines = lines if lines is not None else LINE_BREAK.split(source)
            kept.append(_unused(path, directive, unused, lines[directive.line - 1]))
    return kept


def _suppressed(finding: Finding, directive: Directive | None) -> bool:
    if directive is None:
        return False
    return directive.codes is ALL or finding.code in directive.codes


def _unused(path: str, directive: Directive, unused: list[str], line_text: str) -> Finding:
    blanket = directive.codes is ALL
    if blanket:
        message = "unused blanket noqa directive: no mhalint finding on this line to suppress"
    else:
        message = f"unused noqa directive: no {', '.join(unused)} finding on this line to suppress"
    left = [] if blanket else [code for code in _written_codes(directive, line_text) if code.upper() not in unused]
    start, end, content = _rewrite(directive, line_text, left)
    fix = Fix((Edit(directive.line, start + 1, directive.line, end + 1, content),), UNSAFE if blanket else SAFE,
              "remove the unused noqa directive" if not left else f"remove {', '.join(unused)} from the directive")
    return Finding(path, directive.line, directive.start + 1, UNUSED_NOQA, message=message, name=UNUSED_NOQA_NAME,
                   severity=Severity.INFO if blanket else Severity.WARNING, end_line=directive.line,
                   end_column=directive.end + 1, fix=fix,
                   help="remove it (another linter's codes in the same directive are kept)" if not blanket
                   else "remove it, unless another linter (flake8, ruff) needs it on this line")


def _written_codes(directive: Directive, line_text: str) -> list[str]:
    start, end = directive.codes_span
    return _CODE.findall(line_text[start:end])


def _rewrite(directive: Directive, line_text: str, left: list[str]) -> tuple[int, int, str]:
    """The edit (start, end, new text) that leaves only the `left` codes in the directive, or removes it."""
    if left:
        start, end = directive.codes_span
        return start, end, ", ".join(left)
    if directive.start > directive.comment_start:  # after other text in its comment: keep that text
        return len(line_text[:directive.start].rstrip()), directive.end, ""
    rest = line_text[directive.end:directive.comment_end]
    if rest.lstrip().startswith("#"):  # another comment after it takes its place
        return directive.start, directive.end + len(rest) - len(rest.lstrip()), ""
    return len(line_text[:directive.start].rstrip()), directive.comment_end, ""  # the whole comment, its reason too


def reason_fits(reason: str) -> bool:
    """Can `reason` follow the codes of a directive: one line that a reader of directives takes for no code?"""
    found = _DIRECTIVE.match(f"# noqa: MHA001 {reason}")
    return reason.isprintable() and found is not None and found["codes"] == "MHA001"


def add_directives(source: str, findings: Iterable[Finding], reason: str = "",
                   written: str | None = None) -> tuple[str, int]:
    """`source` with `# noqa: CODES` for the findings on each line they are reported on (and `reason` after the
    codes of a directive it adds), and how many lines changed. Codes join a directive the line has (sorted, as
    ruff writes them; the rest of its comment is kept); otherwise the directive goes after the line's comment or
    code. A line that cannot end in a comment (it ends inside a string, or continues with a backslash) is left
    alone. `written`: the text the edits go into, when `source` is only what is read (a notebook cell whose magic
    lines are read as comments of the same length)."""
    codes_by_line: dict[int, set[str]] = {}
    for finding in findings:
        codes_by_line.setdefault(finding.line, set()).add(finding.code)
    if not codes_by_line:
        return (source if written is None else written), 0
    scanned = _scan(source)
    starts = line_starts(source)
    edits: list[tuple[int, int, str]] = []
    for line, codes in sorted(codes_by_line.items()):
        if not 1 <= line <= len(starts):
            continue
        offset = starts[line - 1]
        text = source[offset:starts[line] if line < len(starts) else len(source)].rstrip("\r\n")
        directive = scanned.directives.get(line)
        if directive is not None:
            if directive.codes is ALL or codes <= directive.codes:
                continue
            start, end = directive.codes_span
            merged = sorted({*_written_codes(directive, text), *codes}, key=str.upper)
            edits.append((offset + start, offset + end, ", ".join(merged)))
        elif line in scanned.open_ends:  # a comment the line has is last on it: the directive goes after it
            end = len(text.rstrip())
            edits.append((offset + end, offset + len(text),
                          f"  # noqa: {', '.join(sorted(codes))}{f' {reason}' if reason else ''}"))
    target = source if written is None else written
    for start, end, content in reversed(edits):
        target = target[:start] + content + target[end:]
    return target, len(edits)


def add_to_files(findings: Iterable[Finding], say: Callable[[str], None], within: Sequence[Path],
                 reason: str = "") -> tuple[int, int]:
    """`--add-noqa`: `add_directives` on the file of each finding, written as `--fix` writes (only inside `within`,
    the project); `say` gets a one-line message for each file left alone. (directives added, files that could not
    be written)."""
    from mhalint.fixes import FixError, SourceFile

    by_path: dict[str, list[Finding]] = {}
    for finding in findings:
        by_path.setdefault(finding.path, []).append(finding)
    added = failures = 0
    for path, found in sorted(by_path.items()):
        try:
            source = SourceFile.read(Path(path))
            if path.endswith(".ipynb"):
                from mhalint.parse.notebook import add_noqa  # only a run that edits a notebook loads it

                text, count = add_noqa(source.text, found, reason)
            else:
                text, count = add_directives(source.text, found, reason)
            if count:
                source.write(text, within)
            added += count
        except (FixError, OSError, UnicodeError, SyntaxError) as error:
            failures += 1
            say(f"mhalint: error: cannot add noqa directives to {printable(path)}: "
                f"{getattr(error, 'strerror', None) or error}")
    return added, failures
