"""One entry-point group, read from the installed distributions without importing importlib.metadata.

Importing importlib.metadata (email, zipfile, csv) is about 12 ms of the 0.25 s that a check of one small file
may take, and mhalint needs one group from it. This reads what importlib.metadata.entry_points(group=...) reads,
in its order, and keeps the distributions it keeps: the `*.dist-info` and `*.egg-info` folders of each sys.path
folder, grouped by normalised name in the order the folder lists them, each `entry_points.txt` read as an INI
file, and a distribution whose name an earlier one had left out. Wherever importlib.metadata would do more than
that (a zip file or an `.egg` folder on sys.path, a finder of its own on sys.meta_path, a folder whose name does
not give the distribution's name, a file it would refuse), importlib.metadata itself answers. tests/
test_entry_points.py holds the two to the same answer on generated site folders.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from importlib.machinery import PathFinder
from typing import NamedTuple

_INFO_SUFFIXES = (".dist-info", ".egg-info")
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")  # importlib's


class EntryPoint(NamedTuple):
    name: str
    value: str  # `module:attribute.path [extras]`

    def load(self):
        """The object the value names, imported as importlib.metadata.EntryPoint.load does."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"{self.value!r} is not `module:attribute`")
        found = importlib.import_module(match["module"])
        for attribute in filter(None, (match["attr"] or "").split(".")):
            found = getattr(found, attribute)
        return found


class _Unsure(Exception):
    """importlib.metadata would look where this reader does not: let it answer."""


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points registered under `group`, as importlib.metadata.entry_points(group=group) lists them."""
    try:
        return _read(group)
    except _Unsure:
        from importlib import metadata

        return [EntryPoint(found.name, found.value) for found in metadata.entry_points(group=group)]


def _read(group: str) -> list[EntryPoint]:
    if sys.version_info < (3, 11) or any(
            finder is not PathFinder and getattr(finder, "find_distributions", None) is not None
            for finder in sys.meta_path):
        raise _Unsure  # 3.10 keeps distributions by another name; another finder has distributions of its own
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for root in sys.path:
        for folder, name in _distributions(root):
            if name not in seen:
                seen.add(name)
                found.extend(_group(os.path.join(folder, "entry_points.txt"), group))
    return found


def _distributions(root: object) -> list[tuple[str, str]]:
    """(metadata folder, normalised name) on one sys.path entry, in importlib.metadata's order."""
    if not isinstance(root, str) or os.path.basename(root).lower().endswith(".egg"):
        raise _Unsure
    try:
        children = os.listdir(root or ".")
    except OSError:
        if os.path.exists(root or "."):
            raise _Unsure  # a zip file, or a folder importlib.metadata may be able to read
        return []
    by_name: dict[str, list[str]] = {}
    for child in children:
        low = child.lower()
        if low.endswith(_INFO_SUFFIXES):
            by_name.setdefault(_normalise(low.rpartition(".")[0].partition("-")[0]), []).append(child)
    ordered = []
    for children_of_name in by_name.values():
        for child in children_of_name:
            stem, suffix = os.path.splitext(child)
            name = _normalise(stem.partition("-")[0])
            if suffix not in _INFO_SUFFIXES or not name:
                raise _Unsure  # importlib.metadata would read the name from the distribution's metadata
            ordered.append((os.path.join(root, child), name))
    return ordered


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _group(path: str, group: str) -> list[EntryPoint]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return []  # a distribution without entry points
    except (OSError, UnicodeDecodeError):
        raise _Unsure
    found = []
    section = None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section is not None:
            if "=" not in line:
                raise _Unsure  # importlib.metadata raises its own error for it
            if section == group:
                name, value = map(str.strip, line.split("=", 1))
                found.append(EntryPoint(name, value))
    return found
