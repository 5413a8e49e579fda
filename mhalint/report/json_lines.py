"""JSON Lines: one finding per line, the same objects as the `json` format (`Finding.to_dict`), so a consumer can
stream them and `Finding.from_dict` reads each one back. JSON escapes line breaks inside strings, so a line is
always exactly one finding."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding
from mhalint.report import RenderOptions

if TYPE_CHECKING:
    from mhalint.rule import Rule


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    return "\n".join(json.dumps(f.to_dict()) for f in findings)
