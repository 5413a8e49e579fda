"""Every loaded rule's `valid` and `invalid` examples run as tests, so a rule's documentation cannot drift."""

from __future__ import annotations

import pytest

from mhalint.rule import load_rules

RULES = load_rules()


def _examples(kind: str):
    for code, rule in RULES.items():
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(code, example, id=f"{code}-{kind}-{index}")


def test_every_rule_has_examples():
    assert set(RULES) >= {"MHA001", "MHA002", "MHA003", "MHA004"}
    for code, rule in RULES.items():
        assert rule.valid, f"{code} has no valid examples"
        assert rule.invalid, f"{code} has no invalid examples"


@pytest.mark.parametrize(("code", "example"), list(_examples("valid")))
def test_valid_example_is_not_flagged(lint, code, example):
    found = lint(example.code, select=code)
    assert [f for f in found if f.code == code] == []
    # an internal error (MHA902) would also mean the rule never really looked at the example
    assert [f for f in found if f.code.startswith("MHA9")] == []


@pytest.mark.parametrize(("code", "example"), list(_examples("invalid")))
def test_invalid_example_is_flagged(lint, code, example):
    found = lint(example.code, select=code)
    assert [f for f in found if f.code.startswith("MHA9")] == []
    mine = [f for f in found if f.code == code]
    assert mine, f"{code} did not flag:\n{example.code}"
    first = mine[0]
    if example.line is not None:
        assert first.line == example.line
    if example.message is not None:
        assert example.message in first.message
    if example.severity is not None:
        assert first.severity == example.severity
