"""Findings as LSP diagnostics: the headline as the message, the severity mapped, the code linked to its
documentation, and each line of evidence as related information at the place it names (the shape unpacking, the
mask's construction, the caller in another file), or at the finding itself when it names none."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Iterable

from lsprotocol import types
from pygls.uris import from_fs_path

from mhalint.analysis.references import Place, places
from mhalint.finding import Finding, Severity
from mhalint.server.convert import Lines
from mhalint.server.rule_docs import RuleDocs
from mhalint.server.session import Source

SOURCE = "mhalint"
SEVERITIES = {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning,
              Severity.INFO: types.DiagnosticSeverity.Information}


@dataclass
class Placed:
    """A checked document's text as the editor addresses it: one URI, or one per notebook cell."""

    source: Source
    encoding: str
    cell_uris: dict[int, str] = field(default_factory=dict)  # a notebook's code cells by 1-based number
    read: Callable[[str], str | None] = lambda path: None  # another file's text (its buffer, else the disk)
    _lines: dict[int | None, Lines] = field(default_factory=dict)

    def lines(self, cell: int | None) -> Lines:
        if cell not in self._lines:
            text = self.source.cells.get(cell, "") if self.source.is_notebook else self.source.text
            self._lines[cell] = Lines(text, self.encoding)
        return self._lines[cell]

    def uri(self, cell: int | None) -> str:
        return self.cell_uris.get(cell, self.source.key) if cell is not None else self.source.key

    def location(self, finding: Finding) -> types.Location:
        lines = self.lines(finding.cell)
        return types.Location(self.uri(finding.cell), lines.range(finding.line, finding.column, finding.end_line,
                                                                  finding.end_column))

    def place(self, place: Place, finding: Finding) -> types.Location | None:
        """Where an evidence sentence points: a line of this document (of a cell, in a notebook), or of another
        file (named relative to the current directory or to this document's directory)."""
        if place.path is None:
            cell = place.cell if place.cell is not None else finding.cell
            if self.source.is_notebook and cell not in self.cell_uris:
                return None
            lines = self.lines(cell)
            return types.Location(self.uri(cell), lines.line_range(place.line)) if place.line <= len(lines.lines) \
                else None
        for base in (os.getcwd(), os.path.dirname(self.source.path)):
            path = os.path.normpath(os.path.join(base, place.path))
            text = self.read(path) if os.path.isabs(path) else None
            if text is not None:
                lines = Lines(text, self.encoding)
                if place.line <= len(lines.lines):
                    return types.Location(from_fs_path(path), lines.line_range(place.line))
        return None


def diagnostic(finding: Finding, placed: Placed, docs: RuleDocs, related: bool = True,
               described: bool = True) -> types.Diagnostic:
    """The diagnostic of one finding; `related` and `described` say whether the client takes related information
    and code descriptions."""
    location = placed.location(finding)
    href = docs.uri(finding.code) if described else None
    return types.Diagnostic(
        range=location.range, message=finding.message, severity=SEVERITIES[finding.severity], code=finding.code,
        source=SOURCE, code_description=types.CodeDescription(href) if href else None,
        related_information=list(_related(finding, placed, location)) or None if related else None)


def _related(finding: Finding, placed: Placed, own: types.Location) -> Iterable[types.DiagnosticRelatedInformation]:
    for sentence in finding.evidence:
        named = [where for where in map(lambda p: placed.place(p, finding), places(sentence)) if where is not None]
        yield types.DiagnosticRelatedInformation(named[0] if named else own, sentence)
