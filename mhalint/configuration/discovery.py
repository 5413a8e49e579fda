"""Find the files that ``mhalint check PATHS...`` lints, the way ruff does.

* A path named on the command line is always used: a file is returned even if
  it is ignored or has another extension, and a directory is walked even if
  its name is excluded.  A missing path is reported in ``Discovery.errors``.
* Only regular files are returned: a FIFO, a socket or a device (or a symlink
  to one) named on the command line or met in a walk with a checked extension
  is listed in ``Discovery.errors`` as "not a regular file (a FIFO)", because
  reading it would block forever or never end.
* Directories are walked with ``os.scandir`` and directory symlinks are not
  followed, so links cannot loop.  A file symlink counts only if it resolves to
  a regular file; broken and looping links are skipped silently.
* With ``force_exclude`` (ruff's ``--force-exclude``, for pre-commit, which
  names every file), a named path is skipped as a walked one would be when it,
  or a directory above it below the current directory (or an ``anchors``
  directory), matches ``exclude`` or ``default_exclude``; gitignore files are
  not consulted for named paths, as in ruff.
* A walked entry is skipped, and a skipped directory is not entered, if its
  name is in ``DEFAULT_EXCLUDE``, if it matches an ``exclude`` pattern
  (gitignore syntax, anchored at the current directory and at the walked
  root), or if git would ignore it.
* Like ruff (the ``ignore`` crate with ``require_git``), gitignore rules apply
  only inside a git repository: the repository's ``info/exclude``, the
  ``.gitignore`` files from the repository root down to the walked directory,
  and every ``.gitignore`` met in the walk, deeper files taking precedence.
  A nested repository starts afresh, as git treats it as a separate project.
  Unlike ruff, ``.ignore`` files and git's global ``core.excludesFile`` are not
  read, and matching is case-sensitive.
* Paths are returned as the user spelled them, joined with the walked part and
  normalised like ``os.path.normpath``: ``discover(["."])`` gives ``a.py`` and
  ``discover(["./src/"])`` gives ``src/pkg/a.py``.  They are sorted and
  deduplicated; the same file reached by two spellings (absolute and relative)
  is listed twice.
* Unreadable directories and gitignore files never raise: they are listed in
  ``Discovery.errors`` as ``(path, reason)`` with a reason like
  ``"permission denied"``, so the caller can report them.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from mhalint.parse.source import not_regular, regular_only

# ruff's default `exclude`, plus the two caches ruff's list lacks.
DEFAULT_EXCLUDE = frozenset(
    {
        ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints",
        ".mypy_cache", ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype",
        ".ruff_cache", ".svn", ".tox", ".venv", ".vscode", "__pypackages__", "_build",
        "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
        "__pycache__", ".mhalint_cache",
    }
)  # fmt: skip

DEFAULT_EXTENSIONS = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Discovery:
    """The files to check, and the paths that could not be read, with why."""

    files: list[Path]
    errors: list[tuple[Path, str]]


# ---------------------------------------------------------------- gitignore

# git's wildmatch classes, which are ASCII-only.
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "blank": r" \t", "cntrl": r"\x00-\x1f\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~",
    "punct": r"!-/:-@\[-`{-~", "space": r" \t\n\r", "upper": "A-Z", "xdigit": "0-9A-Fa-f",
}  # fmt: skip

# Trailing spaces are dropped unless escaped with a backslash.
_TRAILING_SPACES = re.compile(r"((?:\\.|[^\\])*?) *", re.S)


class _Rule(NamedTuple):
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    basename_only: bool


def _bytes_view(text: str) -> str:
    """One character per byte, so ``?`` and ``[...]`` match bytes as git does."""
    return text if text.isascii() else os.fsencode(text).decode("latin-1")


def _class_regex(glob: str, start: int) -> tuple[str, int] | None:
    """Translate the bracket expression at ``glob[start]``; return it and the index after it.

    None means git aborts the match: the class is unterminated or malformed.
    """
    i, n = start + 1, len(glob)
    negated = glob[i : i + 1] in ("!", "^")
    i += negated
    items: list[str] = []
    prev = None  # the last single character, which may start a range
    first = True  # a "]" first in the class is a literal
    while i < n and (glob[i] != "]" or first):
        c, first = glob[i], False
        if c == "\\":
            i += 1
            if i == n:
                return None
            items.append(re.escape(glob[i]))
            prev = glob[i]
        elif c == "-" and prev is not None and glob[i + 1 : i + 2] not in ("", "]"):
            i += 1
            if glob[i] == "\\":
                i += 1
                if i == n:
                    return None
            if prev <= glob[i]:  # git takes a reversed range as empty
                items.append(f"{re.escape(prev)}-{re.escape(glob[i])}")
            prev = None
        elif c == "[" and glob.startswith(":", i + 1):
            end = glob.find("]", i + 2)
            if end < 0:
                return None
            name = glob[i + 2 : end - 1]
            if end - 1 < i + 2 or glob[end - 1] != ":":  # not "[:name:]": a literal "["
                items.append(re.escape(c))
                prev = c
            elif name in _POSIX_CLASSES:
                items.append(_POSIX_CLASSES[name])
                prev, i = None, end
            else:
                return None
        else:
            items.append(re.escape(c))
            prev = c
        i += 1
    if i >= n:
        return None
    body = "".join(items)
    # Under WM_PATHNAME no class, negated or not, matches "/".
    return (f"[^/{body}]" if negated else f"(?!/)[{body}]"), i + 1


def _glob_regex(glob: str) -> str | None:
    """Translate a pattern as git's wildmatch does with WM_PATHNAME; None if it never matches."""
    # git compares the literal prefix itself and wildmatches the rest, so a "**"
    # right after that prefix counts as the start of the pattern.
    first_special = next((i for i, c in enumerate(glob) if c in "*?[\\"), len(glob))
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            end = i
            while end < n and glob[end] == "*":
                end += 1
            stars_span_dirs = end - i > 1 and (i == first_special or glob[i - 1] == "/")
            if stars_span_dirs and glob[end : end + 1] == "/":  # "**/": zero or more directories
                out.append("(?:.*/)?")
                end += 1
            elif stars_span_dirs and (end == n or glob.startswith("\\/", end)):  # trailing, or "**\/"
                out.append(".*")
            else:
                out.append("[^/]*")
            i = end
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "\\":
            if i + 1 == n:
                return None
            i += 1
            out.append(re.escape(glob[i]))
        elif c == "[":
            translated = _class_regex(glob, i)
            if translated is None:
                return None
            regex, i = translated
            out.append(regex)
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _compile(line: str) -> _Rule | None:
    """Parse one gitignore line; None for blanks, comments and patterns that never match."""
    if not line or line.startswith("#"):
        return None
    trimmed = _TRAILING_SPACES.fullmatch(line)
    pattern = _bytes_view(trimmed[1] if trimmed else line)  # a dangling backslash keeps its spaces
    negated = pattern.startswith("!")
    pattern = pattern.removeprefix("!")
    dir_only = pattern.endswith("/")
    pattern = pattern.removesuffix("/")
    basename_only = "/" not in pattern  # otherwise anchored at the file's directory
    regex = _glob_regex(pattern.removeprefix("/"))
    if not pattern or regex is None:
        return None
    return _Rule(re.compile(regex, re.S), negated, dir_only, basename_only)


