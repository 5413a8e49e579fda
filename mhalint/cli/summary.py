"""The words of the lines that end a run: what was found and checked, what was hidden, what `--fix` can do.

They follow ruff's: "Found 3 findings (12 files checked).", "2 fixable with --fix (1 hidden fix can be enabled
with --unsafe-fixes).", "Fixed 2 findings." after `--fix`, "Would fix 2 findings." after `--diff`; a count
hidden by `--min-severity` names the lowest severity that would show every hidden finding.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

from mhalint.finding import PROBE_STATUSES, SAFE, Finding, Severity
from mhalint.fixes import applicable, fixed_codes  # noqa: F401 (cli's --show-fixes counts as fix_source does)
from mhalint.names import printable


def plural(count: int, word: str) -> str:
    """`1 finding`, `2 findings`."""
    return f"{count} {word if count == 1 else word + 's'}"


def found(count: int, files: int, hidden: Sequence[Finding], threshold: Severity, unparsed: int = 0) -> str:
    """`Found 2 findings (3 files checked).`, or `All checks passed! (...)`; the files checked without a parse
    (nothing in their code that a rule acts on: a syntax error there goes unseen) are counted, and so are the
    findings below the threshold, with the lowest `--min-severity` that shows them all."""
    checked = f"{plural(files, 'file')} checked"
    if unparsed:
        checked += f", {unparsed} of them not parsed: no attention API in their code, --parse-all checks their syntax"
    if hidden:
        lowest = min(finding.severity for finding in hidden)
        checked += f"; {len(hidden)} below {threshold} hidden, --min-severity {lowest} shows them"
    if count == 0:
        return f"All checks passed! ({checked})"
    return f"Found {plural(count, 'finding')} ({checked})."


def hidden_fixes(findings: Iterable[Finding], unsafe_fixes: bool) -> int:
    """Findings whose fix only `--unsafe-fixes` applies, when it is not given (ruff's "hidden fixes")."""
    if unsafe_fixes:
        return 0
    return sum(1 for f in findings if f.fix is not None and f.fix.applicability != SAFE)


def _hidden_note(hidden: int) -> str:
    fixes = "fix" if hidden == 1 else "fixes"
    return f"{hidden} hidden {fixes} can be enabled with --unsafe-fixes"


def fixable(findings: Sequence[Finding], unsafe_fixes: bool) -> str:
    """`2 fixable with --fix (1 hidden fix can be enabled with --unsafe-fixes).`; empty when nothing is."""
    count = sum(1 for f in findings if applicable(f, unsafe_fixes))
    hidden = hidden_fixes(findings, unsafe_fixes)
    if not hidden:
        return f"{count} fixable with --fix." if count else ""
    if not count:
        return f"No fixes available ({_hidden_note(hidden)})."
    return f"{count} fixable with --fix ({_hidden_note(hidden)})."


def fixed(applied: int, remaining: Sequence[Finding], unsafe_fixes: bool) -> str:
    """`Fixed 2 findings. 1 hidden fix can be enabled with --unsafe-fixes.`: the unsafe fixes left among what
    remains (ruff too says it after what it fixed)."""
    hidden = hidden_fixes(remaining, unsafe_fixes)
    return f"Fixed {plural(applied, 'finding')}.{f' {_hidden_note(hidden)}.' if hidden else ''}"


def would_fix(applied: int, findings: Sequence[Finding], unsafe_fixes: bool) -> str:
    """The line `--diff` ends with: `Would fix 2 findings (1 hidden fix can be enabled with --unsafe-fixes).`"""
    hidden = hidden_fixes(findings, unsafe_fixes)
    note = f" ({_hidden_note(hidden)})" if hidden else ""
    return f"Would fix {plural(applied, 'finding')}{note}." if applied else f"No findings would be fixed{note}."


def fixes_by_file(counts: Counter, names: dict[str, str]) -> str:
    """`--show-fixes`: what was fixed, by file and code, as ruff lists it.

        Fixed 3 findings:
        - model.py:
            2 × MHA007 (weights-discarded)
    """
    total = sum(counts.values())
    lines = [f"Fixed {plural(total, 'finding')}:"] if total else []
    for path in sorted({path for path, _ in counts}):
        lines.append(f"- {printable(path)}:")
        lines += [f"    {counts[path, code]} × {code} ({names.get(code, '')})".removesuffix(" ()")
                  for code in sorted(code for where, code in counts if where == path)]
    return "\n".join(lines)


def probe_counts(findings: Iterable[Finding]) -> str:
    """`Probe: 2 confirmed, 1 reproduced, 0 not confirmed, 1 skipped.` over the findings that were probed."""
    probed = [f.probe.status for f in findings if f.probe is not None]
    return "Probe: " + ", ".join(f"{probed.count(status)} {status}" for status in PROBE_STATUSES) + "."
