"""The value a literal's text spells (an int, float, complex, str or bytes): what libcst's `evaluated_value`
gives, without its garbage.

libcst evaluates a literal with `ast.literal_eval`, whose every call makes four nested functions that refer to one
another: cyclic garbage, about ten objects a literal, that only the collector frees (6,614 literals on speed.py's
corpus). Here each distinct text is evaluated once a process."""

from __future__ import annotations

import ast
import functools

from mhalint.parse.lazy import cst


def literal(node: cst.Integer | cst.Float | cst.Imaginary | cst.SimpleString) -> int | float | complex | str | bytes:
    return _evaluated(node.value)


@functools.lru_cache(maxsize=4096)
def _evaluated(text: str) -> int | float | complex | str | bytes:
    return ast.literal_eval(text)
