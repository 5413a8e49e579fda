"""The comments of a source file by line, read with the tokenizer so that `#` inside a string is not one."""

from __future__ import annotations

import bisect
import io
import tokenize


def comments(source: str) -> dict[int, str]:
    """Line number -> the comment text on that line (with its `#`); empty when the source does not tokenize."""
    found: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source, newline=None).readline):  # \r lines too
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = token.string
    except (tokenize.TokenError, SyntaxError):
        return {}
    return found


def statement_lines_around(line: int, starts: list[int], last_line: int) -> tuple[int, int]:
    """The first and last line of the top-level statement around `line`, with the comment and blank lines after
    it (before the first statement: the lines up to it), from the sorted first lines of the module's top-level
    statements (mhalint.parse.positions.first_lines): a piece of the source that tokenizes on its own, as it does in
    the whole file."""
    index = bisect.bisect_right(starts, line) - 1
    first = starts[index] if index >= 0 else 1
    last = starts[index + 1] - 1 if index + 1 < len(starts) else last_line
    return first, last
