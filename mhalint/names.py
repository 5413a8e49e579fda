"""File names as the text outputs print them. A checked tree may be someone else's (a fork's pull request), and a
name with a control character in it could otherwise break a report's line in two, forge a line of its own, or send
the terminal an escape sequence.

Such a name is quoted and escaped as git quotes it (with core.quotepath=false): `"a\\nb.py"`, `"a\\033[2J.py"`,
with `\\"` and `\\\\` for a quote and a backslash, C's escapes for \\a \\b \\t \\n \\v \\f \\r and the octal of the
UTF-8 bytes for the other controls. Controls are C0, DEL and C1, and a byte 0x80 to 0x9F of a name that is not
valid UTF-8 (an 8-bit terminal takes it as C1); other non-ASCII characters stay as they are. GNU patch reads this
quoting in a diff's header. A name without a control character is printed unchanged.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\udc80-\udc9f]")  # \udc80...: the bytes 0x80 to 0x9F, surrogate-escaped
_QUOTED = re.compile('["\\\\\x00-\x1f\x7f-\x9f\udc80-\udc9f]')
_C_ESCAPES = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f",
              "\r": "\\r"}


def printable(name: str) -> str:
    """`name` as text outputs print it: unchanged, or quoted and escaped when it holds a control character."""
    if not _CONTROL.search(name):
        return name
    return f'"{_QUOTED.sub(_escape, name)}"'


def _escape(match: re.Match) -> str:
    char = match.group()
    if char in _C_ESCAPES:
        return _C_ESCAPES[char]
    data = bytes([ord(char) - 0xDC00]) if char >= "\udc80" else char.encode()
    return "".join(f"\\{byte:03o}" for byte in data)
