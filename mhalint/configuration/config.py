"""The settings ruff users know, validated with the key's name in every error: `.mhalint.toml` or `mhalint.toml`
(top-level keys, as `.ruff.toml` and `ruff.toml`), or `[tool.mhalint]` in pyproject.toml.

The file is the nearest of these, looking upward from the first checked path (or the current directory); in one
directory `.mhalint.toml` comes first, then `mhalint.toml` (used even when empty), then a pyproject.toml that has a
`[tool.mhalint]` table, as ruff orders its files. `--config` names the file instead: a pyproject.toml must have
the table, another `.toml` file is read in either form, and anything else is an error rather than no settings.
Command-line options override the file.
"""

from __future__ import annotations

import fnmatch
import operator
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

import mhalint
from mhalint.configuration import schema
from mhalint.finding import Severity
from mhalint.names import printable
from mhalint.parse.source import regular_only

_LISTS = ("select", "ignore", "extend-select", "exclude", "extend-exclude", "fixable", "unfixable")
_PROBE_KEYS = ("timeout", "total-timeout", "memory")  # numbers, each `probe.KEY` in mhalint.configuration.schema
_FILE_LIMITS = ("file-time-limit", "file-memory-limit")  # seconds, MB: past them a file is MHA903
KNOWN_KEYS = (*_LISTS, "per-file-ignores", "respect-gitignore", "force-exclude", "min-severity", *_FILE_LIMITS,
              "probe", "required-version", "extend", "cache-dir")
_BOOLEANS = ("respect-gitignore", "force-exclude")
TOP_LEVEL_NAMES = (".mhalint.toml", "mhalint.toml")  # in the order they are looked for, before pyproject.toml
TOOL_TABLE, TOP_LEVEL = "[tool.mhalint]", "top-level keys"


class ConfigError(ValueError):
    """A configuration mistake; the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    path: Path | None = None  # the file the settings came from
    table: str = TOOL_TABLE  # where in it: TOOL_TABLE or TOP_LEVEL
    keys: frozenset[str] = frozenset()  # the keys the file sets, or --config does
    overridden: frozenset[str] = frozenset()  # the keys --config KEY=VALUE sets, over the file's
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    force_exclude: bool = False
    min_severity: str = "warning"
    probe: dict[str, float] = field(default_factory=dict)
    file_time_limit: float | None = None  # None: the default (mhalint.run.budget.FileBudget)
    file_memory_limit: int | None = None
    required_version: str | None = None  # a version specifier mhalint's version meets (it is checked on load)
    fixable: tuple[str, ...] | None = None  # codes or prefixes whose fixes --fix applies (None: all)
    extend: str | None = None  # the file this one's settings go over (as written in it)
    cache_dir: str | None = None  # the findings cache's folder: a name in the configuration file's folder
    unfixable: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        """Where the settings came from, for messages: `pyproject.toml ([tool.mhalint])`."""
        return f"{printable(str(self.path))} ({self.table})" if self.path is not None else "no configuration file"

    @property
    def root(self) -> Path:
        """The directory patterns (exclude, per-file-ignores) are relative to."""
        return self.path.parent if self.path is not None else Path.cwd()

    def ignored_in(self, path: str) -> tuple[str, ...]:
        """The codes per-file-ignores switches off for `path` (matched relative to the config's directory, and by
        file name, as ruff does)."""
        if not self.per_file_ignores:  # asked for every finding: no path is resolved when nothing is ignored
            return ()
        try:
            relative = Path(path).resolve().relative_to(self.root.resolve()).as_posix()
        except (ValueError, OSError, RuntimeError):  # outside the root, or a symlink loop
            relative = Path(path).as_posix()
        codes: list[str] = []
        for pattern, ignored in self.per_file_ignores.items():
            if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(Path(path).name, pattern):
                codes.extend(ignored)
        return tuple(codes)


def find(start: Path) -> Path | None:
    """The nearest configuration file from `start` upward (see the module docstring for the order)."""
    try:
        directory = start.resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        directory = Path(os.path.abspath(start))
    if not directory.is_dir():
        directory = directory.parent
    for candidate in (directory, *directory.parents):
        for name in TOP_LEVEL_NAMES:
            if (candidate / name).is_file():
                return candidate / name
        path = candidate / "pyproject.toml"
        if path.is_file() and _tool_table(path, _read(path)) is not None:
            return path
    return None


def load(path: Path | None, overrides: Mapping[str, object] | None = None) -> Config:
    """The settings of the file at `path` (none: the defaults), with `overrides` on top: the `KEY = VALUE` settings
    given with --config, checked as the file's are (an error names --config)."""
    values: dict[str, object] = {}
    keys: set[str] = set()
    form = TOOL_TABLE
    if path is not None:
        values, keys, form = _file_values(path, ())
    if overrides:
        values = _layered(values, _values(Path("--config"), dict(overrides), TOP_LEVEL))
        keys |= set(overrides)
    return Config(path=path, table=form, keys=frozenset(keys), overridden=frozenset(overrides or ()), **values)