class GitIgnore:
    """The patterns of one gitignore source, anchored at the directory ``base``.

    ``base`` and the paths given to ``match`` are "/"-separated and in one frame:
    both absolute, or both relative to the same directory (``base=""`` is that
    directory itself).  Patterns are compiled to regexes once, here.
    """

    def __init__(self, lines: Iterable[str], base: str = "") -> None:
        self.base = base.rstrip("/") + "/" if base else ""
        self._rules = [rule for rule in map(_compile, lines) if rule is not None]

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], base: str = "") -> GitIgnore:
        """Read a gitignore file as git does: CRLF line ends and a UTF-8 BOM are allowed."""
        with open(path, "rb", opener=regular_only) as file:  # a FIFO named .gitignore must not hang the walk
            text = os.fsdecode(file.read()).removeprefix("\ufeff")
        return cls((line.removesuffix("\r") for line in text.split("\n")), base)

    def match(self, path: str, is_dir: bool = False) -> bool | None:
        """True if ``path`` is ignored, False if a ``!`` pattern re-includes it, None if no pattern matches.

        Only ``path`` itself is tested; that an ignored parent directory hides
        it is left to the caller, which does not walk into ignored directories.
        """
        if not path.startswith(self.base):
            return None
        relative = _bytes_view(path[len(self.base) :])
        name = relative.rpartition("/")[2]
        for rule in reversed(self._rules):  # the last matching pattern decides
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.fullmatch(name if rule.basename_only else relative):
                return not rule.negated
        return None


# ---------------------------------------------------------------- the walk


def _reason(error: OSError) -> str:
    return error.strerror.lower() if error.strerror else str(error)


