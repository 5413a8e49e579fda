"""`path:line:col: CODE [severity] message`, one line per finding, as flake8 and ruff print; a probe result goes on
an indented line under its finding."""

from __future__ import annotations

from typing import Iterable

from mhalint.finding import Finding


def render(findings: Iterable[Finding]) -> str:
    lines = []
    for f in findings:
        lines.append(f"{f.path}:{f.line}:{f.column}: {f.code} [{f.severity}] {f.message}")
        if f.probe is not None:
            version = f" (torch {f.probe.torch_version})" if f.probe.torch_version else ""
            lines.append(f"    probe {f.probe.status}{version}: {f.probe.evidence}")
    return "\n".join(lines)