def _file_values(path: Path, extending: tuple[Path, ...]) -> tuple[dict[str, object], set[str], str]:
    """Config's fields from the file at `path`, over those of the file its `extend` names (relative to its folder,
    `~` and environment variables expanded, as ruff reads it), and so on up; the keys set; the file's form."""
    table, form = _settings(path)
    values, keys = _values(path, table, form), set(table)
    if "extend" not in table:
        return values, keys, form
    if not isinstance(table["extend"], str):
        raise ConfigError(f"{path}: `extend` must be the path of another configuration file")
    base = Path(os.path.expandvars(os.path.expanduser(table["extend"])))
    base = (path.parent / base) if not base.is_absolute() else base
    chain = (*extending, path.resolve())
    if base.resolve() in chain:
        raise ConfigError(f"{path}: `extend` makes a cycle: {' -> '.join(map(str, (*chain, base.resolve())))}")
    if not base.is_file():
        raise ConfigError(f"{path}: `extend` names {base}, which is not a file")
    inherited, inherited_keys, _ = _file_values(base, chain)
    return _layered(inherited, values), inherited_keys | keys, form


def _layered(below: dict[str, object], above: dict[str, object]) -> dict[str, object]:
    """Config's fields of `above` over those of `below`; the probe's table key by key (`probe.timeout = 5` above
    keeps the memory set below), as its keys are separate settings."""
    layered = {**below, **above}
    if "probe" in below and "probe" in above:
        layered["probe"] = {**below["probe"], **above["probe"]}
    return layered


def _values(path: Path, table: dict, form: str) -> dict[str, object]:
    """Config's fields for the settings `table` holds, each checked; a ConfigError names `path` and the key."""
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        where = "in [tool.mhalint]" if form == TOOL_TABLE else "at the top level"
        if form == TOP_LEVEL and unknown[0] == "tool":
            where += " (this file takes the settings at the top level, without [tool.mhalint])"
        if str(path) == "--config":
            where = "in --config"
        raise ConfigError(f"{path}: unknown key `{schema.named(unknown[0])}` {where}; known keys: "
                          f"{', '.join(KNOWN_KEYS)}")
    values: dict[str, object] = {}
    for key in _LISTS:
        if key in table:
            values[key.replace("-", "_")] = _strings(path, key, table[key])
    if "per-file-ignores" in table:
        mapping = table["per-file-ignores"]
        if not isinstance(mapping, dict):
            raise ConfigError(f"{path}: `per-file-ignores` must be a table of glob = [codes]")
        values["per_file_ignores"] = {glob: _strings(path, f"per-file-ignores.{schema.named(glob)}", codes)
                                      for glob, codes in mapping.items()}
    for key in _BOOLEANS:
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{path}: `{key}` must be true or false")
            values[key.replace("-", "_")] = table[key]
    if "min-severity" in table:
        choices = [str(s) for s in Severity]
        if table["min-severity"] not in choices:
            raise ConfigError(f"{path}: `min-severity` must be one of {', '.join(choices)}")
        values["min_severity"] = table["min-severity"]
    for key in _FILE_LIMITS:
        if key in table:
            values[key.replace("-", "_")] = _number(path, key, table[key])
    if "probe" in table:
        values["probe"] = _probe(path, table["probe"])
    if "required-version" in table:
        values["required_version"] = _required_version(path, table["required-version"])
    if "extend" in table:
        values["extend"] = str(table["extend"])
    if "cache-dir" in table:
        values["cache_dir"] = _inside(path, "cache-dir", table["cache-dir"])
    return values


def _inside(path: Path, key: str, value) -> str:
    """A folder's name in the configuration's folder: a setting a cloned repository writes must not make mhalint
    write, or `clean` delete, outside the project, and a deeper path could pass through a link that leads out."""
    if not (isinstance(value, str) and value not in ("", ".", "..") and Path(value).name == value and
            "\0" not in value):
        raise ConfigError(f"{path}: `{key}` must be the name of a folder beside the configuration file (got "
                          f"{schema.shown(value)}); MHALINT_CACHE_DIR or --cache-dir name one elsewhere")
    return value


