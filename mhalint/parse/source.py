"""Reading and decoding a source file as Python does: a UTF-8 BOM or a PEP 263 declaration, else UTF-8.

The declaration is looked for with every line ending normalised, because the tokenizer's detection reads lines
split at `\\n` only and so misses a declaration in a file with old Mac (`\\r`) line endings.

Only regular files are read: a FIFO would block the open (or the read) forever and a device such as /dev/zero
never ends, so `regular_only` refuses anything else, before opening and again on the opened file.
"""

from __future__ import annotations

import codecs
import errno
import io
import itertools
import os
import re
import stat
import tokenize

# Line breaks as Python, libcst's positions and mhalint's findings count them (str.splitlines also breaks at
# \x0c, \x1c-\x1e, \x85, U+2028 and U+2029, which are not line breaks in Python source).
LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_BREAK_BYTES = re.compile(LINE_BREAK.pattern.encode())


def line_starts(text: str | bytes) -> list[int]:
    """The offset where each line of `text` (decoded, or bytes) starts. Without a carriage return, from the lengths
    of the lines `split` gives (four times faster than a match object per line)."""
    decoded = isinstance(text, str)
    if ("\r" if decoded else b"\r") in text:
        return [0] + [match.end() for match in (LINE_BREAK if decoded else _LINE_BREAK_BYTES).finditer(text)]
    return [0, *itertools.accumulate(len(line) + 1 for line in text.split("\n" if decoded else b"\n")[:-1])]


def decode(raw: bytes) -> tuple[str, str]:
    """(text, encoding); `utf-8-sig` when the file starts with a BOM, so encoding the text back keeps it.
    Raises SyntaxError for a bad declaration, a declared encoding Python refuses (one that is not a superset of
    ASCII, such as utf-16) or a UTF-16/UTF-32 byte-order mark, and UnicodeDecodeError for bytes that do not
    decode."""
    wide = next((name for bom, name in _WIDE_BOMS if raw.startswith(bom)), None)
    if wide is not None:
        raise SyntaxError(f"the file is {wide} (it starts with a {wide} byte-order mark), which Python does not "
                          f"read as source; save it as UTF-8")
    normalised = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    encoding, _ = tokenize.detect_encoding(io.BytesIO(normalised).readline)
    if not _ascii_compatible(encoding):
        raise SyntaxError(f"encoding problem: {encoding} (declared, but not a superset of ASCII, so Python "
                          f"refuses it as a source encoding)")
    return raw.decode(encoding), encoding


def has_wide_bom(raw: bytes) -> bool:
    """Whether `raw` starts with a UTF-16 or UTF-32 byte-order mark: no ASCII pattern can be seen in such bytes,
    so a prefilter must pass the file on for `decode` to report."""
    return raw.startswith(_WIDE_BOM_PREFIXES)


# UTF-32 first: its little-endian mark starts with UTF-16's.
_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
              (codecs.BOM_UTF16_BE, "UTF-16"))
_WIDE_BOM_PREFIXES = tuple(bom for bom, _ in _WIDE_BOMS)


def _ascii_compatible(encoding: str) -> bool:
    sample = b"# -*- coding -*-\nx = 1\n"
    try:
        return sample.decode(encoding) == sample.decode("ascii")
    except (UnicodeDecodeError, LookupError):
        return False


class NotRegularFileError(OSError):
    """A path that is a FIFO, a device or a socket where a file's bytes were wanted."""

    def __init__(self, path: str | os.PathLike, mode: int):
        super().__init__(errno.EINVAL, not_regular(mode), os.fspath(path))


def not_regular(mode: int) -> str:
    """The reason a path of this stat mode is not read: `not a regular file (a FIFO)`."""
    return f"not a regular file ({_file_kind(mode)})"


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "an unknown kind of file"


def regular_only(path: str | os.PathLike, flags: int) -> int:
    """An `opener` for `open()` that opens only a regular file (a symlink is followed), so that
    `open(path, "rb", opener=regular_only)` raises NotRegularFileError for a FIFO or a device and
    IsADirectoryError for a directory. The type is checked before opening (opening a device can have effects of
    its own), and again on the opened file, which is opened without blocking in case the path was swapped for a
    FIFO in between."""
    _require_regular(path, os.stat(path).st_mode)
    descriptor = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    try:
        _require_regular(path, os.fstat(descriptor).st_mode)
    except OSError:
        os.close(descriptor)
        raise
    return descriptor


def _require_regular(path: str | os.PathLike, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(path, mode)
