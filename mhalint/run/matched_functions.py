"""The function bodies that the rules acting only where their triggers match need (Rule.matched_functions_only).

Such a rule is handed nothing from a module-level function or method whose body holds none of its matches, in a
file parsed whole as in one parsed a function at a time, so its findings are the same either way; the engine
then parses a file that only such rules' triggers match as a shell (mhalint.parse.lazy_bodies) with just the
matched bodies, and the bodies their analyses ask for.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass

from mhalint.parse.lazy import cst
from mhalint.parse.lazy_bodies import Bodies
from mhalint.parse.source import line_starts
from mhalint.run.prefilter import Prefilter


@dataclass
class MatchedFunctions:
    bodies: Bodies
    matched: set[int]  # the indexes of the bodies (Bodies.regions) that hold a match

    @classmethod
    def of(cls, prefilter: Prefilter, text: str, encoded: bytes, syntax: ast.Module) -> MatchedFunctions | None:
        """The bodies of `text` (`encoded` in UTF-8, its CPython tree `syntax`) that hold a match of `prefilter`, on
        any line of the match; None when nothing in the file matches."""
        matches = list(prefilter.code_matches(encoded))
        if not matches:
            return None
        starts = line_starts(encoded)
        lines: set[int] = set()
        for match in matches:
            first = bisect.bisect_right(starts, match.start())
            lines.update(range(first, bisect.bisect_right(starts, max(match.end() - 1, match.start())) + 1))
        bodies = Bodies.of(text, syntax)
        return cls(bodies, bodies.holding(lines))

    def left_out(self, module: cst.Module) -> frozenset[int]:
        """The ids of `module`'s functions whose body holds no match (none when the parsers disagree about where
        the functions are, which a shell parse then gives up on too)."""
        functions = self.bodies.functions(module)
        if functions is None:
            return frozenset()
        return frozenset(id(functions[index]) for index in self.bodies.regions if index not in self.matched)

    def parse_matched(self, module: cst.Module) -> None:
        """Parse the matched bodies of a shell."""
        functions = self.bodies.functions(module)
        for index in sorted(self.matched) if functions is not None else ():
            functions[index].body  # noqa: B018 -- reading a pending body parses it
