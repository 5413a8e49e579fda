"""The comments of a source file by line, read with the tokenizer so that `#` inside a string is not one."""

from __future__ import annotations

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
