"""The findings cache, modelled on ruff's `.ruff_cache`: a file whose size and modification time (or, failing
that, content hash) are unchanged is not read again.

What it holds: one JSON file per configuration, `findings-<key>.json`, whose key is a digest of everything the
findings depend on besides the file itself (mhalint's version and source, the enabled rules and their source).
For each checked file, by absolute path, it records the file's size, its modification time in nanoseconds, a
BLAKE2b digest of its bytes, and the findings as the JSON data of `Finding.to_dict()` (with the path left out, so a
moved file still hits). Findings that depended on other files of the project also record the project's fingerprint
(`project_fingerprint`: every project file's path, size and modification time), and hold only while it is unchanged.
The document also keeps the project index's entries (mhalint.analysis.project): for each file of the project, its
size, modification time, dotted module name and the classes it imports, so that a run given one file of a large
project does not read every other file again; an entry is used only while all three are unchanged. The index is
a JSON text inside the document, decoded only when a run asks it (a warm run, which reads no file, does not).
The engine stores an entry only for bytes whose status did not change while they were read, and the index drops
the entries of files that no longer exist whenever it is written.
The cache is safe to delete at any time (`mhalint clean`, or `rm -r .mhalint_cache`): the next run is slower, never
different.

The cache is data only, and never trusted. It lives in the checked repository, which may be hostile (a pull
request from a fork, a pre-commit hook in a cloned project), so:

- it never follows a symbolic link out of its folder. `.mhalint_cache` is reached from the project root without
  following a link, and every later step (read, create, replace, unlink) goes through that folder's descriptor
  with O_NOFOLLOW/O_EXCL, so a link swapped in during the run is not followed either. A link at the folder, or at
  its index or .gitignore, is refused with one line on standard error, and the run goes on without the cache.
  MHALINT_CACHE_DIR is the user's own choice, trusted as ruff trusts RUFF_CACHE_DIR: links on the way to it are
  followed (a link to a shared volume works), links in it are not. (Windows, which has no descriptor-relative
  file operations, has no cache);
- `mhalint clean` removes only what mhalint writes (regular files with its names, never a link) from a folder it
  made: one reached as above that holds its `.gitignore` (a regular file that says `*`). Otherwise it removes
  nothing and says why in one line;
- it is plain JSON read with `json.loads`: nothing in it can construct an object or run code (no pickle);
- only a regular file of at most `MAX_INDEX_BYTES` of valid UTF-8 is parsed; anything else counts as no cache;
- the top level must be this format's object (name, version, the key in the file's name); an index entry must be
  `[size, mtime_ns, module, [[class, module, local], ...]]` with integers in range and ASCII names as the index
  writes them (a bad one is dropped and its file read again; a planted one can only point an analysis at another
  file of the project, which it then parses as it would any other); every findings entry must be
  what `save` writes, `[size, mtime_ns, digest, findings]`: integers in range, a hex digest, and findings that
  `Finding.from_dict` accepts and `Finding.to_dict` gives back unchanged, and that this run could have found: a
  code of its rules or of the engine (MHA9xx), at a place a file of the entry's size can hold (lines 1 to size + 1,
  columns from 1, an end after the start). A bad entry is dropped (its file is checked again, so a planted code is
  never printed nor written by `--add-noqa`), the good ones are kept, and the file is rewritten at the end of the run;
- it is written atomically (a temporary file in the same folder, then `os.replace`, which replaces a symlink
  swapped in at the index's path rather than writing through it) and no temporary file is left behind on failure;
  a cache that cannot be written is only a slower next run. Interrupts (Ctrl-C, SIGTERM) wait for that write,
  and an interrupted run writes nothing, so the previous index stays whole.

`findings-*.pickle` files of mhalint versions before the JSON cache are never opened; `mhalint clean` removes them.
Tested in tests/test_cache.py and tests/test_cache_trust.py.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import inspect
import json
import os
import re
import stat as stat_module
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable

import mhalint
from mhalint.finding import Finding
from mhalint.run import interrupts
from mhalint.run.diagnostics import ENGINE_CODES

CACHE_DIR_NAME = ".mhalint_cache"
FORMAT_NAME = "mhalint-findings-cache"
FORMAT_VERSION = 7  # 1: the pickle before the JSON cache (never read); 2: no project dependency; 3: no index;
# 4: the index kept imported classes only, not functions; 5: the index as JSON inside the document, not a string;
# 6: no record of whether a file was parsed
MAX_INDEX_BYTES = 256 * 2**20  # an index past this is not read (a 6,600-file tree takes about 1 MB)
MAX_FINDINGS_PER_FILE = 100_000
MAX_IMPORTS_PER_FILE = 100_000
_MAX_MODULE = 4096  # characters of a dotted module name
# Each import the index keeps, its fields joined by spaces: a class or function name as the index reads it (ASCII),
# the module (as written, resolved), the local name; one a line.
_IMPORT = r"[A-Za-z_][A-Za-z0-9_]* [A-Za-z0-9_.]* [A-Za-z_][A-Za-z0-9_]*"
_IMPORT_LINES = re.compile(f"(?:{_IMPORT}(?:\n{_IMPORT})*)?")
_DIGEST_SIZE = 16
_HEX_LENGTH = 2 * _DIGEST_SIZE
_HEX_DIGEST = re.compile(f"[0-9a-f]{{{_HEX_LENGTH}}}")
_HEX_DIGESTS = re.compile("[0-9a-f]*")  # many digests of the right length, joined
_INT64 = 2**63
_GITIGNORE_NAME, _GITIGNORE = ".gitignore", b"*\n"  # what mhalint writes in a folder it makes: its mark
_TEMPORARY_PREFIX, _TEMPORARY_SUFFIX = ".findings-", ".tmp"
# The files mhalint writes in its cache directory (the pickle of older versions included): all `clean` removes.
_OWN_FILE = re.compile(r"findings-[0-9a-f]+\.(?:json|pickle)|\.?findings-.*\.tmp|tmp[^/]*\.tmp")
_is_absolute = os.path.isabs


def cache_dir(root: Path, chosen: Path | None = None, configured: str | None = None) -> tuple[Path, bool]:
    """`chosen` (--cache-dir), else MHALINT_CACHE_DIR, else the `cache-dir` setting (`configured`, a folder inside
    the project), else `.mhalint_cache`, in the project root (the configuration file's directory); and whether links
    on the way to it are followed: only on a folder the user chose, not one the project's settings name."""
    chosen = chosen or os.environ.get("MHALINT_CACHE_DIR")
    return (Path(chosen), True) if chosen else (root / (configured or CACHE_DIR_NAME), False)


# An entry in memory: (size, mtime_ns, digest as hex, findings with path "" (re-attached on lookup, so a moved file
# still hits), the same findings as JSON data from Finding.to_dict, ready to be written, the project fingerprint
# when the analysis read other files of the project, else "", and whether the file was parsed: one whose code
# names nothing a rule acts on is not). A plain tuple: a warm run makes one per checked file, and a dataclass
# costs three times as much to build.
_Entry = tuple[int, int, str, tuple[Finding, ...], list[dict], str, bool]
_SIZE, _MTIME, _DIGEST, _FINDINGS, _DATA, _PROJECT, _PARSED = range(7)
# A project index entry: (size, mtime_ns, dotted module name, the file's imports as the index keeps them).
_Imports = tuple[int, int, str, tuple[tuple[str, str, str], ...]]


class Cache:
    def __init__(self, directory: Path, rules: Iterable[type], *, follow: bool = False,
                 options: Iterable[str] = ()):
        """`follow`: links on the way to `directory` are followed (the user chose it); else only up to its parent,
        and a link at the folder itself is refused. Links in it never are. `options`: the names of the Checker's
        options that change what a file's findings are (`parse_all`, `ignore_noqa`): the findings of runs with
        other options are kept apart."""
        self.directory = directory
        self._follow = follow
        self._refused = False  # a link where none may be: no entry is used, nothing is written
        rules = tuple(rules)
        self.key = _salt(rules)
        if options:
            self.key = hashlib.blake2b(" ".join([self.key, *sorted(options)]).encode(), digest_size=12).hexdigest()
        self._codes = {rule.code for rule in rules}.union(ENGINE_CODES)  # what an entry's findings may be
        self.index_path = directory / f"findings-{self.key}.json"
        self._dirty = False  # set when the index must be (re)written: new entries, or bad content read
        self._imports: dict[str, _Imports] | None = {}  # None until `_index` decodes `_imports_text`
        # the project index as the file holds it, a JSON text inside the document: a run that asks nothing of it (a
        # warm one) neither decodes nor encodes its entries (7 MB for 6,000 files)
        self._imports_text = "{}"
        self._entries: dict[str, _Entry] = self._load()
        self._seen: set[str] = set()  # the entries this run asked about: their files existed

    def lookup(self, path: str, project: Callable[[], str] = str) -> list[Finding] | None:
        """The cached findings if the file's size and modification time are unchanged (nothing is read); None
        when they differ, and the caller, who reads the file anyway, asks `lookup_content`. Findings that
        depended on other files hold only while `project()`, the run's fingerprint of them, is unchanged."""
        entry = self._entries.get(self._key(path))
        if entry is None:
            return None
        try:
            stat = os.stat(path)
        except OSError:
            return None
        if stat.st_size != entry[_SIZE] or stat.st_mtime_ns != entry[_MTIME] or _stale(entry, project):
            return None  # the fingerprint last: it walks the project
        return [_with_path(f, path) for f in entry[_FINDINGS]]

    @staticmethod
    def digest(raw: bytes) -> str:
        """What identifies a file's bytes in the cache (taken where they were read, a worker included)."""
        return hashlib.blake2b(raw, digest_size=_DIGEST_SIZE).hexdigest()

    def lookup_content(self, path: str, digest: str, stat: os.stat_result,
                       project: Callable[[], str] = str) -> list[Finding] | None:
        """The cached findings if the file's bytes are those cached (their `digest`: touched, or checked out
        again, but not changed); its new size and time are remembered. None when it must be checked."""
        entry = self._entries.get(self._key(path))
        if entry is None or digest != entry[_DIGEST] or _stale(entry, project):
            return None
        self._entries[os.path.abspath(path)] = (stat.st_size, stat.st_mtime_ns, *entry[_DIGEST:])
        self._dirty = True
        return [_with_path(f, path) for f in entry[_FINDINGS]]

    def store(self, path: str, digest: str, stat: os.stat_result, findings: list[Finding],
              project: str = "", *, parsed: bool = True) -> None:
        """`digest`: Cache.digest of the bytes checked; `project`: the fingerprint of the run's files, when the
        findings depend on other files; `parsed`: whether the file was parsed to be checked."""
        stored = tuple(_with_path(f, "") for f in findings)
        self._entries[self._key(path)] = (
            stat.st_size, stat.st_mtime_ns, digest, stored, [f.to_dict() for f in stored], project, parsed)
        self._dirty = True

    def parsed(self, path: str) -> bool:
        """Whether the file of an entry just looked up was parsed when its findings were stored."""
        entry = self._entries.get(os.path.abspath(path))
        return entry is None or entry[_PARSED]

    def recall_imports(self, path: str, status: os.stat_result, module: str) -> tuple | None:
        """The project index's entries for a file (mhalint.analysis.project.ImportMemory), if its size,
        modification time and module name are those remembered."""
        entry = self._index().get(path)
        self._seen.add(path)
        if entry is None or entry[0] != status.st_size or entry[1] != status.st_mtime_ns or entry[2] != module:
            return None
        return entry[3]

    def keep_imports(self, path: str, status: os.stat_result, module: str, imports: tuple) -> None:
        self._index()[path] = (status.st_size, status.st_mtime_ns, module, imports)
        self._seen.add(path)
        self._dirty = True

    def _index(self) -> dict[str, _Imports]:
        """The project index, decoded when first asked for; its bad entries are dropped (and rewritten)."""
        if self._imports is None:
            try:
                document = json.loads(self._imports_text)
            except (ValueError, RecursionError):
                document = None
            self._imports = _index_entries(document) if type(document) is dict else {}
            self._dirty |= type(document) is not dict or len(self._imports) != len(document)
        return self._imports

    def _key(self, path: str) -> str:
        key = os.path.abspath(path)
        self._seen.add(key)
        return key

    def _forget_missing(self) -> None:
        """Drop the entries of files that no longer exist (deleted, renamed), so the index does not grow with
        them; the files this run asked about are known to exist and need no look."""
        for table in (self._entries, self._imports) if self._imports is not None else (self._entries,):
            missing = [path for path in table if path not in self._seen and not os.path.exists(path)]
            for path in missing:
                del table[path]
            self._dirty |= bool(missing)

    def save(self) -> None:
        """Write the index atomically, without the entries of files that no longer exist; a cache that cannot be
        written is only a slower next run. Interrupts wait until it is written (or not), so that neither a
        temporary file nor a half-written index is left behind."""
        if self._refused:
            return
        self._forget_missing()
        if not self._dirty:
            return
        with interrupts.deferred():
            self._write()

    def _write(self) -> None:
        """Through the folder's descriptor: a link swapped in for the folder since it was read is refused, and one
        planted in it is replaced or left, never written through."""
        folder = temporary = None
        try:
            folder = _open_folder(self.directory, self._follow, create=True)
            _create_gitignore(folder)
            handle, temporary = _create_temporary(folder)
            with os.fdopen(handle, "wb") as out:
                out.write(json.dumps(self._document(), ensure_ascii=True, separators=(",", ":")).encode("ascii"))
            os.replace(temporary, self.index_path.name, src_dir_fd=folder, dst_dir_fd=folder)
            temporary = None
            self._dirty = False
        except _Refused as refusal:
            self._refuse(refusal)
        except (OSError, TypeError, ValueError, RecursionError):
            pass  # unwritable directory, full disk, a directory at index_path, data JSON cannot hold
        finally:
            if temporary is not None:
                _remove_quietly(temporary, folder)
            if folder is not None:
                os.close(folder)

    def _refuse(self, refusal: _Refused) -> None:
        """The run goes on without the cache, and says so once."""
        if not self._refused:
            _warn(f"the findings cache is not used: {refusal}")
        self._entries, self._imports, self._refused = {}, {}, True

    def _document(self) -> dict:
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "key": self.key,
                "entries": {path: [*entry[:_DIGEST + 1], entry[_DATA], entry[_PROJECT], entry[_PARSED]]
                            for path, entry in self._entries.items()},
                "imports": self._imports_text if self._imports is None else json.dumps(
                    {path: [size, mtime_ns, module, [list(item) for item in imports]]
                     for path, (size, mtime_ns, module, imports) in self._imports.items()},
                    ensure_ascii=True, separators=(",", ":"))}

    def _load(self) -> dict[str, _Entry]:
        """The valid entries of the index; an index missing is no cache, one damaged or foreign is no cache and
        is rewritten, and so is one with bad entries (which are dropped)."""
        try:
            raw = self._read()
        except FileNotFoundError:
            return {}
        except _Refused as refusal:
            self._refuse(refusal)
            return {}
        except OSError:  # a directory, a FIFO, too large, unreadable
            self._dirty = True
            return {}
        try:
            document = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):  # ValueError: bad JSON, an int of 4,300+ digits
            self._dirty = True
            return {}
        if type(document) is not dict or document.get("format") != FORMAT_NAME or \
                type(document.get("version")) is not int or document["version"] != FORMAT_VERSION or \
                document.get("key") != self.key or type(document.get("entries")) is not dict or \
                type(document.get("imports")) is not str:
            self._dirty = True
            return {}
        self._imports, self._imports_text = None, document["imports"]
        entries: dict[str, _Entry] = {}
        for path, value in document["entries"].items():
            # Inline (this runs once per file of the project on every run): what save writes, [size, mtime_ns,
            # digest, findings, project fingerprint or "", parsed], with integers in range, a digest of the right
            # length (its characters are checked below, in one pass over all of them) and an absolute path.
            if type(value) is list and len(value) == 6:
                size, mtime_ns, digest, data, project, parsed = value
                if type(size) is int and 0 <= size < _INT64 and type(mtime_ns) is int and \
                        -_INT64 <= mtime_ns < _INT64 and type(digest) is str and len(digest) == _HEX_LENGTH and \
                        type(data) is list and type(project) is str and len(project) in (0, _HEX_LENGTH) and \
                        type(parsed) is bool and _is_absolute(path):
                    findings = _findings(data, size, self._codes) if data else ()
                    if findings is not None:
                        entries[path] = (size, mtime_ns, digest, findings, data, project, parsed)
                        continue
            self._dirty = True  # dropped, and the file is rewritten without it
        if not _HEX_DIGESTS.fullmatch("".join(entry[_DIGEST] for entry in entries.values())):
            for path in [path for path, entry in entries.items() if not _HEX_DIGEST.fullmatch(entry[_DIGEST])]:
                del entries[path]
            self._dirty = True
        return entries

    def _read(self) -> bytes:
        """The index's bytes; _Refused if the folder, its index or its .gitignore is a link."""
        folder = _open_folder(self.directory, self._follow, create=False)
        try:
            for name in (self.index_path.name, _GITIGNORE_NAME):
                if _is_link(name, folder):
                    raise _Refused(f"{self.directory / name} is a symbolic link")
            return _read_regular_file(self.index_path.name, folder, MAX_INDEX_BYTES)
        finally:
            os.close(folder)


