"""The findings cache, modelled on ruff's `.ruff_cache`: a file whose size and modification time (or, failing
that, content hash) are unchanged is not read again.

One index file per configuration: its name is a digest of everything the findings depend on besides the file
itself (mhalint's own source, the enabled rules and their source). Files are independent (mhalint analyses one
file at a time), so a per-file entry is exact. The index is written atomically at the end of a run.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import pickle
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

import mhalint
from mhalint.finding import Finding

CACHE_DIR_NAME = ".mhalint_cache"
_FORMAT = 1


def cache_dir(root: Path) -> Path:
    """MHALINT_CACHE_DIR, else `.mhalint_cache` in the project root (the configuration file's directory)."""
    return Path(os.environ.get("MHALINT_CACHE_DIR") or root / CACHE_DIR_NAME)


@dataclass
class _Entry:
    size: int
    mtime_ns: int
    digest: bytes
    findings: tuple[Finding, ...]  # with path "" (re-attached on lookup, so a moved file still hits)


class Cache:
    def __init__(self, directory: Path, rules: Iterable[type]):
        self.directory = directory
        self.index_path = directory / f"findings-{_salt(rules)}.pickle"
        self._entries: dict[str, _Entry] = self._load()
        self._dirty = False

    def lookup(self, path: str) -> list[Finding] | None:
        """The cached findings if the file's size and modification time are unchanged (nothing is read); None
        when they differ, and the caller, who reads the file anyway, asks `lookup_content`."""
        entry = self._entries.get(os.path.abspath(path))
        if entry is None:
            return None
        try:
            stat = os.stat(path)
        except OSError:
            return None
        if (stat.st_size, stat.st_mtime_ns) != (entry.size, entry.mtime_ns):
            return None
        return [_with_path(f, path) for f in entry.findings]

    def lookup_content(self, path: str, raw: bytes, stat: os.stat_result) -> list[Finding] | None:
        """The cached findings if the file's bytes are those cached (touched, or checked out again, but not
        changed); its new size and time are remembered. None when it must be checked."""
        entry = self._entries.get(os.path.abspath(path))
        if entry is None or _digest(raw) != entry.digest:
            return None
        self._entries[os.path.abspath(path)] = _Entry(stat.st_size, stat.st_mtime_ns, entry.digest, entry.findings)
        self._dirty = True
        return [_with_path(f, path) for f in entry.findings]

    def store(self, path: str, raw: bytes, stat: os.stat_result, findings: list[Finding]) -> None:
        self._entries[os.path.abspath(path)] = _Entry(
            stat.st_size, stat.st_mtime_ns, _digest(raw), tuple(_with_path(f, "") for f in findings))
        self._dirty = True

    def save(self) -> None:
        """Write the index atomically; a cache that cannot be written is only a slower next run."""
        if not self._dirty:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            (self.directory / ".gitignore").write_text("*\n")
            handle, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(handle, "wb") as out:
                pickle.dump((_FORMAT, self._entries), out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, self.index_path)
        except OSError:
            pass

    def _load(self) -> dict[str, _Entry]:
        try:
            with self.index_path.open("rb") as handle:
                version, entries = pickle.load(handle)
            return entries if version == _FORMAT else {}
        except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError):
            return {}  # missing or damaged: start afresh


def clean(directory: Path) -> int:
    """Remove the cache directory's files; the number removed."""
    removed = 0
    if directory.is_dir():
        for item in directory.iterdir():
            if item.is_file():
                item.unlink()
                removed += 1
        directory.rmdir()
    return removed


def _digest(raw: bytes) -> bytes:
    return hashlib.blake2b(raw, digest_size=16).digest()


def _with_path(finding: Finding, path: str) -> Finding:
    return replace(finding, path=path)


def _salt(rules: Iterable[type]) -> str:
    """Changes whenever the findings could: another mhalint version or source, other rules or rule source."""
    digest = hashlib.blake2b(digest_size=12)
    digest.update(mhalint.__version__.encode())
    package = Path(mhalint.__file__).parent
    for source in sorted(package.rglob("*.py")):
        digest.update(source.read_bytes())
    for rule in sorted(rules, key=lambda r: r.code):
        digest.update(f"{rule.code}:{rule.__module__}.{rule.__qualname__}".encode())
        try:
            digest.update(Path(inspect.getfile(rule)).read_bytes())
        except (OSError, TypeError):
            pass
    return digest.hexdigest()
