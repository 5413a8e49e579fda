"""A JSON array of findings (the same objects `mhalint probe` reads back)."""

from __future__ import annotations

import json
from typing import Iterable

from mhalint.finding import Finding


def render(findings: Iterable[Finding]) -> str:
    return json.dumps([f.to_dict() for f in findings], indent=2)
