"""GitHub Actions workflow commands: one `::error`, `::warning` or `::notice` line per finding, which the runner
turns into an annotation on the file and line (in the log and in the pull request's diff).

    ::warning file=model.py,line=20,col=21,endLine=20,endColumn=64,title=MHA001 batch-first-default::message

Values are escaped as the runner's parser expects: `%`, `\\r` and `\\n` everywhere, and `:` and `,` also in the
properties, where they would end a value. Before that, a file name with a control character is quoted as every
text output quotes it (mhalint.names), so that none reaches the log. A finding in a notebook cell annotates the
notebook file as a whole (its cell lines are not lines of the .ipynb file) and names the cell, line and column at
the start of the message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding, Severity
from mhalint.names import printable
from mhalint.report import RenderOptions

if TYPE_CHECKING:
    from mhalint.rule import Rule

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    return "\n".join(_line(finding) for finding in findings)


def _line(finding: Finding) -> str:
    properties: dict[str, object] = {"file": printable(finding.path)}
    message = finding.message
    if finding.cell is None:
        properties.update(line=finding.line, col=finding.column)
        if finding.end_line:
            properties.update(endLine=finding.end_line, endColumn=finding.end_column)
    else:  # lines within a notebook cell are not lines of the .ipynb file: annotate the file, say where in words
        message = f"cell {finding.cell}, line {finding.line}, column {finding.column}: {message}"
    properties["title"] = f"{finding.code} {finding.name}" if finding.name else finding.code
    listed = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{COMMANDS[finding.severity]} {listed}::{escape_data(message)}"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
