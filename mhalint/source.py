"""Decoding a source file as Python does: a UTF-8 BOM or a PEP 263 declaration, else UTF-8.

The declaration is looked for with every line ending normalised, because the tokenizer's detection reads lines
split at `\\n` only and so misses a declaration in a file with old Mac (`\\r`) line endings.
"""

from __future__ import annotations

import io
import re
import tokenize

# Line breaks as Python, libcst's positions and mhalint's findings count them (str.splitlines also breaks at
# \x0c, \x1c-\x1e, \x85, U+2028 and U+2029, which are not line breaks in Python source).
LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_BREAK_BYTES = re.compile(LINE_BREAK.pattern.encode())


def line_starts(text: str | bytes) -> list[int]:
    """The offset where each line of `text` (decoded, or bytes) starts."""
    breaks = LINE_BREAK if isinstance(text, str) else _LINE_BREAK_BYTES
    return [0] + [match.end() for match in breaks.finditer(text)]


def decode(raw: bytes) -> tuple[str, str]:
    """(text, encoding); `utf-8-sig` when the file starts with a BOM, so encoding the text back keeps it.
    Raises SyntaxError for a bad declaration and UnicodeDecodeError for bytes that do not decode."""
    normalised = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    encoding, _ = tokenize.detect_encoding(io.BytesIO(normalised).readline)
    return raw.decode(encoding), encoding
