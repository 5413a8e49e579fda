"""Every fix runs (issue 34): the fixes of each bad example in examples/ and of each rule's invalid examples,
applied by mhalint's own fixer with every rule and the unsafe fixes (as `mhalint check --fix --unsafe-fixes`),
are executed with torch, and the fixed code must run and no longer hold the corruption.

The corruption is measured two ways. A bad example's fixed code runs its fixed twin's own experiment (the twin's
`__main__` block) and must print what the twin prints, numbers within 1e-3. An invalid example is usually a
fragment: it runs after its rule's `example_inputs` (the free names as small synthetic tensors), with every
function and module it defines called, and neither the rule's check nor mhalint's runtime guard may report the
rule's code on the fixed code. All programs run in one subprocess per test (tests/execute_programs.py).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from mhalint.fixes import applicable, fix_source
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
RUNNER = Path(__file__).with_name("execute_programs.py")
RULES = load_rules()
MAIN = '\nif __name__ == "__main__":\n'
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def lint(source: str):
    return Checker(list(RULES.values())).check_source(source.encode(), "snippet.py")


def fixed(source: str) -> str | None:
    """The source with mhalint's fixes applied, unsafe ones included; None when no fix applies."""
    if not any(applicable(finding, unsafe=True) for finding in lint(source)):
        return None
    text, _ = fix_source(source, lint, unsafe=True)
    return text


def execute(cases: list[dict]) -> list[dict]:
    pytest.importorskip("torch")
    completed = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(cases), capture_output=True,
                               text=True, cwd=ROOT, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def same_output(printed: str, reference: str) -> bool:
    """The same words, and numbers equal within 1e-3 (absolute or relative)."""
    numbers, expected = NUMBER.findall(printed), NUMBER.findall(reference)
    return NUMBER.sub("#", printed) == NUMBER.sub("#", reference) and len(numbers) == len(expected) and all(
        math.isclose(float(a), float(b), rel_tol=1e-3, abs_tol=1e-3) for a, b in zip(numbers, expected))


def unresolved(before: str, after: str, guard: list[str]) -> list[str]:
    """What still reports a code whose fixes were applied, on the fixed code: its check (more findings left than
    those it had no fix for), the runtime guard."""
    found = lint(before)
    fixable = Counter(f.code for f in found if applicable(f, unsafe=True))
    total, left = Counter(f.code for f in found), Counter(f.code for f in lint(after))
    return ([f"{code} still reports {left[code]} of {total[code]}" for code in fixable
             if left[code] > total[code] - fixable[code]]
            + [f"the runtime guard reports {code}" for code in fixable if code in guard])


def test_each_bad_example_fixed_by_mhalint_runs_its_twins_experiment_as_the_twin_does():
    cases, names, sources, fixes = [], [], [], []
    for bad in sorted((ROOT / "examples").glob("*_bad.py")):
        text = fixed(bad.read_text())
        if text is None:
            continue
        twin = bad.with_name(bad.name.replace("_bad", "_fixed")).read_text()
        experiment = twin[twin.index(MAIN):]
        names.append(bad.name)
        source = bad.read_text()
        sources.append(source)
        fixes.append(text)
        cases += [{"prelude": "", "program": program, "call": False} for program in (
            text[:text.index(MAIN)] + experiment, twin, source[:source.index(MAIN)] + experiment)]
    assert len(names) >= 10, names  # most examples have a fix
    results = execute(cases)
    failures = []
    for number, name in enumerate(names):
        after, reference, before = results[3 * number:3 * number + 3]
        assert reference["error"] is None, (name, reference["error"])
        # the experiment sees the bug: the unfixed code prints something else (or raises)
        assert before["error"] or not same_output(before["stdout"], reference["stdout"]), (name, before)
        if after["error"]:
            failures.append(f"{name}: the fixed code raised {after['error']}")
        elif not same_output(after["stdout"], reference["stdout"]):
            failures.append(f"{name}: the fixed code printed {after['stdout']!r}, its twin {reference['stdout']!r}")
        failures += [f"{name}: after the fix, {what}" for what in unresolved(sources[number], fixes[number],
                                                                            after["guard"])]
    assert not failures, "\n".join(failures)


def test_each_invalid_examples_fixes_run_and_remove_what_the_rule_and_its_runtime_check_report():
    cases, labels = [], []
    for code, rule in RULES.items():
        for index, example in enumerate(rule.invalid):
            text = fixed(example.code)
            if text is None:
                continue
            labels.append((code, index, text, any(applicable(f, unsafe=True) for f in lint(example.code)
                                                   if f.code == code)))
            cases += [{"prelude": rule.example_inputs, "program": text, "call": True},
                      {"prelude": rule.example_inputs, "program": example.code, "call": True}]
    results = execute(cases)
    failures, measured = [], set()
    for (code, index, text, _), after, before in zip(labels, results[::2], results[1::2]):
        where = f"{code} invalid example {index}"
        if after["error"] and after["error"] != before["error"]:  # not an error no fix was offered for
            failures.append(f"{where}: the fixed code raised {after['error']} (the unfixed code: "
                            f"{before['error'] or 'ran'})\n{text}")
        failures += [f"{where}: after the fix, {what}\n{text}"
                     for what in unresolved(RULES[code].invalid[index].code, text, after["guard"])]
        if code in before["guard"]:
            measured.add(code)
    # the runtime measurement is not vacuous: a rule with a runtime check and fixes sees one of its examples unfixed
    guarded = {code for code, _, _, own in labels if own and RULES[code].guard is not None}
    failures += [f"{code}: the runtime guard reports none of its invalid examples before the fix"
                 for code in sorted(guarded - measured)]
    assert not failures, "\n\n".join(failures)
