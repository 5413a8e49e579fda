"""The one data model every part of mhalint shares: what a rule found, where, and how sure it is."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from mhalint.names import printable


class Severity(enum.IntEnum):
    """The tool's confidence that results are corrupted, not a style level (docs/command-line.md, "Severity
    and evidence")."""

    INFO = 0  # handled correctly, but relies on an implicit default
    WARNING = 1  # the pitfall is possible and nothing shows it is handled
    ERROR = 2  # evidence at the site shows results are corrupted

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


@dataclass(frozen=True)
class Edit:
    """Replace the text between two positions (1-based lines, 1-based columns, end exclusive) with `content`."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str

    def to_dict(self) -> dict:
        return {"line": self.line, "column": self.column, "end_line": self.end_line, "end_column": self.end_column,
                "content": self.content}


SAFE, UNSAFE = "safe", "unsafe"


@dataclass(frozen=True)
class Fix:
    """Edits that resolve a finding. `safe`: behaviour is kept (or only speed changes); `unsafe`: behaviour
    changes, so `--unsafe-fixes` must ask for it (ruff's applicability)."""

    edits: tuple[Edit, ...]
    applicability: str
    title: str  # what the fix does, in a few words

    def to_dict(self) -> dict:
        return {"applicability": self.applicability, "title": self.title,
                "edits": [edit.to_dict() for edit in self.edits]}

    @classmethod
    def from_dict(cls, data: dict) -> Fix:
        return cls(tuple(Edit(int(e["line"]), int(e["column"]), int(e["end_line"]), int(e["end_column"]),
                              str(e["content"])) for e in data["edits"]),
                   str(data["applicability"]), str(data.get("title", "")))


@dataclass(frozen=True)
class ProbeResult:
    """What the runtime probe measured for one finding."""

    status: str  # one of PROBE_STATUSES
    evidence: str  # the numbers, or why it was skipped
    torch_version: str | None = None

    def to_dict(self) -> dict:
        return {"status": self.status, "evidence": self.evidence, "torch_version": self.torch_version}

    @classmethod
    def from_dict(cls, data: dict) -> ProbeResult:
        return cls(str(data["status"]), str(data["evidence"]), data.get("torch_version"))


# confirmed: the experiment used the site's own evidence (the layout or mask construction the analysis established)
# and showed the pitfall; reproduced: it showed the mechanism with the pitfall's premise assumed (no evidence at the
# site), which says nothing about the site itself; not confirmed: the experiment ran and the pitfall did not show;
# skipped: no experiment could run.
CONFIRMED, REPRODUCED, NOT_CONFIRMED, SKIPPED = "confirmed", "reproduced", "not confirmed", "skipped"
PROBE_STATUSES = (CONFIRMED, REPRODUCED, NOT_CONFIRMED, SKIPPED)

HEADLINE_LIMIT = 160  # characters of a finding's headline: the problem and the decisive evidence, nothing more


@dataclass(frozen=True)
class Finding:
    """One problem at one place. `sort_key` orders findings as users read them: path, cell, line, column, code."""

    path: str
    line: int  # 1-based, where the offending call starts (within its notebook cell, for notebooks)
    column: int  # 1-based
    code: str
    message: str = field(compare=False)  # the headline, at most HEADLINE_LIMIT characters
    name: str = field(default="", compare=False)
    severity: Severity = field(default=Severity.WARNING, compare=False)
    end_line: int = field(default=0, compare=False)
    end_column: int = field(default=0, compare=False)
    # Short sentences saying what the verdict rests on, e.g. "num_heads=5 from NUM_HEADS = 5 at line 3".
    evidence: tuple[str, ...] = field(default=(), compare=False)
    # Constructor/call arguments as far as they were resolved statically (for the probe and reports).
    arguments: tuple[tuple[str, object], ...] = field(default=(), compare=False)
    fix: Fix | None = field(default=None, compare=False)
    help: str = field(default="", compare=False)  # what to do about it, in one line
    explanation: str = field(default="", compare=False)  # the long why, citing a section of docs/torch-facts.md
    probe: ProbeResult | None = field(default=None, compare=False)
    cell: int | None = field(default=None, compare=False)  # 1-based notebook cell, None for a plain source file

    def sort_key(self) -> tuple:
        return self.path, self.cell or 0, self.line, self.column, self.code

    @property
    def location(self) -> str:
        """`path:line:col`, or `path:cell N:line:col` in a notebook; the path as text outputs print it."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{printable(self.path)}:{cell}{self.line}:{self.column}"

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "path": self.path,
            "cell": self.cell,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "severity": str(self.severity),
            "message": self.message,
            "evidence": list(self.evidence),
            "arguments": dict(self.arguments),
            "fix": self.fix.to_dict() if self.fix is not None else None,
            "help": self.help,
            "explanation": self.explanation,
            "probe": self.probe.to_dict() if self.probe is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        """The inverse of to_dict, for `mhalint probe FILE.json`; a KeyError or TypeError means a malformed file."""
        probe = data.get("probe")
        return cls(
            path=str(data["path"]), line=int(data["line"]), column=int(data["column"]), code=str(data["code"]),
            message=str(data["message"]), name=str(data.get("name", "")),
            severity=Severity.parse(str(data.get("severity", "warning"))),
            end_line=int(data.get("end_line", 0)), end_column=int(data.get("end_column", 0)),
            evidence=tuple(str(e) for e in data.get("evidence", ())),
            arguments=tuple(dict(data.get("arguments") or {}).items()),
            fix=Fix.from_dict(data["fix"]) if data.get("fix") else None,
            help=str(data.get("help") or ""), explanation=str(data.get("explanation") or ""),
            probe=ProbeResult.from_dict(probe) if probe else None,
            cell=int(data["cell"]) if data.get("cell") is not None else None)


def shorten(text: str, limit: int = 90) -> str:
    """`text` cut to `limit` characters with "..." when longer: code and headlines quoted in messages."""
    return text if len(text) <= limit else text[:limit - 3] + "..."
