"""`path:line:col: CODE [severity] headline`, one line per finding, as flake8 and ruff print; with `--probe`, the
probe's result goes on an indented line under its finding."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding
from mhalint.report import RenderOptions

if TYPE_CHECKING:
    from mhalint.rule import Rule


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    lines = []
    for f in findings:
        lines.append(f"{f.location}: {f.code} [{f.severity}] {f.message}")
        if f.probe is not None:
            version = f" (torch {f.probe.torch_version})" if f.probe.torch_version else ""
            lines.append(f"    probe {f.probe.status}{version}: {f.probe.evidence}")
    return "\n".join(lines)
