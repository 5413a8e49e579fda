"""The documentation users read is generated from the rules, and the rules keep the promises of their docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mhalint import ruledocs
from mhalint.engine import Checker
from mhalint.rule import DOC_SECTIONS, load_rules

RULES = load_rules()
README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_rules_table_matches_the_rules():
    text = README.read_text()
    table = text.split(ruledocs.TABLE_START, 1)[1].split(ruledocs.TABLE_END, 1)[0].strip()
    assert table == ruledocs.markdown_table(RULES), (
        "README's rules table is out of date: paste the output of `mhalint rule --all --output-format markdown`")


def test_readme_has_a_paragraph_for_every_rule():
    text = README.read_text()
    for code, rule in RULES.items():
        assert re.search(rf"\*\*{code} {re.escape(rule.name)}\.\*\*", text), f"no README paragraph for {code}"


@pytest.mark.parametrize("code", sorted(RULES))
def test_every_rule_documents_the_ruff_sections_in_order(code):
    sections = list(RULES[code].doc_sections())
    assert sections == list(DOC_SECTIONS), f"{code} has sections {sections}"


@pytest.mark.parametrize("code", sorted(RULES))
def test_fix_safety_section_matches_the_fixes_the_rule_offers(code):
    rule = RULES[code]
    promised = ruledocs.fix_availability(rule)
    offered = {f.fix.applicability for example in rule.invalid
               for f in Checker([rule]).check_source(example.code.encode(), "example.py") if f.fix is not None}
    if promised == "none":
        assert offered == set(), f"{code} says it has no fix but offers {offered}"
    else:
        assert offered == {promised}, f"{code} promises {promised} fixes; its invalid examples give {offered}"
