"""ruff's `full` format: each finding's headline, a code frame of its source with a caret under the flagged span,
the evidence the verdict rests on, what to do (help), the fix's safety and the probe result; with `--explain`,
the long explanation too.

    MHA001 [error] nn.MultiheadAttention gets batch-first data (`B, T, C = x.shape`, line 25) but batch_first ...
      --> model.py:20:21
       |
    18 |         super().__init__()
    19 |         self.embed = nn.Embedding(VOCAB_SIZE, EMBED_DIM)
    20 |         self.attn = nn.MultiheadAttention(EMBED_DIM, NUM_HEADS)
       |                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
    21 |         self.norm = nn.LayerNorm(EMBED_DIM)
    22 |         self.head = nn.Linear(EMBED_DIM, NUM_CLASSES)
       |
       = evidence: the constructor at line 20 has no batch_first argument
       = evidence: `B, T, C = x.shape`, line 25: axis 0 of x is the batch
    help: pass batch_first=True
    note: this fix changes behaviour; `--fix` applies it only with `--unsafe-fixes`
    probe: confirmed (torch 2.13.0): <what the probe measured>

`[*]` after the severity marks a finding that `--fix` resolves (with `--unsafe-fixes`, an unsafe fix counts too),
as ruff marks it. With colour (`--color`), the code and severity, the headline, the gutter, the caret and the help
are styled as ruff styles them; the text is the same.

Columns count characters (as libcst and the finding do); what the terminal shows is measured in cells: a tab
goes to the next multiple of TAB_SIZE, East Asian wide characters take two cells, combining marks none, and
control characters are shown as their Unicode control pictures. The source line and the caret line go through
the same measure, so the caret stays under the span whatever the line holds. A file that cannot be read or
decoded, or a line it no longer has, leaves the frame out; the rest of the finding is still printed. A finding in
a notebook is shown in its cell (` --> path:cell N:line:col`, the frame from the cell's source).
"""

from __future__ import annotations

import textwrap
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import SAFE, Finding
from mhalint.parse.notebook import NotebookError, code_cells
from mhalint.parse.source import LINE_BREAK, decode
from mhalint.report import FIXABLE, SEVERITY_COLOR, Painter, RenderOptions

if TYPE_CHECKING:
    from mhalint.rule import Rule

TAB_SIZE = 4  # ruff's default indent width, which its code frames use for tabs
CONTEXT = 2  # source lines shown before and after the flagged one
EXPLANATION_WIDTH = 100


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    """Every finding as a block; blocks are separated, and followed, by an empty line (as ruff prints them)."""
    sources = _Sources()
    blocks = [_block(finding, sources, options) for finding in findings]
    return "\n\n".join(blocks) + "\n" if blocks else ""


class _Sources:
    """Source lines by path, read once per render and only for paths that have a finding."""

    def __init__(self):
        self._lines: dict[str, list[str] | None] = {}
        self._cells: dict[str, dict[int, list[str]] | None] = {}

    def lines(self, path: str, cell: int | None = None) -> list[str] | None:
        """The file's lines, or for a notebook finding the lines of its cell."""
        if cell is not None:
            if path not in self._cells:
                self._cells[path] = _read_cells(path)
            cells = self._cells[path]
            return None if cells is None else cells.get(cell)
        if path not in self._lines:
            self._lines[path] = _read_lines(path)
        return self._lines[path]


def _read_lines(path: str) -> list[str] | None:
    try:
        text, _ = decode(Path(path).read_bytes())
    except (OSError, ValueError, SyntaxError, LookupError):  # UnicodeDecodeError is a ValueError
        return None
    return LINE_BREAK.split(text)


def _read_cells(path: str) -> dict[int, list[str]] | None:
    """A notebook's code cells by cell number, as written: magics are shown as they are, not as the comments
    mhalint parsed them as (they have the same length)."""
    try:
        return {number: LINE_BREAK.split(text) for number, text in code_cells(Path(path).read_bytes()).items()}
    except (OSError, NotebookError):
        return None


