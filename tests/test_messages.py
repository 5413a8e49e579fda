"""What every finding says: a short headline with the decisive evidence, and the detail in fields of its own.

These run over every loaded rule (its invalid examples) and over the bundled examples, so a new rule is held to
the same standard without a test of its own."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from mhalint.cli.main import main
from mhalint.finding import HEADLINE_LIMIT
from mhalint.rule import fit, load_rules, runtime_only
from mhalint.run.engine import Checker

RULES = load_rules()
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FACTS_LINK = re.compile(r"docs/torch-facts\.md#[a-z0-9-]+")


def _invalid_findings():
    for code, rule in RULES.items():
        for index, example in enumerate(rule.invalid):
            yield pytest.param(code, example.code, id=f"{code}-invalid-{index}")


def _example_findings():
    return Checker(list(RULES.values())).check_paths([EXAMPLES]).findings


@pytest.mark.parametrize(("code", "source"), list(_invalid_findings()))
def test_each_finding_has_a_short_headline_and_separate_detail(lint, code, source):
    findings = [f for f in lint(source, select=code) if f.code == code]
    assert findings
    for finding in findings:
        assert 20 <= len(finding.message) <= HEADLINE_LIMIT, finding.message
        assert "\n" not in finding.message
        for repeated in ("Evidence:", "Fix:", "measured"):  # detail belongs in its own field, not the headline
            assert repeated not in finding.message, finding.message
        assert finding.evidence and all(len(line) <= HEADLINE_LIMIT for line in finding.evidence), finding.evidence
        assert finding.help, f"{code}: no help line for {finding.message!r}"
        assert FACTS_LINK.search(finding.explanation), f"{code}: the explanation cites no torch fact"


def test_the_bundled_examples_follow_the_same_standard():
    findings = _example_findings()
    assert {f.code for f in findings} >= {code for code, rule in RULES.items() if not runtime_only(rule)}
    for finding in findings:
        assert len(finding.message) <= HEADLINE_LIMIT and finding.help and FACTS_LINK.search(finding.explanation)


def test_concise_output_of_the_examples_is_at_most_200_characters_after_the_path():
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", str(EXAMPLES)])
    assert result.exit_code == 1
    findings = [line for line in result.output.splitlines() if line.startswith(str(EXAMPLES))]
    assert len(findings) == len(_example_findings())
    for line in findings:
        after_path = line[len(line.split(".py:", 1)[0]) + len(".py"):]
        assert len(after_path) <= 200, line


@pytest.mark.parametrize("code", sorted(RULES))
def test_a_rules_explanations_and_documentation_say_where_numbers_come_from(code):
    """A number from a torch experiment must not read as a measurement of the user's code."""
    rule = RULES[code]
    assert FACTS_LINK.search(rule.documentation()), f"{code}'s documentation cites no section of the torch facts"
    texts = [rule.documentation()] + [m.explanation for m in rule.messages().values()]
    for text in texts:
        assert not re.search(r"\bmeasured\b", text, re.IGNORECASE), f"{code}: {text[:200]}"
        assert "facts sheet" not in text


@pytest.mark.parametrize("code", sorted(code for code, rule in RULES.items() if not runtime_only(rule)))
def test_every_report_uses_a_message_named_at_the_top_of_the_rule_file(code):
    """pyflakes' model: the texts a rule can show are module constants, so they are read and reviewed in one place."""
    rule = RULES[code]
    messages = rule.messages()
    assert messages, f"{code} defines no Message"
    tree = ast.parse(inspect.getsource(importlib.import_module(rule.__module__)))
    first_class = next(i for i, node in enumerate(tree.body) if isinstance(node, ast.ClassDef))
    defined_before_class = {target.id for node in tree.body[:first_class] if isinstance(node, ast.Assign)
                            for target in node.targets if isinstance(target, ast.Name)}
    assert set(messages) <= defined_before_class, "Message constants come before the rule class"
    reports = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
               and isinstance(node.func, ast.Attribute) and node.func.attr == "report"]
    assert reports
    for call in reports:
        assert len(call.args) >= 2 and isinstance(call.args[1], (ast.Name, ast.IfExp)), ast.unparse(call)
        named = [call.args[1]] if isinstance(call.args[1], ast.Name) else [call.args[1].body, call.args[1].orelse]
        assert all(isinstance(n, ast.Name) and n.id in messages for n in named), ast.unparse(call)


# -------------------------------------------------------------------------------------------------- fit()


def test_fit_keeps_a_short_headline_as_it_is():
    assert fit("{api} gets {mask}", {"api": "SDPA", "mask": "`pad`"}, 160) == "SDPA gets `pad`"


def test_fit_shortens_the_longest_field_and_never_the_fixed_words():
    code = "`" + "x" * 300 + "`"
    text = fit("{api} gets attn_mask={mask}, a bool mask in the other convention", {"api": "SDPA", "mask": code}, 100)
    assert len(text) == 100
    assert text.startswith("SDPA gets attn_mask=`xxx") and text.endswith("..., a bool mask in the other convention")


def test_fit_shortens_two_long_fields_until_the_text_fits():
    fields = {"a": "a" * 120, "b": "b" * 90}
    text = fit("{a} and {b}", fields, 120)
    assert len(text) <= 120 and " and " in text and "a" * 16 in text and "b" * 16 in text


def test_fit_cuts_the_text_only_when_fields_cannot_give_more():
    text = fit("a long fixed sentence {n}", {"n": 12345}, 10)
    assert text == "a long ..."


def test_rule_command_lists_the_headlines_a_rule_reports():
    rule = RULES["MHA001"]
    output = CliRunner().invoke(main, ["rule", "MHA001"]).output
    assert "## Messages" in output
    assert all(message.headline in output for message in rule.messages().values())
