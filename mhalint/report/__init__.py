"""Output formats: one module per format, each a `render(findings, rules=None, options=RenderOptions()) -> str`.

`rules` is `mhalint.rule.load_rules()` (code -> rule class); only the formats that describe rules (SARIF) use it.
`options` are the reader's choices that only the human-readable formats (`concise`, `full`) have a use for. The
others accept and ignore both, so the command line can call every format the same way. An empty string means
there is nothing to print.

What each format shows of a finding: `concise`, `github` and flake8 print its headline (at most 160 characters);
`full` the headline, a code frame, the evidence, the help line and the probe's result, and the explanation with
`--explain`; `json`, `json-lines` and `sarif` carry every field.

Beside the formats: `printer` prints a check's findings in one of them (file by file for `concise` and `full`),
`statistics` is `--statistics`' table, and `load` reads a saved report back for `mhalint probe`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import click

from mhalint.finding import Finding, Severity
from mhalint.fixes import applicable

SEVERITY_COLOR = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
FIXABLE = "[*]"  # ruff's mark of a finding that `--fix` resolves


@dataclass(frozen=True)
class RenderOptions:
    explain: bool = False  # show each finding's explanation (the long why)
    color: bool = False  # style the text with ANSI escapes
    unsafe_fixes: bool = False  # --unsafe-fixes: a finding with an unsafe fix is fixable too

    def fixable(self, finding: Finding) -> bool:
        """Whether `--fix` (with these options' `--unsafe-fixes`) would resolve the finding: what `[*]` marks."""
        return applicable(finding, self.unsafe_fixes)


class FilePlace(NamedTuple):
    line: int
    column: int
    end_line: int
    end_column: int
    message: str


def file_place(finding: Finding) -> FilePlace:
    """Where a finding is and what it says, in the file's own terms, for the formats that know no notebook cells: a
    finding in a cell is placed at line 1, column 1 of the .ipynb file (its cell lines are not the file's lines, as
    ruff's structured formats place it), ending there, and its message starts with where it is in the cell. A
    finding with no end ends where it starts."""
    if finding.cell is None:
        end = (finding.end_line, finding.end_column) if finding.end_line else (finding.line, finding.column)
        return FilePlace(finding.line, finding.column, *end, finding.message)
    return FilePlace(1, 1, 1, 1, f"cell {finding.cell}, line {finding.line}, column {finding.column}: "
                                 f"{finding.message}")


class Painter:
    """click.style when colour is on, the text unchanged when it is off."""

    def __init__(self, color: bool):
        self.color = color

    def __call__(self, text: str, **style) -> str:
        return click.style(text, **style) if self.color and text else text
