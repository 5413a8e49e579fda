"""Shared helpers: `lint(source, select=None, min_severity=None)` runs the loaded rules over a source snippet."""

from __future__ import annotations

import textwrap

import pytest

from mhalint.engine import Checker
from mhalint.finding import Finding, Severity
from mhalint.rule import load_rules

RULES = load_rules()


def lint(source: str, select: str | None = None, min_severity: Severity | str | None = None) -> list[Finding]:
    """Findings for a dedented source snippet; `select` keeps only rules whose code starts with it."""
    rules = [rule for code, rule in RULES.items() if select is None or code.startswith(select)]
    findings = Checker(rules).check_source(textwrap.dedent(source).encode(), "snippet.py")
    if min_severity is not None:
        threshold = Severity.parse(min_severity) if isinstance(min_severity, str) else min_severity
        findings = [f for f in findings if f.severity >= threshold]
    return findings


@pytest.fixture(name="lint")
def lint_fixture():
    return lint
