"""Hover on a flagged span: each finding there with its headline, evidence, help and fix, then its rule's
documentation (`mhalint rule CODE`'s text)."""

from __future__ import annotations

from typing import Sequence

from lsprotocol import types

from mhalint.finding import SAFE, Finding
from mhalint.server.rule_docs import RuleDocs


def hover(findings: Sequence[Finding], docs: RuleDocs, hover_range: types.Range, markdown: bool) -> types.Hover:
    """The hover of the findings at the position (all of them, in report order)."""
    text = "\n\n---\n\n".join(_one(finding, docs, markdown) for finding in findings)
    kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
    return types.Hover(types.MarkupContent(kind, text), hover_range)


def _one(finding: Finding, docs: RuleDocs, markdown: bool) -> str:
    bold = "**" if markdown else ""
    parts = [f"{bold}{finding.code} {finding.name}{bold} ({finding.severity}): {finding.message}"]
    if finding.evidence:
        parts.append("Evidence:\n" + "\n".join(f"- {sentence}" for sentence in finding.evidence))
    if finding.help:
        parts.append(f"Help: {finding.help}")
    if finding.fix is not None:
        safety = "safe" if finding.fix.applicability == SAFE else "unsafe: it changes behaviour"
        parts.append(f"Fix ({safety}): {finding.fix.title}")
    documentation = docs.text(finding.code)
    if documentation:
        parts.append(_demoted(documentation) if markdown else documentation)
    return "\n\n".join(parts)


def _demoted(documentation: str) -> str:
    """The rule's Markdown with its headings two levels down, under the finding's own lines (a `#` comment in a
    fenced code block stays as it is)."""
    lines, fenced = [], False
    for line in documentation.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        lines.append(f"##{line}" if line.startswith("#") and not fenced else line)
    return "\n".join(lines)