def _info_exclude(worktree: str) -> str:
    """The repository's info/exclude; a ".git" file (submodule, worktree) names the git dir."""
    git_dir = os.path.join(worktree, ".git")
    if os.path.isfile(git_dir):
        try:
            with open(git_dir, encoding="utf-8") as file:
                git_dir = os.path.join(worktree, file.read().removeprefix("gitdir:").strip())
            with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as file:
                git_dir = os.path.join(git_dir, file.read().strip())  # a linked worktree
        except OSError:
            pass
    return os.path.join(git_dir, "info", "exclude")


def _excluded(
    name: str, key: str, is_dir: bool, rules: tuple[GitIgnore, ...] | None, excludes: tuple[GitIgnore, ...],
    default_exclude: frozenset[str],
) -> bool:
    """Whether a walked entry is skipped: a default-excluded name, an ``exclude`` match, or ignored by git."""
    if name in default_exclude or any(exclude.match(key, is_dir) for exclude in excludes):
        return True
    for ignore in reversed(rules or ()):  # deeper gitignore files take precedence
        decided = ignore.match(key, is_dir)
        if decided is not None:
            return decided
    return False


class _Walker:
    """Collects files and errors over the walks of all the given directories.

    A walk carries each directory's "key", its real absolute path with "/"
    separators, which is the frame gitignore and exclude patterns match in.
    Gitignore rules are None outside a repository or when not respected.
    """

    def __init__(self, extensions: tuple[str, ...], respect_gitignore: bool, default_exclude: frozenset[str]) -> None:
        self.extensions = extensions
        self.respect_gitignore = respect_gitignore
        self.default_exclude = default_exclude
        self.files: list[Path] = []
        self.errors: list[tuple[Path, str]] = []

    def _load(self, path: str, base: str) -> GitIgnore | None:
        try:
            return GitIgnore.from_file(path, base)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            self.errors.append((Path(path), _reason(error)))
            return None

    def _repo_rules(self, worktree: str, key: str) -> tuple[GitIgnore, ...]:
        exclude = self._load(_info_exclude(worktree), key)
        return () if exclude is None else (exclude,)

    def inherited_rules(self, root: str) -> tuple[GitIgnore, ...] | None:
        """The rules ``root`` (a real absolute path) inherits from the repository around it."""
        above = []  # the directories from root's parent up to the repository root
        directory = root
        while not os.path.exists(os.path.join(directory, ".git")):
            parent = os.path.dirname(directory)
            if parent == directory:
                return None
            directory = parent
            above.append(directory)
        rules = self._repo_rules(directory, Path(directory).as_posix())
        for directory in reversed(above):
            ignore = self._load(os.path.join(directory, ".gitignore"), Path(directory).as_posix())
            rules += () if ignore is None else (ignore,)
        return rules

    def _dir_rules(
        self, top: str, key: str, rules: tuple[GitIgnore, ...] | None, names: set[str]
    ) -> tuple[GitIgnore, ...] | None:
        """The gitignore rules in force for the entries of ``top``."""
        if ".git" in names:  # a repository root: outer rules stop at a nested repository
            rules = self._repo_rules(top, key)
        if rules is not None and ".gitignore" in names:
            ignore = self._load(os.path.join(top, ".gitignore"), key)
            rules += () if ignore is None else (ignore,)
        return rules

    def walk(
        self, top: str, key: str, rules: tuple[GitIgnore, ...] | None, excludes: tuple[GitIgnore, ...]
    ) -> None:
        """Collect the files under ``top``, whose key is ``key``."""
        stack = [(top, key, rules)]  # iterative, so deep trees cannot hit the recursion limit
        while stack:
            top, key, rules = stack.pop()
            try:
                with os.scandir(top) as scan:
                    entries = list(scan)
            except OSError as error:
                self.errors.append((Path(top), _reason(error)))
                continue
            if self.respect_gitignore:
                rules = self._dir_rules(top, key, rules, {entry.name for entry in entries})
            for entry in entries:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    is_file = not is_dir and entry.is_file()  # follows a file symlink
                except OSError:  # a symlink loop, or an entry that vanished
                    continue
                child = posixpath.join(key, entry.name)
                if is_dir:
                    if not _excluded(entry.name, child, True, rules, excludes, self.default_exclude):
                        stack.append((entry.path, child, rules))
                elif entry.name.endswith(self.extensions) and not _excluded(
                    entry.name, child, False, rules, excludes, self.default_exclude
                ):
                    if is_file:
                        self.files.append(Path(entry.path))
                    else:
                        self._not_regular(entry)

    def _not_regular(self, entry: os.DirEntry) -> None:
        """Report a FIFO, socket or device (or a link to one); a broken or looping link, or a link to a
        directory (never followed), is skipped silently."""
        try:
            mode = entry.stat().st_mode
        except OSError:
            return
        if not stat.S_ISDIR(mode):
            self.errors.append((Path(entry.path), not_regular(mode)))


