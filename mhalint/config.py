"""`[tool.mhalint]` in pyproject.toml: the settings ruff users know, validated with the key's name in every error.

The file is the nearest pyproject.toml with a `[tool.mhalint]` table, looking upward from the first checked path
(or the current directory), or the one given with `--config`. Command-line options override it.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from mhalint.finding import Severity

_LISTS = ("select", "ignore", "extend-select", "exclude", "extend-exclude")
_PROBE_KEYS = {"timeout": float, "total-timeout": float, "memory": int}
KNOWN_KEYS = (*_LISTS, "per-file-ignores", "respect-gitignore", "min-severity", "probe")


class ConfigError(ValueError):
    """A configuration mistake; the message names the file and the key."""


@dataclass(frozen=True)
class Config:
    path: Path | None = None  # the file the settings came from
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    min_severity: str = "warning"
    probe: dict[str, float] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        """The directory patterns (exclude, per-file-ignores) are relative to."""
        return self.path.parent if self.path is not None else Path.cwd()

    def ignored_in(self, path: str) -> tuple[str, ...]:
        """The codes per-file-ignores switches off for `path` (matched relative to the config's directory, and by
        file name, as ruff does)."""
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
    """The nearest pyproject.toml with a [tool.mhalint] table, from `start` upward."""
    try:
        directory = start.resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        directory = Path(os.path.abspath(start))
    if not directory.is_dir():
        directory = directory.parent
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if path.is_file() and "mhalint" in _read(path).get("tool", {}):
            return path
    return None


def load(path: Path | None) -> Config:
    if path is None:
        return Config()
    table = _read(path).get("tool", {}).get("mhalint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.mhalint] must be a table")
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(f"{path}: unknown key `{unknown[0]}` in [tool.mhalint]; known keys: "
                          f"{', '.join(KNOWN_KEYS)}")
    values: dict[str, object] = {"path": path}
    for key in _LISTS:
        if key in table:
            values[key.replace("-", "_")] = _strings(path, key, table[key])
    if "per-file-ignores" in table:
        mapping = table["per-file-ignores"]
        if not isinstance(mapping, dict):
            raise ConfigError(f"{path}: `per-file-ignores` must be a table of glob = [codes]")
        values["per_file_ignores"] = {glob: _strings(path, f"per-file-ignores.{glob}", codes)
                                      for glob, codes in mapping.items()}
    if "respect-gitignore" in table:
        if not isinstance(table["respect-gitignore"], bool):
            raise ConfigError(f"{path}: `respect-gitignore` must be true or false")
        values["respect_gitignore"] = table["respect-gitignore"]
    if "min-severity" in table:
        choices = [str(s) for s in Severity]
        if table["min-severity"] not in choices:
            raise ConfigError(f"{path}: `min-severity` must be one of {', '.join(choices)}")
        values["min_severity"] = table["min-severity"]
    if "probe" in table:
        values["probe"] = _probe(path, table["probe"])
    return Config(**values)


def _probe(path: Path, table) -> dict[str, float]:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `probe` must be a table (timeout, total-timeout, memory)")
    settings = {}
    for key, value in table.items():
        kind = _PROBE_KEYS.get(key)
        if kind is None:
            raise ConfigError(f"{path}: unknown key `probe.{key}`; known keys: {', '.join(_PROBE_KEYS)}")
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0 or \
                (kind is int and not isinstance(value, int)):
            raise ConfigError(f"{path}: `probe.{key}` must be a positive {'integer' if kind is int else 'number'}")
        settings[key] = value
    return settings


def _strings(path: Path, key: str, value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: `{key}` must be a list of strings")
    return tuple(item.strip().upper() if key not in ("exclude", "extend-exclude") else item for item in value)


def _read(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML ({error})") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
