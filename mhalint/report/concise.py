"""`path:line:col: CODE [severity] headline`, one line per finding, as flake8 and ruff print; `[*]` after the
severity marks a finding that `--fix` resolves (as ruff marks it); with `--probe`, the probe's result goes on an
indented line under its finding. With colour, the path is bold and the code and severity take the full format's
colour for the severity, as ruff styles its concise lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding
from mhalint.report import FIXABLE, SEVERITY_COLOR, Painter, RenderOptions

if TYPE_CHECKING:
    from mhalint.rule import Rule


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    paint = Painter(options.color)
    lines = []
    for f in findings:
        code = paint(f"{f.code} [{f.severity}]", fg=SEVERITY_COLOR[f.severity], bold=True)
        mark = f" {paint(FIXABLE, fg='cyan')}" if options.fixable(f) else ""
        lines.append(f"{paint(f.location, bold=True)}: {code}{mark} {f.message}")
        if f.probe is not None:
            version = f" (torch {f.probe.torch_version})" if f.probe.torch_version else ""
            lines.append(f"    probe {f.probe.status}{version}: {f.probe.evidence}")
    return "\n".join(lines)
