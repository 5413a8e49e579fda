"""GitLab's Code Quality report, as ruff writes it: a JSON array with one issue per finding (`check_name`, a
`description` that starts with the code, since GitLab shows no other field, a `severity`, a `fingerprint` unique
in the report and stable from run to run, and the location). Paths are relative to `$CI_PROJECT_DIR` when it is
set, as GitLab wants them. Severities: error is `major`, warning `minor`, info `info`."""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding, Severity
from mhalint.names import printable
from mhalint.report import RenderOptions, file_place

if TYPE_CHECKING:
    from mhalint.rule import Rule

SEVERITIES = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    project = os.environ.get("CI_PROJECT_DIR")
    issues, fingerprints = [], set()
    for finding in findings:
        path = printable(os.path.relpath(os.path.abspath(finding.path), project) if project else finding.path)
        place = file_place(finding)
        fingerprint = _fingerprint(finding.code, path, "")
        while fingerprint in fingerprints:  # a second finding of the code in the file: the first's fingerprint salts it
            fingerprint = _fingerprint(finding.code, path, fingerprint)
        fingerprints.add(fingerprint)
        issues.append({"check_name": finding.code, "description": f"{finding.code}: {place.message}",
                       "severity": SEVERITIES[finding.severity], "fingerprint": fingerprint,
                       "location": {"path": path, "positions": {
                           "begin": {"line": place.line, "column": place.column},
                           "end": {"line": place.end_line, "column": place.end_column}}}})
    return json.dumps(issues, indent=2)


def _fingerprint(code: str, path: str, salt: str) -> str:
    """What identifies an issue across runs: its code and file (not its line, which edits above it move)."""
    return hashlib.blake2b(f"{salt}\0{code}\0{path}".encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