def _index_entries(document: dict) -> dict[str, _Imports]:
    """The project index's entries that are exactly what `keep_imports` writes; the others are left out. An
    entry's imports are checked in one pass: each a list of three strings (joining raises on anything else) which,
    joined, are names as the index reads them, one import a line."""
    entries = {}
    for path, value in document.items():
        if type(value) is not list or len(value) != 4 or not _is_absolute(path):
            continue
        size, mtime_ns, module, imports = value
        if not (type(size) is int and 0 <= size < _INT64 and type(mtime_ns) is int and -_INT64 <= mtime_ns < _INT64
                and type(module) is str and len(module) <= _MAX_MODULE and type(imports) is list
                and len(imports) <= MAX_IMPORTS_PER_FILE and set(map(type, imports)) <= {list}
                and set(map(len, imports)) <= {3}):
            continue
        try:
            fields = "\n".join(map(" ".join, imports))
        except TypeError:
            continue
        if _IMPORT_LINES.fullmatch(fields) and fields.count("\n") == max(len(imports) - 1, 0):
            entries[path] = (size, mtime_ns, module, tuple(map(tuple, imports)))
    return entries


def _findings(data: list, size: int, codes: set[str]) -> tuple[Finding, ...] | None:
    """The findings of an entry if every item is exactly what `Cache.store` writes, else None: a dict that
    `Finding.from_dict` accepts and `Finding.to_dict` gives back unchanged (no coerced, missing or extra field),
    with the path left out, and each `_possible` in a file of `size` bytes for a run that reports `codes`."""
    if len(data) > MAX_FINDINGS_PER_FILE:
        return None
    findings = []
    for item in data:
        if type(item) is not dict or item.get("path") != "":
            return None
        try:
            finding = Finding.from_dict(item)
            canonical = finding.to_dict() == item
        except Exception:  # KeyError, TypeError, OverflowError (int(inf)), AttributeError...: whatever the data
            return None    # makes Finding raise, it is a bad entry, never a crash of the run
        if not canonical or not _possible(finding, size, codes):
            return None
        findings.append(finding)
    return tuple(findings)


