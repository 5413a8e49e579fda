"""--select / --ignore by code or prefix, as ruff reads them: the most specific matching selector wins."""

from __future__ import annotations

from typing import Iterable, Mapping

from mhalint.rule import Rule


class SelectionError(ValueError):
    """A selector that matches no known code: a typo must not silently disable a rule."""


class Selection:
    """Which rules run, and which codes are reported (engine diagnostics such as MHA900 only via --ignore; the
    engine's `checks`, such as MHA904 unused-noqa, are selected like rules).

    Each selector list comes with where it was written ("--select", "`ignore` in pyproject.toml") so that an
    unknown code is reported where the user can find it.
    """

    def __init__(self, rules: Mapping[str, type[Rule]], select: list[str], ignore: list[str],
                 engine_codes: Iterable[str] = (), extend_select: list[str] = (),
                 origins: Mapping[str, str] | None = None, checks: Iterable[str] = ()):
        engine_codes = set(engine_codes) - set(checks)
        self._known = set(rules) | engine_codes | set(checks)
        origins = {"select": "--select", "ignore": "--ignore", "extend-select": "--extend-select", **(origins or {})}
        for key, selectors in (("select", select), ("ignore", ignore), ("extend-select", extend_select)):
            self.validate(selectors, origins[key])
        self._select = [*(select or ["ALL"]), *extend_select]
        self._ignore = list(ignore)
        self._engine_codes = engine_codes
        self.rules = [rule for code, rule in rules.items() if self._enabled(code)]

    def validate(self, selectors: Iterable[str], origin: str) -> None:
        for selector in selectors:
            if selector != "ALL" and not any(code.startswith(selector) for code in self._known):
                raise SelectionError(f"unknown rule code or prefix {selector!r} in {origin}; "
                                     f"`mhalint rule --all` lists the codes")

    def reports(self, code: str, extra_ignores: Iterable[str] = ()) -> bool:
        """Engine diagnostics (a file that cannot be read or parsed) are always shown unless ignored by name;
        `extra_ignores` are per-file ignores, which win over any select."""
        if _longest_match(code, list(extra_ignores)) >= 0:
            return False
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
