"""Findings read back from a saved report, for `mhalint probe`: the json, json-lines and sarif formats.

json and json-lines carry `Finding.to_dict` objects as they are. A SARIF result is turned back into the same
object: its location (a `%SRCROOT%`-relative URI is the path as it was reported, a `file://` URI the absolute
path), the region (or, in a notebook, the cell and the region within it, kept as properties), the fix's
replacements, and mhalint's own data from the result's properties.
"""

from __future__ import annotations

import json
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from mhalint.finding import Finding
from mhalint.report.sarif import LEVELS

_SEVERITIES = {level: str(severity) for severity, level in LEVELS.items()}


def load(text: str) -> list[Finding]:
    """The findings of a saved report. Raises ValueError (JSON), KeyError, TypeError or AttributeError (a value of
    the wrong shape) for text that is not one of the three formats."""
    if not text.strip():  # json-lines without findings
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg != "Extra data":  # a second value after the first: json-lines
            raise
        return [Finding.from_dict(json.loads(line)) for line in text.splitlines() if line.strip()]
    if isinstance(data, dict) and "runs" in data:
        return [Finding.from_dict(_from_sarif(result)) for run in data["runs"] for result in run.get("results", ())]
    if isinstance(data, dict) and "code" in data:  # json-lines with a single finding
        return [Finding.from_dict(data)]
    items = data["findings"] if isinstance(data, dict) else data
    return [Finding.from_dict(item) for item in items]


def _from_sarif(result: dict) -> dict:
    """The `Finding.to_dict` object a SARIF result was made from (report/sarif.py's `_result`)."""
    properties = result.get("properties") or {}
    physical = result["locations"][0]["physicalLocation"]
    region = properties.get("region_in_cell") if properties.get("cell") is not None else physical.get("region")
    region = region or {}
    fixes = result.get("fixes") or []
    return {
        "code": result["ruleId"], "name": properties.get("name", ""), "path": _path(physical["artifactLocation"]),
        "cell": properties.get("cell"), "line": region.get("startLine", 1), "column": region.get("startColumn", 1),
        "end_line": region.get("endLine", 0), "end_column": region.get("endColumn", 0),
        "severity": properties.get("severity") or _SEVERITIES.get(result.get("level"), "warning"),
        "message": result["message"]["text"], "evidence": properties.get("evidence", []),
        "arguments": properties.get("arguments") or {}, "help": properties.get("help"),
        "explanation": properties.get("explanation"), "probe": properties.get("probe"),
        "fix": _fix(fixes[0]) if fixes else None,
    }


def _path(artifact: dict) -> str:
    uri = artifact["uri"]
    if "uriBaseId" in artifact or not uri.startswith("file:"):
        return unquote(uri)
    return url2pathname(urlparse(uri).path)


def _fix(fix: dict) -> dict:
    edits = []
    for change in fix["artifactChanges"]:
        for replacement in change["replacements"]:
            deleted = replacement["deletedRegion"]
            edits.append({"line": deleted["startLine"], "column": deleted["startColumn"],
                          "end_line": deleted["endLine"], "end_column": deleted["endColumn"],
                          "content": (replacement.get("insertedContent") or {}).get("text", "")})
    return {"applicability": (fix.get("properties") or {}).get("applicability", "unsafe"),
            "title": (fix.get("description") or {}).get("text", ""), "edits": edits}
