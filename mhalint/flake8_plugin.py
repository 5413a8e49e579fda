"""The flake8 plugin: `flake8 --select MHA` runs mhalint's rules through mhalint's engine.

Registered in the `flake8.extension` entry-point group under the code prefix `MHA`, so flake8's own `--select`,
`--ignore`, `--extend-ignore`, `--per-file-ignores` and `# noqa` choose and suppress codes exactly as for any other
plugin. The plugin adds nothing of its own to the analysis: it hands the file's source to
`Checker(rules).check_source`, the function `mhalint check` uses, with every rule registered in `mhalint.rules`,
and translates the findings.

Decisions, for a flake8 user:

* **Source.** flake8 has already read and decoded the file (or standard input, for `flake8 -`), and passes its
  physical lines; the plugin checks those lines, so `flake8 -` with `--stdin-display-name` works and flake8 and
  mhalint see the same text. The lines are encoded back with the file's PEP 263 declaration (UTF-8 without one)
  so that the engine, which decodes as Python does, gets the same characters back. Only a caller that passes no
  lines makes the plugin read the file itself.
* **Columns.** mhalint's columns are 1-based; flake8 expects 0-based offsets from a plugin and adds 1 when it
  prints. So flake8 prints the same `line:col` as `mhalint check`.
* **Message.** `MHA001 [error] <headline>`: the code, then the severity in brackets, then the finding's headline
  (at most 160 characters: the problem and its decisive evidence), the same text `mhalint check` prints after
  `path:line:col:`; the evidence, the fix and the explanation are in `mhalint check --output-format full`.
  flake8 has no severity of its own, and mhalint's severity is
  not a style level but its confidence that results are corrupted (error: the code shows it; warning: possible
  and nothing shows it is handled; info: correct but relying on a default). A flake8 user cannot select on it,
  so it is worth reading in the message; the code still comes first, which is all flake8 parses.
* **mhalint's configuration.** The plugin reads the settings `mhalint check` reads for the file (the nearest
  `.mhalint.toml`, `mhalint.toml` or pyproject.toml `[tool.mhalint]` from the file's directory upward) and
  reports on each file what `mhalint check --force-exclude FILE` would: `select`, `extend-select` and `ignore`
  choose the codes, `per-file-ignores` and `min-severity` apply, and a file that `exclude` or `extend-exclude`
  (or mhalint's default exclusions, unless `exclude` replaces them) skips gets no MHA finding. flake8's own
  `--select`, `--ignore`, `--per-file-ignores`, `--exclude` and `# noqa` then apply on top, as to any plugin.
  Where both say something, flake8's options win: MHA selectors in flake8's `--select` or `--extend-select`
  (other than one that selects every MHA code, such as the `--select MHA` that turns the plugin on) replace
  mhalint's `select` or add to its `extend-select` as `mhalint check --select` would (so `--select MHA004`
  reports MHA004 even when mhalint's `ignore` lists it), and `--mhalint-min-severity` replaces `min-severity`.
  (flake8 does not pass `--isolated` on to plugins, so mhalint's file is read even then.) A broken mhalint
  configuration is reported on stderr (once per flake8 process) and the files are checked with mhalint's
  defaults.
* **Severity threshold.** As with `mhalint check`, `info` findings are hidden by default. The flake8 option
  `--mhalint-min-severity {info,warning,error}` (or `mhalint-min-severity = info` in the flake8 configuration)
  changes the threshold.
* **noqa.** flake8 applies `# noqa` and `# noqa: MHA001` itself. The engine also applies mhalint's own
  suppression, which reads the same comments the same way (a bare `# noqa`, or a list of codes on the line a
  finding is reported on), so the two agree and applying both is harmless: whatever either suppresses, the user
  asked to suppress. The one difference: under `flake8 --disable-noqa`, MHA findings on lines with a matching
  `# noqa` stay hidden, because the engine's suppression cannot be turned off from here.
* **Syntax errors.** flake8 does not run tree plugins on a file Python cannot parse; it reports `E999` instead.
  So mhalint's `MHA900` (could not parse) reaches flake8 only for a file that Python parses but libcst cannot
  (newer syntax, or a tab and space mix libcst refuses): it is kept, because it says the file was not checked.
  `MHA901` (cannot decode, e.g. an unknown PEP 263 encoding), `MHA902` (a rule failed on this file) and `MHA903`
  (past the file's time or memory budget, `file-time-limit` and `file-memory-limit` of the configuration) are
  kept for the same reason; `--extend-ignore MHA9` hides them all.
"""

from __future__ import annotations

import functools
import io
import os
import sys
import tokenize
from pathlib import Path
from typing import ClassVar, Iterator, Sequence

from mhalint import __version__
from mhalint.analysis.project import Project, project_files, project_root
from mhalint.configuration import config
from mhalint.configuration.discovery import excluded
from mhalint.configuration.selection import SelectionError
from mhalint.configuration.settings import Settings, resolve
from mhalint.finding import Finding, Severity
from mhalint.rule import load_rules
from mhalint.run.budget import FileBudget
from mhalint.run.engine import Checker

_SEVERITIES = [str(severity) for severity in Severity]


