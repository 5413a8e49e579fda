"""SARIF 2.1.0, for GitHub code scanning and other SARIF viewers: one run whose driver describes every rule that
has a result (its summary, its documentation as help, a default level), and one result per finding with its
location, the fix as a replacement of text, and mhalint's own data (severity, evidence, arguments, the probe's
result) as properties.

Locations are relative URIs (POSIX separators, the path's bytes percent-encoded, so a file name that is not
valid UTF-8 keeps its bytes) based on `%SRCROOT%`, the directory mhalint ran
in; a path outside it becomes an absolute `file://` URI. Columns are 1-based Unicode code points with an
exclusive end, as in SARIF's `unicodeCodePoints` column kind, which the run declares (SARIF's default would be
UTF-16 code units). A finding in a notebook cell has lines counted within its cell, which are not lines of the
.ipynb file: its location is the notebook without a region, and the cell and the region within it are properties.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Iterable, Mapping
from urllib.parse import quote

from mhalint import __version__
from mhalint.finding import Edit, Finding, Severity
from mhalint.report import RenderOptions
from mhalint.run.diagnostics import ENGINE_CODES

if TYPE_CHECKING:
    from mhalint.rule import Rule

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
VERSION = "2.1.0"
INFORMATION_URI = "https://pypi.org/project/mhalint/"
SRCROOT = "%SRCROOT%"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
# Rules choose a severity per finding; a rule's default is the one Rule.report uses when none is given. The
# engine's own diagnostics (unreadable or unparsable files, a rule that crashed) are always errors.
RULE_DEFAULT, ENGINE_DEFAULT = Severity.WARNING, Severity.ERROR


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    return json.dumps(sarif_log(findings, rules), indent=2)


def sarif_log(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
              root: Path | None = None) -> dict:
    """The SARIF log as a dict; `root` (default: the current directory) is what relative paths are relative to."""
    findings = list(findings)
    root = (root or Path.cwd()).resolve()
    codes = sorted({f.code for f in findings})
    index = {code: position for position, code in enumerate(codes)}
    first = {}
    for finding in findings:
        first.setdefault(finding.code, finding)
    descriptors = [_descriptor(code, (rules or {}).get(code), first[code]) for code in codes]
    return {
        "$schema": SCHEMA_URI,
        "version": VERSION,
        "runs": [{
            "tool": {"driver": {"name": "mhalint", "version": __version__, "semanticVersion": __version__,
                                "informationUri": INFORMATION_URI, "rules": descriptors}},
            "originalUriBaseIds": {SRCROOT: {"uri": root.as_uri().rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": [_result(f, index[f.code], root) for f in findings],
        }],
    }


def _descriptor(code: str, rule: type[Rule] | None, example: Finding) -> dict:
    if rule is None:  # an engine diagnostic, or a code whose rule is not loaded
        text = ENGINE_CODES.get(code) or example.name or code
        descriptor = {"id": code, "shortDescription": {"text": text},
                      "defaultConfiguration": {"level": LEVELS[ENGINE_DEFAULT if code in ENGINE_CODES
                                                               else RULE_DEFAULT]}}
        if example.name:
            descriptor["name"] = example.name
        return descriptor
    documentation = rule.documentation()
    what = rule.doc_sections().get("What it does") or rule.summary
    return {
        "id": code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": what, "markdown": what},
        "help": {"text": documentation or rule.summary, "markdown": documentation or rule.summary},
        "defaultConfiguration": {"level": LEVELS[RULE_DEFAULT]},
    }


def _result(finding: Finding, rule_index: int, root: Path) -> dict:
    artifact = _artifact(finding.path, root)
    region = {"startLine": max(finding.line, 1), "startColumn": max(finding.column, 1)}
    if finding.end_line > finding.line or (finding.end_line == finding.line and finding.end_column >= finding.column):
        region["endLine"] = finding.end_line
        region["endColumn"] = finding.end_column
    physical: dict = {"artifactLocation": artifact}
    if finding.cell is None:
        physical["region"] = region
    result = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": LEVELS[finding.severity],
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": physical}],
    }
    if finding.fix is not None and finding.cell is None:  # a cell's fix counts lines within the cell
        result["fixes"] = [{
            "description": {"text": finding.fix.title or "apply mhalint's fix"},
            "artifactChanges": [{"artifactLocation": dict(artifact),
                                 "replacements": [_replacement(edit) for edit in finding.fix.edits]}],
            "properties": {"applicability": finding.fix.applicability},
        }]
    properties: dict = {"severity": str(finding.severity), "evidence": list(finding.evidence),
                        "help": finding.help, "explanation": finding.explanation,
                        "arguments": dict(finding.arguments)}
    if finding.name:
        properties["name"] = finding.name
    if finding.cell is not None:
        properties["cell"] = finding.cell
        properties["region_in_cell"] = region
    if finding.probe is not None:
        properties["probe"] = finding.probe.to_dict()
    result["properties"] = properties
    return result


def _replacement(edit: Edit) -> dict:
    replacement: dict = {"deletedRegion": {"startLine": edit.line, "startColumn": edit.column,
                                           "endLine": edit.end_line, "endColumn": edit.end_column}}
    if edit.content:
        replacement["insertedContent"] = {"text": edit.content}
    return replacement


def _artifact(path: str, root: Path) -> dict:
    """A relative URI under %SRCROOT% when the path lies under the root (or is relative), else a file:// URI."""
    pure = PurePath(path)
    if pure.is_absolute():
        try:
            pure = Path(path).resolve().relative_to(root)
        except ValueError:
            return {"uri": Path(path).resolve().as_uri()}
    # The path's own bytes, percent-encoded (RFC 3986, as Path.as_uri does): a name that is not valid UTF-8
    # holds surrogate escapes that cannot be encoded as text.
    return {"uri": quote(os.fsencode(pure.as_posix()), safe="/"), "uriBaseId": SRCROOT}
