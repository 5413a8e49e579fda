"""Findings grouped by file, as ruff's `grouped` format prints them: the path, then one indented line per finding
(`line:column CODE [severity] [*] headline`, the numbers aligned within the file), then an empty line. A finding in
a notebook starts with its cell (`cell 3:2:5`)."""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding
from mhalint.names import printable
from mhalint.report import FIXABLE, SEVERITY_COLOR, Painter, RenderOptions

if TYPE_CHECKING:
    from mhalint.rule import Rule


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    paint = Painter(options.color)
    blocks = []
    for path, group in groupby(findings, key=lambda f: f.path):
        found = list(group)
        rows = max(len(str(f.line)) for f in found)
        columns = max(len(str(f.column)) for f in found)
        lines = [paint(f"{printable(path)}:", underline=True)]
        for f in found:
            cell = f"cell {f.cell}:" if f.cell is not None else ""
            place = f"{' ' * (rows - len(str(f.line)))}{cell}{f.line}:{f.column:<{columns}}"
            code = paint(f"{f.code} [{f.severity}]", fg=SEVERITY_COLOR[f.severity], bold=True)
            mark = f" {paint(FIXABLE, fg='cyan')}" if options.fixable(f) else ""
            lines.append(f"  {place} {code}{mark} {f.message}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