class Plugin:
    """A flake8 tree plugin. flake8 passes `tree` (unused: the engine parses with libcst), `filename` and
    `lines` by name; `run()` yields `(line, column, message, type)` with 0-based columns."""

    name = "mhalint"
    version = __version__

    # Loaded once per flake8 process (flake8 runs one checker process per job), on first use.
    _checkers: ClassVar[dict[FileBudget, Checker]] = {}  # one per file budget the configurations set
    # flake8's options that overlap mhalint's settings (None: not given there).
    min_severity: ClassVar[str | None] = None
    select: ClassVar[tuple[str, ...] | None] = None
    extend_select: ClassVar[tuple[str, ...]] = ()

    def __init__(self, tree: object = None, filename: str = "stdin", lines: Sequence[str] | None = None):
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, option_manager) -> None:
        option_manager.add_option(
            "--mhalint-min-severity", default=None, choices=_SEVERITIES, parse_from_config=True,
            help="Hide mhalint (MHA) findings below this severity; info shows correct code that relies on a "
                 "default. (Default: mhalint's `min-severity` setting, else warning)")

    @classmethod
    def parse_options(cls, options) -> None:
        cls.min_severity = getattr(options, "mhalint_min_severity", None)
        cls.select = _mha_selectors(getattr(options, "select", None))
        cls.extend_select = _mha_selectors(getattr(options, "extend_select", None)) or ()
        _config_in.cache_clear()
        _settings_in.cache_clear()

    @classmethod
    def checker(cls, budget: FileBudget) -> Checker:
        if budget not in cls._checkers:
            cls._checkers[budget] = Checker(list(load_rules().values()), budget=budget)
        return cls._checkers[budget]

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        settings = self.settings()
        if excluded(self.filename, exclude=settings.exclude, default_exclude=settings.default_exclude,
                    anchors=[settings.config.root]):
            return
        source = self._source()
        checker = self.checker(settings.file_budget)
        checker.project = _project(os.path.abspath(self.filename), settings)
        for finding in checker.check_source(source, self.filename):
            if settings.reports(finding):
                yield finding.line, max(finding.column - 1, 0), message(finding), type(self)

    def settings(self) -> Settings:
        """mhalint's settings for this file, under flake8's overlapping options."""
        return _settings_in(_config_in(Path(self.filename).parent), self.min_severity, self.select,
                            self.extend_select)

    def _source(self) -> bytes:
        if self.lines is None:
            return Path(self.filename).read_bytes()
        return encode("".join(self.lines))


def _project(path: str, settings: Settings) -> Project | None:
    """The project the analyses of `path` may follow a class into, as `mhalint check` sees it: every file below its
    root, walked when first needed, once per root and excludes in this process."""
    root = project_root(path, _ROOTS)
    if root is None:
        return None
    return _project_at(root, settings.respect_gitignore, tuple(settings.exclude), frozenset(settings.default_exclude),
                       str(settings.config.root))


_ROOTS: dict[str, str | None] = {}  # each folder's project root, looked for once per process


@functools.lru_cache(maxsize=16)
def _project_at(root: str, respect_gitignore: bool, exclude: tuple[str, ...], default_exclude: frozenset[str],
                anchor: str) -> Project:
    return Project([], more=lambda: project_files([root], respect_gitignore=respect_gitignore, exclude=exclude,
                                                  default_exclude=default_exclude, anchors=[anchor]))


@functools.lru_cache(maxsize=1024)
def _config_in(directory: Path) -> Path | None:
    """The configuration file for the files of `directory`, looked for once per directory."""
    try:
        return config.find(directory)
    except config.ConfigError as error:
        _broken(error)
        return None


@functools.lru_cache(maxsize=64)
def _settings_in(found: Path | None, min_severity: str | None, select: tuple[str, ...] | None,
                 extend_select: tuple[str, ...]) -> Settings:
    """The settings from the configuration file `found` (None: the defaults), once per file and options."""
    options = {"select": list(select) if select is not None else None, "extend_select": list(extend_select),
               "ignore": None, "exclude": None, "extend_exclude": [], "respect_gitignore": None,
               "min_severity": min_severity, "probe_timeout": None, "probe_total_timeout": None,
               "probe_memory": None}
    try:
        return resolve(load_rules(), [], config_path=found, isolated=found is None, **options)
    except (config.ConfigError, SelectionError) as error:
        _broken(error)
        return resolve(load_rules(), [], config_path=None, isolated=True,
                       **{**options, "select": None, "extend_select": []})


def _broken(error: Exception) -> None:
    """A plugin cannot stop flake8's run: say what is wrong, once, and go on with mhalint's defaults."""
    print(f"mhalint: error: {error}; checking with mhalint's default settings", file=sys.stderr)


def _mha_selectors(selectors: Sequence[str] | None) -> tuple[str, ...] | None:
    """flake8's selectors that name some MHA codes, for mhalint's selection; None when there are none or when
    one selects every MHA code (as the `--select MHA` that turns the plugin on does): mhalint's own select and
    ignore then decide."""
    mha = [selector.strip().upper() for selector in selectors or () if selector.strip().upper().startswith("MHA")]
    every = any("MHA".startswith(selector.strip().upper()) for selector in selectors or () if selector.strip())
    return tuple(mha) if mha and not every else None


def message(finding: Finding) -> str:
    """The flake8 message: code first (flake8 splits it off at the first space), then severity and headline."""
    return f"{finding.code} [{finding.severity}] {finding.message}"


def encode(text: str) -> bytes:
    """Bytes that decode, as Python decodes a source file, to `text`: encoded with the file's PEP 263
    declaration, since the engine honours it. A character that codec cannot hold (flake8 falls back to latin-1
    for a file whose bytes do not match its declaration) becomes one `?`, which keeps every column in place."""
    raw = text.encode("utf-8")
    try:
        normalised = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        encoding, _ = tokenize.detect_encoding(io.BytesIO(normalised).readline)
    except SyntaxError:  # an unknown or malformed declaration: the engine reports it as MHA901
        return raw
    if encoding in ("utf-8", "utf-8-sig"):
        return raw
    return text.encode(encoding, errors="replace")
