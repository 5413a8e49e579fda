"""The check every rule's test file makes of the headlines its invalid examples get (imported like aliases.py).

What every headline must be (its length, no "Evidence:" or "Fix:", short evidence lines, a help line) is checked
once for all rules in test_messages.py; this adds what each rule's table pins: the severity and the rule's own
details that must stay out of the headline."""

from __future__ import annotations

from conftest import lint

from mhalint.finding import Finding, Severity


def invalid_example_finding(rule, index: int, severity: Severity, forbidden: tuple[str, ...] = ()) -> Finding:
    """The rule's first finding on its invalid example `index`, at `severity`, and without the details that have
    fields of their own (`forbidden`: the rule's experiment numbers and source lines) in its headline."""
    finding = next(f for f in lint(rule.invalid[index].code, rule.code) if f.code == rule.code)
    assert finding.severity == severity, finding.message
    for detail in forbidden:
        assert detail not in finding.message, finding.message
    return finding