def _possible(finding: Finding, size: int, codes: set[str]) -> bool:
    """What this run could have found in a file of `size` bytes (an entry is used only while the size matches):
    a code of its rules or of the engine, at lines from 1 to size + 1 (no file of that size has more), columns from
    1, an end after the start (or none: 0, 0), a notebook cell from 1. Else a planted entry would be printed, and
    `--add-noqa` would write its code."""
    last = size + 1
    return finding.code in codes and 1 <= finding.line <= last and finding.column >= 1 and \
        (finding.end_line == finding.end_column == 0 or
         (finding.line, finding.column) < (finding.end_line, finding.end_column) <= (last, _INT64)) and \
        (finding.cell is None or finding.cell >= 1)


class _Refused(OSError):
    """A symbolic link where the cache follows none: the cache is neither used nor cleaned, and the user is told."""


def _warn(message: str) -> None:
    print(f"mhalint: warning: {message}", file=sys.stderr)


def _open_folder(directory: Path, follow: bool, create: bool) -> int:
    """A descriptor of the cache folder, which every later step goes through (dir_fd), so that no link swapped in
    meanwhile is followed. `follow`: links on the way are followed (the user's own MHALINT_CACHE_DIR); else only
    up to the parent (the project root), and a link at the folder is _Refused. `create`: made where missing."""
    if os.open not in os.supports_dir_fd:  # Windows: no descriptor-relative steps, so no cache rather than a race
        raise OSError(errno.ENOSYS, "no descriptor-relative file operations")
    if follow:
        if create:
            os.makedirs(directory, exist_ok=True)
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    parent = os.open(directory.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory.name, dir_fd=parent)
        try:
            return os.open(directory.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        except OSError:
            if _is_link(directory.name, parent):
                raise _Refused(f"{directory} is a symbolic link") from None
            raise
    finally:
        os.close(parent)


def _is_link(name: str, folder: int) -> bool:
    try:
        return stat_module.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _read_regular_file(name: str, folder: int, limit: int) -> bytes:
    """The bytes of `name` in `folder` if it is a regular file (not a symlink to one) of at most `limit` bytes;
    OSError if not, FileNotFoundError if there is nothing there. Never blocks on a FIFO or a device."""
    handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    with os.fdopen(handle, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat_module.S_ISREG(status.st_mode):
            raise OSError(f"{name} is not a regular file")
        if status.st_size > limit:
            raise OSError(f"{name} is larger than {limit} bytes")
        raw = file.read(limit + 1)
    if len(raw) > limit:
        raise OSError(f"{name} is larger than {limit} bytes")
    return raw


def _create_gitignore(folder: int) -> None:
    """`*` in the cache folder's .gitignore, if there is none (O_EXCL: nothing there is opened, nor a link's
    target created)."""
    try:
        handle = os.open(_GITIGNORE_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=folder)
    except FileExistsError:
        return
    with os.fdopen(handle, "wb") as out:
        out.write(_GITIGNORE)


def _create_temporary(folder: int) -> tuple[int, str]:
    """tempfile.mkstemp in the folder's descriptor: a new file for its owner (O_EXCL: never a link's target)."""
    name = f"{_TEMPORARY_PREFIX}{os.urandom(8).hex()}{_TEMPORARY_SUFFIX}"
    return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=folder), name


def _remove_quietly(name: str, folder: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=folder)


def clean(directory: Path, *, follow: bool = False) -> int:
    """Remove the files mhalint writes from the cache folder, then the folder if that leaves it empty; the number
    removed. Only from a folder mhalint made: reached as the cache reaches it (`follow` as for Cache: a link at
    `.mhalint_cache` is refused) and holding mhalint's .gitignore; and only regular files with mhalint's names, so
    a link there stays (unlinked, it would not be followed either), as does anything else. Otherwise nothing is
    removed, and one line says why."""
    try:
        folder = _open_folder(directory, follow, create=False)
    except _Refused as refusal:
        _warn(f"nothing is removed: {refusal}")
        return 0
    except OSError:  # no cache folder (or not one)
        return 0
    removed = 0
    try:
        if not _made_by_mhalint(folder):
            _warn(f"nothing is removed: {directory} has no .gitignore of mhalint's, so mhalint did not make it")
            return 0
        with os.scandir(folder) as items:
            own = [item.name for item in items if (item.name == _GITIGNORE_NAME or _OWN_FILE.fullmatch(item.name))
                   and item.is_file(follow_symlinks=False)]
        for name in own:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
                removed += 1
    finally:
        os.close(folder)
    with contextlib.suppress(OSError):  # something else is in there, or it is the user's link (rmdir refuses one)
        os.rmdir(directory)
    return removed


def _made_by_mhalint(folder: int) -> bool:
    """The folder holds the .gitignore mhalint writes in a folder it makes: a regular file (not a link) that says
    `*` and nothing else."""
    try:
        return _read_regular_file(_GITIGNORE_NAME, folder, len(_GITIGNORE)) == _GITIGNORE
    except OSError:
        return False


def _stale(entry: _Entry, project: Callable[[], str]) -> bool:
    """Findings that read other files of the run, which have changed since (`project()` is "" when unknown)."""
    return bool(entry[_PROJECT]) and entry[_PROJECT] != project()


def project_fingerprint(paths: Iterable[str]) -> str:
    """One digest of the project's files (every file the analyses may read, the run's and the others), their
    paths, sizes and modification times: findings that read other files hold while it is unchanged (a file
    added, removed or edited anywhere in the project changes it, even when only another file is checked)."""
    entries = []
    for path in sorted(os.path.abspath(path) for path in paths):
        try:
            stat = os.stat(path)
        except OSError:
            continue
        entries.append(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}")
    return Cache.digest("\n".join(entries).encode("utf-8", "surrogateescape"))


def _with_path(finding: Finding, path: str) -> Finding:
    return replace(finding, path=path)


def _salt(rules: Iterable[type]) -> str:
    """Changes whenever the findings could: another mhalint version or source, other rules or rule source."""
    return _salt_of(tuple(sorted(rules, key=lambda r: r.code)))


@functools.lru_cache(maxsize=16)
def _salt_of(rules: tuple[type, ...]) -> str:
    """Once per process and rule set: the source that counts is the one that was imported, not a later edit."""
    digest = hashlib.blake2b(digest_size=12)
    digest.update(f"{FORMAT_NAME} {FORMAT_VERSION} {mhalint.__version__}".encode())
    package = Path(mhalint.__file__).parent
    for source in sorted(package.rglob("*.py")):
        digest.update(source.read_bytes())
    for rule in rules:
        digest.update(f"{rule.code}:{rule.__module__}.{rule.__qualname__}".encode())
        try:
            digest.update(Path(inspect.getfile(rule)).read_bytes())
        except (OSError, TypeError):
            pass
    return digest.hexdigest()
