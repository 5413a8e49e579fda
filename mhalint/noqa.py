"""`# noqa` and `# noqa: MHA001,MHA004` suppression, as flake8 and ruff read them.

A directive applies to the line a finding is reported on (where the call starts). Only real comments count: the
source is tokenized, so `"# noqa"` inside a string suppresses nothing.
"""

from __future__ import annotations

import re
from typing import Iterable

from mhalint.comments import comments
from mhalint.finding import Finding

_DIRECTIVE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
ALL = frozenset({"*"})


def directives(source: str) -> dict[int, frozenset[str]]:
    """Line number -> the codes suppressed there (ALL for a bare `# noqa`)."""
    found: dict[int, frozenset[str]] = {}
    for line, comment in comments(source).items():
        match = _DIRECTIVE.search(comment)
        if match is None:
            continue
        codes = match.group("codes")
        found[line] = ALL if codes is None else frozenset(code.upper() for code in _CODE.findall(codes))
    return found


def suppress(findings: Iterable[Finding], source: str) -> list[Finding]:
    findings = list(findings)
    if not findings:
        return findings
    table = directives(source)
    return [f for f in findings if not _suppressed(f, table.get(f.line))]


def _suppressed(finding: Finding, codes: frozenset[str] | None) -> bool:
    if codes is None:
        return False
    return codes is ALL or finding.code in codes
