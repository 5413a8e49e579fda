"""What the runtime guard reports: its codes, the warning and error it raises, and one report's data.

This module does not import torch, so `-W ignore::mhalint.guard.AttentionGuardWarning` and the pytest plugin can
name these classes without paying for the torch import.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass


def guard_codes() -> dict[str, str]:
    """The codes the guard reports, with their names: the loaded rules that have a runtime check (a `guard`
    hook). Static rules' codes keep their documentation (`mhalint rule MHA003`); MHA101+ are runtime-only rules,
    pitfalls that only the data at a call shows."""
    return {code: rule.name for code, rule in _rules().items() if rule.guard is not None}


def rule_name(code: str) -> str:
    rule = _rules().get(code)
    return rule.name if rule is not None else ""


@functools.cache
def _rules() -> dict:
    from mhalint.rule import load_rules  # the rules import neither torch nor (until used) libcst

    return load_rules()


@dataclass(frozen=True)
class Site:
    """The user's own call: the first frame on the stack outside torch and mhalint."""

    filename: str
    lineno: int

    def __str__(self) -> str:
        return f"{_display_path(self.filename)}:{self.lineno}"


def _display_path(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    return filename if relative.startswith(os.pardir) else relative


@dataclass(frozen=True)
class Report:
    """One problem seen at one call. `message` is the headline (the problem and the decisive evidence seen at the
    call, at most 160 characters), then the fix and the why on the lines after it; `headline` is its first line,
    for summaries."""

    code: str
    site: Site
    api: str  # the entry point that was called: "nn.MultiheadAttention", "F.scaled_dot_product_attention", ...
    message: str
    name: str = ""  # the rule's name, e.g. "fully-masked-rows"

    @property
    def headline(self) -> str:
        return self.message.split("\n", 1)[0]

    def text(self) -> str:
        return f"{self.code} {self.name} at {self.site}: {self.message}"


class _Reported:
    """What the guard's warning and error share: a report's `code`, `site` ("path:line") and `message`, kept
    when they are pickled (pytest-xdist and multiprocessing pickle warnings and exceptions)."""

    def __init__(self, code: str, site: str, message: str):
        super().__init__(self._text(code, site, message))
        self.code = code
        self.site = site
        self.message = message

    def __reduce__(self):
        return type(self), (self.code, self.site, self.message)


class AttentionGuardWarning(_Reported, UserWarning):
    """A pitfall the runtime guard saw in a real attention call. `code`, `site` ("path:line") and `message`.
    The warning is issued at the site, so its text leaves the site out."""

    __module__ = "mhalint.guard"

    @staticmethod
    def _text(code: str, site: str, message: str) -> str:
        return f"{code} {rule_name(code)}: {message}"


class AttentionGuardError(_Reported, Exception):
    """Raised instead of AttentionGuardWarning in `error` mode; same attributes."""

    __module__ = "mhalint.guard"

    @staticmethod
    def _text(code: str, site: str, message: str) -> str:
        return f"{code} {rule_name(code)} at {site}: {message}"
