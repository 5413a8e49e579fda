"""Azure Pipelines logging commands, one per finding, as ruff writes them (`##vso[task.logissue ...]message`):
the pipeline shows each as an error or a warning on its file and line. mhalint's errors are `type=error`, its
warnings and infos `type=warning` (Azure has no third kind). Values are escaped as the agent reads them: `%`, line
breaks, and in the properties also `;` and `]`, which would end a value."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding, Severity
from mhalint.names import printable
from mhalint.report import RenderOptions, file_place

if TYPE_CHECKING:
    from mhalint.rule import Rule


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    lines = []
    for finding in findings:
        place = file_place(finding)
        kind = "error" if finding.severity is Severity.ERROR else "warning"
        properties = {"type": kind, "sourcepath": printable(finding.path), "linenumber": place.line,
                      "columnnumber": place.column, "code": finding.code}
        listed = "".join(f"{key}={_property(str(value))};" for key, value in properties.items())
        lines.append(f"##vso[task.logissue {listed}]{_data(place.message)}")
    return "\n".join(lines)


def _data(text: str) -> str:
    return text.replace("%", "%AZP25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(";", "%3B").replace("]", "%5D")