def _named_path_excluded(
    path: str, is_dir: bool, bases: Iterable[str], excludes: tuple[GitIgnore, ...], default_exclude: frozenset[str]
) -> bool:
    """Whether ``--force-exclude`` skips a named path: it, or a directory above it and below the base it lies in,
    is excluded as a walked entry would be. A named file symlink is matched by its own name, not its target's."""
    name = os.path.basename(path)
    if name in ("", ".", ".."):
        key = Path(os.path.realpath(path)).as_posix()
    else:
        key = posixpath.join(Path(os.path.realpath(os.path.dirname(path) or ".")).as_posix(), name)
    base = max((b for b in bases if key.startswith(b.rstrip("/") + "/")), key=len, default=None)
    candidate, candidate_is_dir = key, is_dir
    while True:
        if _excluded(posixpath.basename(candidate), candidate, candidate_is_dir, None, excludes, default_exclude):
            return True
        candidate, candidate_is_dir = posixpath.dirname(candidate), True
        if base is None or not candidate.startswith(base.rstrip("/") + "/"):
            return False


def excluded(
    path: Path | str, *, exclude: Sequence[str] = (), default_exclude: Iterable[str] = DEFAULT_EXCLUDE,
    anchors: Sequence[str | Path] = (),
) -> bool:
    """Whether ``discover(..., force_exclude=True)`` skips the named file ``path``, which need not exist (a
    display name for standard input); the flake8 plugin asks this of each file flake8 hands it."""
    bases = _bases(anchors)
    return _named_path_excluded(os.path.normpath(path), False, bases, _anchored(exclude, bases),
                                frozenset(default_exclude))


def _bases(anchors: Sequence[str | Path]) -> dict[str, None]:
    """The directories ``exclude`` patterns are anchored at: the current one, then ``anchors``, real paths."""
    return dict.fromkeys([Path.cwd().as_posix(), *(Path(os.path.realpath(a)).as_posix() for a in anchors)])


def _anchored(exclude: Sequence[str], bases: Iterable[str]) -> tuple[GitIgnore, ...]:
    return tuple(GitIgnore(exclude, base) for base in bases) if exclude else ()


def discover(
    paths: Iterable[Path | str],
    *,
    respect_gitignore: bool = True,
    exclude: Sequence[str] = (),
    extensions: Sequence[str] = DEFAULT_EXTENSIONS,
    default_exclude: Iterable[str] = DEFAULT_EXCLUDE,
    anchors: Sequence[str | Path] = (),
    force_exclude: bool = False,
) -> Discovery:
    """Find the files to check under ``paths``; see the module docstring for the rules. ``default_exclude``
    replaces the built-in list of skipped names (ruff's ``exclude`` setting); ``anchors`` are more directories
    that ``exclude`` patterns are anchored at (a configuration file's directory); ``force_exclude`` applies the
    exclusions to the named paths too."""
    walker = _Walker(tuple(extensions), respect_gitignore, frozenset(default_exclude))
    bases = _bases(anchors)
    cwd_excludes = _anchored(exclude, bases)
    for given in paths:
        path = os.path.normpath(given)
        try:
            mode = os.stat(path).st_mode
        except OSError as error:
            walker.errors.append((Path(path), _reason(error)))
            continue
        is_dir = stat.S_ISDIR(mode)
        if force_exclude and _named_path_excluded(path, is_dir, bases, cwd_excludes, walker.default_exclude):
            continue
        if stat.S_ISREG(mode):  # otherwise, an explicit file is always checked
            walker.files.append(Path(path))
            continue
        if not is_dir:
            walker.errors.append((Path(path), not_regular(mode)))
            continue
        real = os.path.realpath(path)
        key = Path(real).as_posix()
        excludes = cwd_excludes
        if exclude and key not in bases:
            excludes += (GitIgnore(exclude, key),)
        rules = walker.inherited_rules(real) if respect_gitignore else None
        walker.walk(path, key, rules, excludes)
    return Discovery(sorted(set(walker.files)), sorted(set(walker.errors)))
