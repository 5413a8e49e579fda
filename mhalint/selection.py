"""--select / --ignore by code or prefix, as ruff reads them: the most specific matching selector wins."""

from __future__ import annotations

from typing import Iterable, Mapping

from mhalint.rule import Rule


class SelectionError(ValueError):
    """A selector that matches no known code: a typo must not silently disable a rule."""


class Selection:
    """Which rules run, and which codes are reported (engine diagnostics such as MHA900 only via --ignore)."""

    def __init__(self, rules: Mapping[str, type[Rule]], select: list[str], ignore: list[str],
                 engine_codes: Iterable[str] = ()):
        engine_codes = set(engine_codes)
        known = set(rules) | engine_codes
        for option, selectors in (("--select", select), ("--ignore", ignore)):
            for selector in selectors:
                if selector != "ALL" and not any(code.startswith(selector) for code in known):
                    raise SelectionError(f"unknown rule code or prefix {selector!r} in {option}; "
                                         f"`mhalint rule --all` lists the codes")
        self._select = select or ["ALL"]
        self._ignore = ignore
        self._engine_codes = engine_codes
        self.rules = [rule for code, rule in rules.items() if self._enabled(code)]

    def reports(self, code: str) -> bool:
        """Engine diagnostics (a file that cannot be read or parsed) are always shown unless ignored by name."""
        if code in self._engine_codes:
            return _longest_match(code, self._ignore) < 0
        return self._enabled(code)

    def _enabled(self, code: str) -> bool:
        chosen = _longest_match(code, self._select)
        return chosen >= 0 and chosen > _longest_match(code, self._ignore)


def _longest_match(code: str, selectors: list[str]) -> int:
    """Length of the most specific selector matching `code` (ALL counts as 0), or -1 when none matches."""
    best = -1
    for selector in selectors:
        if selector == "ALL":
            best = max(best, 0)
        elif code.startswith(selector):
            best = max(best, len(selector))
    return best