def _block(finding: Finding, sources: _Sources, options: RenderOptions) -> str:
    paint = Painter(options.color)
    code = paint(f"{finding.code} [{finding.severity}]", fg=SEVERITY_COLOR[finding.severity], bold=True)
    mark = f" {paint(FIXABLE, fg='cyan')}" if options.fixable(finding) else ""
    header = f"{code}{mark} {paint(finding.message, bold=True)}"
    lines = sources.lines(finding.path, finding.cell)
    if lines is None or not 1 <= finding.line <= len(lines):
        out, gutter = [header, f" {paint('-->', fg='blue', bold=True)} {finding.location}"], ""
    else:
        frame, gutter = _frame(finding, lines, finding.location, paint)
        out = [header, *frame]
    out += [f"{gutter} {paint('=', fg='blue', bold=True)} evidence: {line}" for line in finding.evidence]
    help_text = finding.help or (finding.fix.title if finding.fix is not None else "")
    if help_text:
        out.append(f"{paint('help', fg='cyan', bold=True)}: {help_text}")
    if finding.fix is not None and finding.fix.applicability != SAFE:
        out.append("note: this fix changes behaviour; `--fix` applies it only with `--unsafe-fixes`")
    if finding.probe is not None:
        version = f" (torch {finding.probe.torch_version})" if finding.probe.torch_version else ""
        out.append(f"probe: {finding.probe.status}{version}: {finding.probe.evidence}")
    if options.explain and finding.explanation:
        out.append(paint("explanation:", bold=True))
        out += [textwrap.fill(paragraph, EXPLANATION_WIDTH, initial_indent="  ", subsequent_indent="  ")
                if not paragraph.startswith(("```", "    ", "- ")) else textwrap.indent(paragraph, "  ")
                for paragraph in finding.explanation.split("\n\n")]
    return "\n".join(out)


def _frame(finding: Finding, lines: list[str], location: str, paint: Painter) -> tuple[list[str], str]:
    """The code frame's lines, and the blank gutter that lines after it align with."""
    first = max(1, finding.line - CONTEXT)
    last = min(len(lines), finding.line + CONTEXT)
    while last > finding.line and not lines[last - 1].strip():  # no trailing blank context (the file's end)
        last -= 1
    width = len(str(last))
    gutter = " " * width
    bar = paint("|", fg="blue", bold=True)
    out = [f"{gutter}{paint('-->', fg='blue', bold=True)} {location}", f"{gutter} {bar}"]
    for number in range(first, last + 1):
        shown, cells = _display(lines[number - 1])
        if number != finding.line:
            shown = shown.rstrip()
        label = paint(f"{number:>{width}}", fg="blue", bold=True)
        out.append(f"{label} {bar} {shown}" if shown else f"{label} {bar}")
        if number == finding.line:
            start, end = _span(finding, len(lines[number - 1]))
            indent = cells[start]
            caret = paint("^" * max(1, cells[end] - indent), fg=SEVERITY_COLOR[finding.severity], bold=True)
            out.append(f"{gutter} {bar} {' ' * indent}{caret}")
    out.append(f"{gutter} {bar}")
    return out, gutter


def _span(finding: Finding, length: int) -> tuple[int, int]:
    """0-based character offsets [start, end) of the flagged text on the finding's first line."""
    start = min(max(finding.column - 1, 0), length)
    if finding.end_line == finding.line and finding.end_column > finding.column:
        end = min(finding.end_column - 1, length)
    elif finding.end_line > finding.line:
        end = length  # the span goes on past this line: underline to its end
    else:
        end = start
    return start, max(start, end)


def _display(line: str) -> tuple[str, list[int]]:
    """The line as the terminal shows it, and the cell at which each character starts (plus one past the end)."""
    shown: list[str] = []
    cells = [0]
    for char in line:
        column = cells[-1]
        if char == "\t":
            width = TAB_SIZE - column % TAB_SIZE
            shown.append(" " * width)
        else:
            char = _visible(char)
            width = _cells(char)
            shown.append(char)
        cells.append(column + width)
    return "".join(shown), cells


def _visible(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # control pictures: ␀ ... ␟
    if code == 0x7F:
        return "\u2421"  # ␡
    if unicodedata.category(char) == "Cc":
        return "\ufffd"
    return char


def _cells(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
