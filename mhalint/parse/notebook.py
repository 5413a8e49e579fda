"""Jupyter notebooks: the code cells joined into one module, with a map back to (cell, line), and fixes applied to
the cells and written back in the notebook's own JSON layout.

Cells are joined in order, so an import in cell 1 resolves names in cell 5, as when the notebook runs. IPython
syntax that is not Python is neutralised without moving anything: a line magic or shell line (`%timeit f()`,
`!pip install x`, `x = !ls`) becomes a comment of the same length, and a cell magic (`%%bash`) blanks its cell,
except the magics whose body is Python (`%%time`, `%%timeit`, `%%capture`, ..., ruff's list), which only turn
their first line into a comment.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

from mhalint.analysis.references import LINE
from mhalint.finding import Finding, Fix
from mhalint.fixes import NOTHING_WRITTEN, FixError, apply_fixes, fix_source, unified_diff
from mhalint.parse.source import LINE_BREAK

_MAGIC = re.compile(r"^\s*[%!]")
_CELL_MAGIC = re.compile(r"^\s*%%(\w*)")
_PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})
_ASSIGNED_SHELL = re.compile(r"^\s*[\w.]+\s*=\s*[!%]")
_FIRST_INDENT = re.compile(r"[{\[]\r?\n([ \t]+)")

Cells = Mapping[int, str]  # a notebook's code cells as written, by 1-based cell number


class NotebookError(ValueError):
    """The file is not a notebook mhalint can read; the message says why."""


@dataclass(frozen=True)
class Notebook:
    source: str  # the code cells as one Python module
    cells: tuple[tuple[int, int], ...]  # for each line of `source`: (1-based cell number, 1-based line in the cell)
    rewritten: frozenset[int] = frozenset()  # lines of `source` that are not the cell's line as written (magics)

    @classmethod
    def parse(cls, raw: bytes | str) -> Notebook:
        return cls.joining(code_cells(raw))

    @classmethod
    def joining(cls, cells: Cells) -> Notebook:
        lines: list[str] = []
        where: list[tuple[int, int]] = []
        rewritten: set[int] = set()
        for number, text in cells.items():
            cell_lines = LINE_BREAK.split(text.rstrip("\r\n")) if text else [""]
            magic = _CELL_MAGIC.match(cell_lines[0])
            blank = magic is not None and magic.group(1) not in _PYTHON_CELL_MAGICS
            for line_number, line in enumerate(cell_lines, start=1):
                lines.append("" if blank else _neutralise(line))
                where.append((number, line_number))
                if lines[-1] != line:
                    rewritten.add(len(lines))
        return cls("\n".join(lines) + "\n", tuple(where), frozenset(rewritten))

    def locate(self, finding: Finding) -> Finding:
        """The finding with its line, and its fix's lines, counted within its cell."""
        if not 1 <= finding.line <= len(self.cells):
            return finding
        cell, line = self.cells[finding.line - 1]
        end_line = finding.end_line
        if 1 <= end_line <= len(self.cells) and self.cells[end_line - 1][0] == cell:
            end_line = self.cells[end_line - 1][1]
        return replace(finding, cell=cell, line=line, end_line=end_line, fix=self._cell_fix(finding.fix, cell),
                       message=self._relabel(finding.message),
                       evidence=tuple(self._relabel(text) for text in finding.evidence))

    def _cell_fix(self, fix: Fix | None, cell: int) -> Fix | None:
        """The fix in the cell's own lines; None when an edit reaches into another cell or into a line that is
        not Python as written (a magic), which the cell could not take."""
        if fix is None:
            return None
        edits = []
        for edit in fix.edits:
            lines = range(edit.line, edit.end_line + 1)
            if not (1 <= edit.line <= edit.end_line <= len(self.cells)) or any(
                    self.cells[number - 1][0] != cell or number in self.rewritten for number in lines):
                return None
            edits.append(replace(edit, line=self.cells[edit.line - 1][1], end_line=self.cells[edit.end_line - 1][1]))
        return replace(fix, edits=tuple(edits))

    def _relabel(self, text: str) -> str:
        """Rule messages cite lines of the joined module ("built at line 12"): say which cell they are in."""
        def cell_line(match: re.Match) -> str:
            number = int(match.group(1))
            if not 1 <= number <= len(self.cells):
                return match.group(0)
            cell, line = self.cells[number - 1]
            return f"cell {cell} line {line}"
        return LINE.sub(cell_line, text)


def fix(text: str, lint: Callable[[str], Sequence[Finding]], unsafe: bool) -> tuple[str, int]:
    """The notebook's JSON text with the fixes applied to its code cells (`lint` checks the joined module), and
    how many were applied. Only the changed cells' `source` changes (a list of lines stays one); the rest, outputs
    and metadata included, is written back in the file's own layout, or FixError when that cannot be reproduced."""
    document = _load(text)
    dump = _layout(text, document)
    cells = _code_cells(document)
    fixed, applied = fix_cells(cells, lint, unsafe)
    if not applied:
        return text, 0
    for number, source in fixed.items():
        if source != cells[number]:
            cell = document["cells"][number - 1]
            cell["source"] = source.splitlines(keepends=True) if isinstance(cell["source"], list) else source
    return dump(document), applied


