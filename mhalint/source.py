"""Decoding a source file as Python does: a UTF-8 BOM or a PEP 263 declaration, else UTF-8.

The declaration is looked for with every line ending normalised, because the tokenizer's detection reads lines
split at `\\n` only and so misses a declaration in a file with old Mac (`\\r`) line endings.
"""

from __future__ import annotations

import io
import tokenize


def decode(raw: bytes) -> tuple[str, str]:
    """(text, encoding); `utf-8-sig` when the file starts with a BOM, so encoding the text back keeps it.
    Raises SyntaxError for a bad declaration and UnicodeDecodeError for bytes that do not decode."""
    normalised = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    encoding, _ = tokenize.detect_encoding(io.BytesIO(normalised).readline)
    return raw.decode(encoding), encoding
