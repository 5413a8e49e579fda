"""JUnit XML, as ruff writes it: a test suite per file and a failing test case per finding, named after its code,
its failure the headline and `line L, col C, headline`, so a CI system that shows test reports shows the findings;
a run without findings is one passing case, "No errors found". Unlike ruff's, a test case has no `line` and
`column` attributes: the Jenkins JUnit schema (the one ruff's documentation names, tests/data/junit.xsd) does not
allow them, and readers that follow it reject the report."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from itertools import groupby
from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding
from mhalint.names import printable
from mhalint.report import RenderOptions, file_place

if TYPE_CHECKING:
    from mhalint.rule import Rule

PACKAGE = "mhalint"


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    findings = list(findings)
    report = ET.Element("testsuites", name=PACKAGE, tests=str(max(len(findings), 1)), failures=str(len(findings)),
                        errors="0")
    if not findings:
        suite = _suite(report, PACKAGE, 1, 0)
        ET.SubElement(suite, "testcase", name="No errors found", classname=PACKAGE)
    for path, group in groupby(findings, key=lambda f: f.path):
        found = list(group)
        suite = _suite(report, printable(path), len(found), len(found))
        classname = os.path.splitext(printable(path))[0]
        for finding in found:
            place = file_place(finding)
            case = ET.SubElement(suite, "testcase", name=f"{PACKAGE}.{finding.code}", classname=classname)
            failure = ET.SubElement(case, "failure", message=place.message)
            failure.text = f"line {place.line}, col {place.column}, {place.message}"
    ET.indent(report, space="    ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(report, encoding="unicode")


def _suite(report: ET.Element, name: str, tests: int, failures: int) -> ET.Element:
    return ET.SubElement(report, "testsuite", name=name, tests=str(tests), disabled="0", errors="0",
                         failures=str(failures), package=PACKAGE)
