"""A JSON array of findings (the same objects `mhalint probe` reads back)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Iterable, Mapping

from mhalint.finding import Finding
from mhalint.report import RenderOptions

if TYPE_CHECKING:
    from mhalint.rule import Rule


def render(findings: Iterable[Finding], rules: Mapping[str, type[Rule]] | None = None,
           options: RenderOptions = RenderOptions()) -> str:
    return json.dumps([f.to_dict() for f in findings], indent=2)