_CLAUSE = re.compile(r"\s*(==|!=|>=|<=|~=|>|<)?\s*(\d+(?:\.\d+)*)\s*")
_COMPARE = {"==": operator.eq, "!=": operator.ne, ">=": operator.ge, "<=": operator.le, ">": operator.gt,
            "<": operator.lt}


def _required_version(path: Path, spec) -> str:
    """`required-version` (as ruff's: `"0.2.0"`, `">=0.2"`, `">=0.2, <1"`, `"~=0.2"`), when mhalint's version
    meets it; a ConfigError that says which version runs when it does not."""
    clauses = [_CLAUSE.fullmatch(part) for part in spec.split(",")] if isinstance(spec, str) else [None]
    if not clauses or None in clauses:
        raise ConfigError(f"{path}: `required-version` must be a version or comma-separated version clauses such as "
                          f"\">=0.2, <1\" (got {schema.shown(spec)})")
    running = _version(mhalint.__version__)
    for clause in clauses:
        operation, wanted = clause[1] or "==", _version(clause[2])
        width = max(len(running), len(wanted))
        have, want = running + (0,) * (width - len(running)), wanted + (0,) * (width - len(wanted))
        met = (have >= want and running[:len(wanted) - 1] == wanted[:-1]) if operation == "~=" else \
            _COMPARE[operation](have, want)
        if not met:
            raise ConfigError(f"{path}: `required-version` is {spec!r}, and this is mhalint {mhalint.__version__}")
    return spec


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _probe(path: Path, table) -> dict[str, float]:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `probe` must be a table (timeout, total-timeout, memory)")
    settings = {}
    for key, value in table.items():
        if key not in _PROBE_KEYS:
            raise ConfigError(f"{path}: unknown key `probe.{schema.named(key)}`; known keys: {', '.join(_PROBE_KEYS)}")
        settings[key] = _number(path, f"probe.{key}", value)
    return settings


def _number(path: Path, key: str, value) -> float:
    """`value` when it is within the range mhalint.configuration.schema gives `key` (TOML has nan, inf and integers of
    any size), else a ConfigError that says the range."""
    try:
        return schema.NUMBERS[key].check(value)
    except ValueError as error:
        raise ConfigError(f"{path}: `{key}` {error}") from None


def _strings(path: Path, key: str, value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: `{key}` must be a list of strings")
    return tuple(item.strip().upper() if key not in ("exclude", "extend-exclude") else item for item in value)


def _settings(path: Path) -> tuple[dict, str]:
    """The table of settings in `path` and its form (TOOL_TABLE or TOP_LEVEL), as the file's name says: a file
    found upward is one of the known names; one given with --config may be any .toml file."""
    if path.name in TOP_LEVEL_NAMES:
        return _read(path), TOP_LEVEL
    if path.suffix != ".toml":
        raise ConfigError(f"{path}: not a mhalint configuration file; mhalint reads a pyproject.toml with a "
                          f"[tool.mhalint] table, or {' or '.join(TOP_LEVEL_NAMES)} with top-level keys")
    data = _read(path)
    table = _tool_table(path, data)
    if table is not None:
        return table, TOOL_TABLE
    if path.name == "pyproject.toml" or not set(data) & set(KNOWN_KEYS):
        raise ConfigError(f"{path}: no mhalint settings: neither a [tool.mhalint] table nor mhalint's keys at the "
                          f"top level")
    return data, TOP_LEVEL


def _tool_table(path: Path, data: dict) -> dict | None:
    """`[tool.mhalint]` of a parsed pyproject.toml, or None where there is none."""
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table (of tools' settings)")
    if "mhalint" not in tool:
        return None
    if not isinstance(tool["mhalint"], dict):
        raise ConfigError(f"{path}: [tool.mhalint] must be a table")
    return tool["mhalint"]


def inline(text: str) -> dict:
    """A setting given as `--config KEY=VALUE`: its TOML as a table, read as a file's is."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"--config {schema.shown(text)} is neither a file nor a TOML `key = value` setting "
                          f"({error})") from None
    except RecursionError:
        raise ConfigError(f"--config {schema.shown(text)}: its values are nested more deeply than mhalint reads") \
            from None


def _read(path: Path) -> dict:
    try:
        with open(path, "rb", opener=regular_only) as handle:  # a FIFO given with --config must not hang the run
            return tomllib.load(handle)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML ({error})") from None
    except RecursionError:  # tomllib reads nested lists and tables by recursion: `select = [[[...]]]`
        raise ConfigError(f"{path}: cannot be read: its values are nested more deeply than mhalint reads") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
