"""Jupyter notebooks: the code cells joined into one module, with a map back to (cell, line).

Cells are joined in order, so an import in cell 1 resolves names in cell 5, as when the notebook runs. IPython
syntax that is not Python is neutralised without moving anything: a line magic or shell line (`%timeit f()`,
`!pip install x`, `x = !ls`) becomes a comment of the same length, and a cell magic (`%%bash`) blanks its cell.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from mhalint.finding import Finding
from mhalint.source import LINE_BREAK

_MAGIC = re.compile(r"^\s*[%!]")
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")
_ASSIGNED_SHELL = re.compile(r"^\s*[\w.]+\s*=\s*[!%]")


class NotebookError(ValueError):
    """The file is not a notebook mhalint can read; the message says why."""


@dataclass(frozen=True)
class Notebook:
    source: str  # the code cells as one Python module
    cells: tuple[tuple[int, int], ...]  # for each line of `source`: (1-based cell number, 1-based line in the cell)

    @classmethod
    def parse(cls, raw: bytes) -> Notebook:
        lines: list[str] = []
        where: list[tuple[int, int]] = []
        for number, text in code_cells(raw).items():
            cell_lines = LINE_BREAK.split(text.rstrip("\r\n")) if text else [""]
            blank = cell_lines[0].lstrip().startswith("%%")
            for line_number, line in enumerate(cell_lines, start=1):
                lines.append("" if blank else _neutralise(line))
                where.append((number, line_number))
        return cls("\n".join(lines) + "\n", tuple(where))

    def locate(self, finding: Finding) -> Finding:
        """The finding with its line counted within its cell."""
        if not 1 <= finding.line <= len(self.cells):
            return finding
        cell, line = self.cells[finding.line - 1]
        end_line = finding.end_line
        if 1 <= end_line <= len(self.cells) and self.cells[end_line - 1][0] == cell:
            end_line = self.cells[end_line - 1][1]
        return replace(finding, cell=cell, line=line, end_line=end_line, fix=None,  # fixes edit .py files only
                       message=self._relabel(finding.message),
                       evidence=tuple(self._relabel(text) for text in finding.evidence))

    def _relabel(self, text: str) -> str:
        """Rule messages cite lines of the joined module ("built at line 12"): say which cell they are in."""
        def cell_line(match: re.Match) -> str:
            number = int(match.group(1))
            if not 1 <= number <= len(self.cells):
                return match.group(0)
            cell, line = self.cells[number - 1]
            return f"cell {cell} line {line}"
        return _LINE_REFERENCE.sub(cell_line, text)


def code_cells(raw: bytes) -> dict[int, str]:
    """A notebook's code cells as written, by 1-based cell number (every cell counts, as in `Finding.cell`)."""
    try:
        document = json.loads(raw)
        cells = document["cells"]
        if not isinstance(cells, list):
            raise TypeError("`cells` is not a list")
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise NotebookError(f"not a valid notebook ({type(error).__name__}: {error})") from None
    return {number: _cell_source(cell.get("source", ""), number) for number, cell in enumerate(cells, start=1)
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
