"""reviewdog's Diagnostic Format (rdjson), as ruff writes it: a source, then one diagnostic per finding with its
message, location and range, code (with the URL of its rule's page) and severity, and its fix's edits as
suggestions, which reviewdog can post as suggested changes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint import HOME
from mhalint.finding import Finding, Severity
from mhalint.names import printable
from mhalint.report import RenderOptions, file_place

if TYPE_CHECKING:
    from mhalint.rule import Rule

SEVERITIES = {Severity.ERROR: "ERROR", Severity.WARNING: "WARNING", Severity.INFO: "INFO"}


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    return json.dumps({"source": {"name": "mhalint", "url": HOME}, "severity": "WARNING",
                       "diagnostics": [_diagnostic(finding) for finding in findings]}, indent=2)


def _diagnostic(finding: Finding) -> dict:
    place = file_place(finding)
    span = _range(place.line, place.column, place.end_line, place.end_column)
    diagnostic = {"message": place.message, "location": {"path": printable(finding.path), "range": span},
                  "severity": SEVERITIES[finding.severity],
                  "code": {"value": finding.code, "url": f"{HOME}/blob/main/docs/rules/{finding.code}.md"}}
    if finding.fix is not None and finding.cell is None:  # a notebook's edits are in cell lines, not the file's
        diagnostic["suggestions"] = [{"range": _range(e.line, e.column, e.end_line, e.end_column), "text": e.content}
                                     for e in finding.fix.edits]
    return diagnostic


def _range(line: int, column: int, end_line: int, end_column: int) -> dict:
    return {"start": {"line": line, "column": column}, "end": {"line": end_line, "column": end_column}}