def fix_cells(cells: Cells, lint: Callable[[str], Sequence[Finding]], unsafe: bool) -> tuple[Cells, int]:
    """The code cells with the fixes applied (`lint` checks the joined module), and how many were applied."""
    return fix_source(cells, lint, unsafe, apply=_apply_to_cells,
                      module=lambda current: Notebook.joining(current).source)


def add_noqa(text: str, findings: Sequence[Finding], reason: str) -> tuple[str, int]:
    """`--add-noqa` in a notebook: its JSON text with the directives added to the code cells, at the cell lines
    the findings are reported on (each cell read as the check reads it, magics as comments), and how many lines
    changed; the rest of the file is written back in its own layout, as `fix` writes it."""
    from mhalint.run.noqa import add_directives  # the notebook is read for the check without it

    document = _load(text)
    dump = _layout(text, document)
    cells = _code_cells(document)
    by_cell: dict[int, list[Finding]] = defaultdict(list)
    for finding in findings:
        if finding.cell in cells:
            by_cell[finding.cell].append(finding)
    total = 0
    for number, found in by_cell.items():
        source = cells[number]
        read = "".join(_neutralise(line) for line in source.splitlines(keepends=True))
        changed, count = add_directives(read, found, reason, written=source)
        if count:
            cell = document["cells"][number - 1]
            cell["source"] = changed.splitlines(keepends=True) if isinstance(cell["source"], list) else changed
            total += count
    return (dump(document), total) if total else (text, 0)


def diff(old: str, new: str, name: str) -> str:
    """A unified diff for each code cell that changed, headed `NAME:cell N` (as ruff shows a notebook's fixes)."""
    before, after = code_cells(old), code_cells(new)
    return "".join(unified_diff(_ended(text), _ended(after[number]), f"{name}:cell {number}")
                   for number, text in before.items() if after.get(number, text) != text)


def _ended(text: str) -> str:
    """A cell's text with a final line break: a cell's last line has none (nbformat), which is no change to show."""
    return text if text.endswith(("\n", "\r")) else text + "\n"


def _apply_to_cells(cells: Cells, findings: Sequence[Finding], unsafe: bool) -> tuple[Cells, int]:
    """`apply_fixes` for each cell, with the fixes of the findings in it (found in the joined module)."""
    notebook = Notebook.joining(cells)
    by_cell: dict[int, list[Finding]] = defaultdict(list)
    for finding in map(notebook.locate, findings):
        if finding.cell is not None and finding.fix is not None:
            by_cell[finding.cell].append(finding)
    fixed, total = dict(cells), 0
    for number, found in by_cell.items():
        fixed[number], applied = apply_fixes(cells[number], found, unsafe)
        total += applied
    return fixed, total


def _layout(text: str, document: dict) -> Callable[[dict], str]:
    """json.dumps with the settings that give back `text` exactly (nbformat writes indent=1, ensure_ascii=False and
    a final newline), so that a fix changes nothing but the cells; FixError when no setting does."""
    body = text.rstrip("\r\n")
    end = text[len(body):]
    newline = "\r\n" if "\r\n" in body else "\n"
    indent = _FIRST_INDENT.match(body)
    indent = indent.group(1) if indent else None
    separators = [(",", ": ")] if indent is not None else [(", ", ": "), (",", ":")]
    for ensure_ascii in (False, True):
        for separator in separators:
            def dump(changed: dict, ensure_ascii=ensure_ascii, separator=separator) -> str:
                written = json.dumps(changed, indent=indent, ensure_ascii=ensure_ascii, separators=separator)
                return written.replace("\n", newline) + end
            if dump(document) == text:
                return dump
    raise FixError(f"its JSON layout is not one mhalint can write back unchanged; {NOTHING_WRITTEN}")


def code_cells(raw: bytes | str) -> dict[int, str]:
    """A notebook's code cells as written, by 1-based cell number (every cell counts, as in `Finding.cell`)."""
    return _code_cells(_load(raw))


def _load(raw: bytes | str) -> dict:
    try:
        document = json.loads(raw)
        if not isinstance(document["cells"], list):
            raise TypeError("`cells` is not a list")
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise NotebookError(f"not a valid notebook ({type(error).__name__}: {error})") from None
    return document


def _code_cells(document: dict) -> dict[int, str]:
    return {number: _cell_source(cell.get("source", ""), number)
            for number, cell in enumerate(document["cells"], start=1)
            if isinstance(cell, dict) and cell.get("cell_type") == "code"}


def _cell_source(source, number: int) -> str:
    """A cell's source as one string (nbformat stores a string or a list of strings), valid Unicode."""
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise NotebookError(f"not a valid notebook (cell {number}: `source` is not text)")
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        raise NotebookError(f"not a valid notebook (cell {number}: the source holds a lone surrogate, which is not "
                            f"valid Unicode)") from None
    return source


def _neutralise(line: str) -> str:
    """A magic or shell line (`%time f()`, `!ls`, `files = !ls`) as a comment of the same length, so the
    columns of every other line stay where they were."""
    if not (_MAGIC.match(line) or _ASSIGNED_SHELL.match(line)):
        return line
    indent = len(line) - len(line.lstrip())
    return line[:indent] + "#" + line[indent + 1:]
