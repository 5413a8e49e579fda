"""`--statistics`: one row per code instead of one per finding, as ruff prints it.

    3	MHA007	[*] weights-discarded
    1	MHA001	[ ] batch-first-default

Rows are sorted by count, most first, then by code; `[*]` marks a code of which some finding is fixable (with
`--unsafe-fixes`, an unsafe fix counts). With the json format the same rows are a JSON array of objects with
ruff's keys (code, name, count, fixable, fixable_count).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding
from mhalint.report import FIXABLE, RenderOptions

if TYPE_CHECKING:
    from mhalint.rule import Rule


def rows(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
         options: RenderOptions = RenderOptions()) -> list[dict]:
    by_code: dict[str, list[Finding]] = {}
    for finding in findings:
        by_code.setdefault(finding.code, []).append(finding)
    table = []
    for code, found in by_code.items():
        rule = (rules or {}).get(code)
        fixable = sum(1 for f in found if options.fixable(f))
        table.append({"code": code, "name": rule.name if rule is not None else found[0].name, "count": len(found),
                      "fixable": fixable > 0, "fixable_count": fixable})
    return sorted(table, key=lambda row: (-row["count"], row["code"]))


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    table = rows(findings, rules, options)
    if not table:
        return ""
    count_width = max(len(str(row["count"])) for row in table)
    code_width = max(len(row["code"]) for row in table)
    return "\n".join(f"{row['count']:>{count_width}}\t{row['code']:<{code_width}}\t"
                     f"{FIXABLE if row['fixable'] else '[ ]'} {row['name']}" for row in table)


def render_json(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
                options: RenderOptions = RenderOptions()) -> str:
    return json.dumps(rows(findings, rules, options), indent=2)
