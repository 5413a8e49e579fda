"""The server's warm state, kept between edits: the settings of each configuration file, one checker per set of
rules, the project index over the workspace with the open buffers laid over the disk, and each open document's
last outcome with the files its analysis read, so that a change re-checks only what depends on it.

Everything here runs on the server's one check thread, one call at a time: the project index and the outcomes are
never read while another call changes them. Nothing here speaks the protocol (mhalint.server.app does).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from mhalint.analysis.project import Project, project_root
from mhalint.configuration import config
from mhalint.configuration.config import ConfigError
from mhalint.configuration.discovery import discover, excluded
from mhalint.configuration.selection import SelectionError
from mhalint.configuration.settings import Settings, resolve
from mhalint.finding import Finding
from mhalint.fixes import fix_source
from mhalint.parse.incremental import Reparser
from mhalint.parse.notebook import Notebook, fix_cells
from mhalint.parse.source import decode
from mhalint.rule import load_rules
from mhalint.run.engine import Checker, Result
from mhalint.server.options import ClientOptions

CONFIG_NAMES = (*config.TOP_LEVEL_NAMES, "pyproject.toml")


@dataclass(frozen=True)
class Source:
    """One document as the editor has it: a Python file's text, or a notebook's code cells."""

    key: str  # the document's URI (the notebook's, for its cells)
    path: str  # its absolute file-system path, or a name for a buffer never saved
    version: int | None
    text: str = ""
    cells: Mapping[int, str] | None = None  # a notebook's code cells by 1-based cell number (every cell counts)
    on_disk: bool = True  # False for an untitled buffer: no configuration or exclusion applies by its path

    @property
    def is_notebook(self) -> bool:
        return self.cells is not None


@dataclass(frozen=True)
class Outcome:
    """A check of one version of a document."""

    source: Source
    findings: tuple[Finding, ...]  # what the settings show; in cell coordinates for a notebook
    reads: frozenset[str] = frozenset()  # the other files the analysis read: a change there re-checks this one
    tracebacks: tuple[str, ...] = ()  # of the rules that failed on it (each also an MHA902 finding)
    problems: tuple[str, ...] = ()  # configuration the check could not use, in one line each


@dataclass
class _Resolved:
    settings: Settings
    problems: tuple[str, ...] = ()


@dataclass
class Session:
    roots: list[str]  # the workspace folders
    options: ClientOptions = ClientOptions()
    rules: dict = field(default_factory=load_rules)
    buffers: dict[str, bytes] = field(default_factory=dict)  # open Python buffers by absolute path
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # by document key
    reparsers: dict[str, Reparser] = field(default_factory=dict)  # each open document's tree, kept between edits
    _settings: dict[tuple, _Resolved] = field(default_factory=dict)
    _checkers: dict[tuple, Checker] = field(default_factory=dict)
    _project: Project | None = None

    # ---- documents ----
    def opened(self, source: Source) -> set[str]:
        """A document was opened or changed: its text is what other files' analyses read from now on. Returns
        the keys of the other open documents that may need a new check."""
        if source.is_notebook or not source.on_disk:
            return set()
        self.buffers[source.path] = encoded(source.text)
        return self._affected(source.path) - {source.key}

    def closed(self, source: Source) -> set[str]:
        """A document was closed: the disk's text counts again, and its outcome is forgotten."""
        self.outcomes.pop(source.key, None)
        self.reparsers.pop(source.key, None)
        if source.is_notebook or self.buffers.pop(source.path, None) is None:
            return set()
        return self._affected(source.path)

    def files_changed(self, paths: list[str]) -> set[str]:
        """Files changed, appeared or went away on disk (the client's file watcher). A configuration file
        re-checks every open document; a Python file that is not open, those whose analysis depends on it."""
        affected: set[str] = set()
        for path in map(os.path.abspath, paths):
            if os.path.basename(path) in CONFIG_NAMES:
                self._settings.clear()
                affected.update(self.outcomes)
            elif path.endswith(".py") and path not in self.buffers:
                affected |= self._affected(path)
        return affected

    def configure(self, options: ClientOptions) -> set[str]:
        """New client options: every open document is checked again."""
        self.options = options
        self._settings.clear()
        return set(self.outcomes)

    def _affected(self, path: str) -> set[str]:
        """The open documents whose findings may change with `path`'s text: those whose analysis read it, and,
        when its imports changed, those it imports a class from (they may have gained or lost a caller)."""
        targets = self._project.changed(path) if self._project is not None else set()
        return {key for key, outcome in self.outcomes.items()
                if path in outcome.reads or outcome.source.path in targets}

    # ---- checks ----
    def check(self, source: Source, cancel: threading.Event | None = None) -> Outcome:
        """The findings of `source` as the settings for its path show them. `cancel`, set from another thread,
        stops it (mhalint.run.budget.Cancelled)."""
        resolved = self.settings_for(source)
        settings = resolved.settings
        if source.on_disk and excluded(source.path, exclude=settings.exclude,
                                       default_exclude=settings.default_exclude, anchors=[settings.config.root]):
            outcome = Outcome(source, (), problems=resolved.problems)  # excluded, as `check --force-exclude` would
        else:
            checker = self._checker(settings)
            project = self.project
            project.reads.clear()
            result = Result()
            found = self._findings(checker, source, result, cancel)
            outcome = Outcome(source, tuple(f for f in found if settings.reports(f)),
                              frozenset(project.reads - {source.path}), tuple(result.tracebacks), resolved.problems)
        self.outcomes[source.key] = outcome
        return outcome

    def fix_all(self, source: Source, cancel: threading.Event | None = None) -> Source | None:
        """`source` with every safe fix applied (as `mhalint check --fix` would), or None when none applies."""
        settings = self.settings_for(source).settings
        checker = self._checker(settings)

        def lint(text: str) -> list[Finding]:
            return [f for f in checker.check_source(encoded(text), source.path, cancel=cancel) if settings.reports(f)]

        if source.is_notebook:
            cells, applied = fix_cells(source.cells, lint, False)
            return replace(source, cells=cells) if applied else None
        text, applied = fix_source(source.text, lint, False)
        return replace(source, text=text) if applied else None

    def _findings(self, checker: Checker, source: Source, result: Result,
                  cancel: threading.Event | None) -> list[Finding]:
        reuse = self.reparsers.setdefault(source.key, Reparser())
        if not source.is_notebook:
            return checker.check_source(encoded(source.text), source.path, result, cancel=cancel, reuse=reuse)
        notebook = Notebook.joining(source.cells)
        found = checker.check_source(notebook.source.encode(), source.path, result, cancel=cancel, reuse=reuse)
        return [notebook.locate(finding) for finding in found]

    @property
    def project(self) -> Project:
        """The Python files of the workspace folders' projects (each from the nearest project root at or above the
        folder, as `mhalint check` finds it), found once with the folder's excludes, with the open buffers."""
        if self._project is None:
            files: list[str] = []
            for root in self.roots:
                settings = self.settings_for(Source("", os.path.join(root, "__init__.py"), None)).settings
                top = project_root(root) or root
                files += map(str, discover([top], extensions=(".py",), respect_gitignore=settings.respect_gitignore,
                                           exclude=settings.exclude, default_exclude=settings.default_exclude,
                                           anchors=[settings.config.root]).files)
            self._project = Project([*files, *self.buffers], overlay=self.buffers)
        return self._project

    # ---- settings ----
    def settings_for(self, source: Source) -> _Resolved:
        """The settings of the configuration file nearest to the document (re-read when that file changes), with
        the client's options over them. A file or an option that cannot be used is a problem, and the defaults
        stand in for it, so that the document is still checked."""
        start = Path(source.path).parent if source.on_disk else Path(self.roots[0] if self.roots else os.getcwd())
        try:
            found = config.find(start)
        except ConfigError as error:  # a pyproject.toml on the way up that is not TOML
            return self._fallback(Path(source.path), (str(error),))
        key = (found, _signature(found))
        if key not in self._settings:
            self._settings[key] = self._resolve(found, start)
        return self._settings[key]

    def _resolve(self, found: Path | None, start: Path) -> _Resolved:
        try:
            return _Resolved(self._with_options(start / "_", found, isolated=found is None))
        except (ConfigError, SelectionError) as error:
            return self._fallback(start / "_", (f"{error}",))

    def _fallback(self, path: Path, problems: tuple[str, ...]) -> _Resolved:
        """The client's options over mhalint's defaults, or the defaults alone when the options are the trouble."""
        try:
            return _Resolved(self._with_options(path, None, isolated=True), problems)
        except SelectionError as error:
            return _Resolved(self._with_options(path, None, isolated=True, options=ClientOptions()),
                             (*problems, f"{error}"))

    def _with_options(self, path: Path, found: Path | None, *, isolated: bool,
                      options: ClientOptions | None = None) -> Settings:
        options = options or self.options
        return resolve(self.rules, [path], config_path=found, isolated=isolated,
                       select=list(options.select) if options.select is not None else None,
                       extend_select=list(options.extend_select),
                       ignore=list(options.ignore) if options.ignore is not None else None,
                       exclude=None, extend_exclude=[], respect_gitignore=None, min_severity=options.min_severity,
                       probe_timeout=None, probe_total_timeout=None, probe_memory=None)

    def _checker(self, settings: Settings) -> Checker:
        """One checker per set of rules and budget, kept: its prefilter is compiled once."""
        rules = settings.selection.rules
        key = (tuple(rule.code for rule in rules), settings.file_budget)
        if key not in self._checkers:
            self._checkers[key] = Checker(rules, unused_noqa=True, budget=settings.file_budget)
        checker = self._checkers[key]
        checker.project = self.project
        return checker


def encoded(text: str) -> bytes:
    """A buffer's text as the bytes of its file: in the encoding it declares (PEP 263) when the text fits it, so
    that the engine decodes it back to the same text; otherwise UTF-8."""
    raw = text.encode("utf-8", "surrogatepass")
    try:
        _, encoding = decode(raw)
        return raw if encoding in ("utf-8", "utf-8-sig") else text.encode(encoding)
    except (SyntaxError, UnicodeError, LookupError):
        return raw


def _signature(path: Path | None) -> tuple | None:
    """What changes when a configuration file is edited: its size and modification time."""
    if path is None:
        return None
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_size, status.st_mtime_ns
