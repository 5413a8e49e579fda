"""pylint's (and flake8's `--format=pylint`) one line per finding, as ruff writes it: `path:line: [CODE] message`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding
from mhalint.names import printable
from mhalint.report import RenderOptions, file_place

if TYPE_CHECKING:
    from mhalint.rule import Rule


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    lines = []
    for finding in findings:
        place = file_place(finding)
        lines.append(f"{printable(finding.path)}:{place.line}: [{finding.code}] {place.message}")
    return "\n".join(lines)
