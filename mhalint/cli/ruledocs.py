"""Rule documentation in the forms users read it: text for `mhalint rule`, JSON, the README's table, and the docs
site's page per rule (`page`, with the rule's examples, what they report and what their fix gives).

Everything comes from the rule classes themselves (code, name, summary, docstring sections, examples), so the docs
cannot drift from the rules; tests compare the README's table with `markdown_table` and each page under docs/rules/
with `page` (`python scripts/docs.py` writes them).
"""

from __future__ import annotations

from typing import Mapping

from mhalint.finding import SAFE, UNSAFE, Finding
from mhalint.fixes import fix_source
from mhalint.rule import Rule, runtime_only
from mhalint.run.diagnostics import ENGINE_CODES, ENGINE_EXPLANATIONS
from mhalint.run.engine import Checker
from mhalint.run.noqa import UNUSED_NOQA, UNUSED_NOQA_NAME

TABLE_START, TABLE_END = "<!-- rules-table:start -->", "<!-- rules-table:end -->"


def text(rule: type[Rule]) -> str:
    """The documentation, then the headlines the rule reports (its Message templates, fields in braces)."""
    headlines = "".join(f"- {message.headline}\n" for message in rule.messages().values())
    listed = f"\n\n## Messages\n{headlines}" if headlines else ""
    return f"# {rule.name} ({rule.code})\n\n{rule.documentation()}{listed}"


def as_dict(rule: type[Rule]) -> dict:
    return {"code": rule.code, "name": rule.name, "summary": rule.summary, "sections": rule.doc_sections(),
            "messages": {name: {"headline": m.headline, "help": m.help, "explanation": m.explanation}
                         for name, m in rule.messages().items()},
            "fix": fix_availability(rule), "probe": rule.probe is not None, "guard": rule.guard is not None,
            "runtime_only": runtime_only(rule)}


def fix_availability(rule: type[Rule]) -> str:
    """What the Fix safety section promises: "safe", "unsafe" or "none" (read from its first word)."""
    first = rule.doc_sections().get("Fix safety", "").split()
    word = first[0].strip(".,:;").lower() if first else ""
    return word if word in (SAFE, UNSAFE) else "none"


def markdown_table(rules: Mapping[str, type[Rule]]) -> str:
    rows = ["| code | name | what it flags | fix | probe | guard |", "|---|---|---|---|---|---|"]
    for rule in rules.values():
        rows.append(f"| {rule.code} | {rule.name} | {rule.summary} | {fix_availability(rule)} | "
                    f"{'yes' if rule.probe is not None else 'no'} | "
                    f"{'only' if runtime_only(rule) else 'yes' if rule.guard is not None else 'no'} |")
    return "\n".join(rows)


def rules_index(rules: Mapping[str, type[Rule]]) -> str:
    """The docs site's rules page: the table, each code linking to its page."""
    table = markdown_table(rules).splitlines()
    linked = [row.replace(f"| {code} |", f"| [{code}]({code}.md) |", 1)
              for row, code in zip(table[2:], rules)]
    return ("# Rules\n\nEach rule's page is generated from the rule itself (`python scripts/docs.py`): its "
            "documentation, the headlines it reports, and its examples with what mhalint reports on them and what the "
            "fix gives. `mhalint rule CODE` prints the same documentation.\n\n"
            + "\n".join([*table[:2], *linked]) + "\n")


def page(rule: type[Rule]) -> str:
    """A rule's page: its documentation and messages (as `mhalint rule` prints them), then its examples, each
    flagged one with the findings mhalint reports on it and the code its fix gives (as `--unsafe-fixes` would)."""
    parts = [text(rule).rstrip("\n")]
    if rule.invalid or rule.valid:
        parts.append("## Examples\n\nThe rule's own examples, which the test suite runs.")
    for example in rule.invalid:
        parts.append(_flagged(rule, example.code))
    for example in rule.valid:
        parts.append(f"Not flagged:\n\n```python\n{example.code.strip(chr(10))}\n```")
    return "\n\n".join(parts) + "\n"


def example_outcome(rule: type[Rule], code: str) -> tuple[list[Finding], str | None]:
    """What the rule alone reports on an example, and the source `--fix --unsafe-fixes` makes of it (None when it
    offers no fix): what a rule's page shows and what its `Invalid` examples pin."""
    def lint(source: str) -> list[Finding]:
        return Checker([rule]).check_source(source.encode(), "example.py")

    fixed, count = fix_source(code, lint, unsafe=True)
    return lint(code), fixed if count else None


def _flagged(rule: type[Rule], code: str) -> str:
    found, fixed = example_outcome(rule, code)
    reported = "".join(f"- line {f.line}: `{f.code} [{f.severity}]` {f.message}\n" for f in found)
    shown = f"Flagged:\n\n```python\n{code.strip(chr(10))}\n```\n\n{reported}"
    if fixed is not None:
        safety = fix_availability(rule)
        shown += f"\nWith the fix ({safety}):\n\n```python\n{fixed.strip(chr(10))}\n```\n"
    return shown.rstrip("\n")


def lookup(rules: Mapping[str, type[Rule]], code_or_name: str) -> type[Rule] | str | None:
    """The rule with this code or name (`MHA001`, `batch-first-default`, any case), the engine's code when it is
    one of those (`MHA900`, or its finding's name, `unused-noqa`), or None."""
    wanted = code_or_name.strip().lower()
    for rule in rules.values():
        if wanted in (rule.code.lower(), rule.name.lower()):
            return rule
    engine = {code.lower(): code for code in ENGINE_CODES} | {UNUSED_NOQA_NAME: UNUSED_NOQA}
    return engine.get(wanted)


def engine_text(code: str) -> str:
    """The engine's own codes (MHA900 and up): reported like findings, documented like rules."""
    return (f"# {ENGINE_CODES[code]} ({code})\n\nReported by mhalint's engine, not by a rule.\n\n"
            f"{ENGINE_EXPLANATIONS[code]}")


def engine_dict(code: str) -> dict:
    return {"code": code, "name": ENGINE_CODES[code], "engine": True, "explanation": ENGINE_EXPLANATIONS[code]}
