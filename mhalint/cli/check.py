"""`mhalint check`, step by step: the request is checked, the settings resolved, and then one of the modes runs
(show the settings, show the files, add noqa directives, print the fixes as a diff, or check, fix and report).
Each mode ends the process with its exit code. Imported by the command when it runs: it loads the engine."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from mhalint.cli import summary
from mhalint.cli.main import (
    EXIT_CLEAN,
    EXIT_ERROR,
    EXIT_FINDINGS,
    FORMATS,
    STDIN,
    UsageError,
    probe_findings,
    rule_codes,
    start_up_done,
    use_color,
)
from mhalint.cli.output import Output
from mhalint.names import printable

if TYPE_CHECKING:
    from typing import Sequence

    from mhalint.configuration.settings import Settings
    from mhalint.run.engine import Checker, Result


@dataclass(frozen=True)
class CheckRequest:
    """The options of `mhalint check` as the command line gave them (None: not given, the settings decide)."""

    paths: tuple[Path, ...]
    config: tuple[str, ...]  # --config: a file, and settings written KEY=VALUE
    per_file_ignores: tuple[str, ...]  # PATTERN:CODES
    select: tuple[str, ...]
    extend_select: tuple[str, ...]
    ignore: tuple[str, ...]
    respect_gitignore: bool | None
    exclude: tuple[str, ...]
    extend_exclude: tuple[str, ...]
    force_exclude: bool | None
    show_settings: bool
    show_files: bool
    min_severity: str | None
    output_format: str | None
    isolated: bool
    watch: bool
    cache_dir: Path | None
    ignore_noqa: bool
    fix_only: bool
    parse_all: bool
    stdin_filename: str | None
    fix: bool
    explain: bool
    color: str
    unsafe_fixes: bool
    diff: bool
    exit_zero: bool
    no_cache: bool
    jobs: int | None
    probe: bool
    probe_timeout: float | None
    probe_total_timeout: float | None
    probe_memory: int | None
    show_traceback: bool
    output_file: Path | None
    statistics: bool
    show_fixes: bool
    exit_non_zero_on_fix: bool
    add_noqa: bool
    add_noqa_reason: str | None  # --add-noqa=REASON
    quiet: bool
    silent: bool
    verbose: bool


def run(request: CheckRequest) -> NoReturn:
    """The whole command: exits with 0 (clean), 1 (findings) or 2 (an error)."""
    from dataclasses import replace

    from mhalint.rule import load_rules

    if request.fix_only:
        request = replace(request, fix=True)  # --fix-only is --fix that does not report what remains
    paths = _paths(request)
    started = time.perf_counter()
    rules = load_rules()
    settings = _settings(request, rules, paths)
    if request.verbose:
        where = settings.config.source if settings.config.path else "none found, the defaults"
        click.echo(f"mhalint: configuration: {where}", err=True)
    if request.show_settings:
        click.echo(settings.show())
        sys.exit(EXIT_CLEAN)
    if request.show_files:
        _show_files(paths or (Path("."),), _discovery(settings))
        sys.exit(EXIT_CLEAN)
    session = _Session(request, settings, rules, paths)
    if request.watch:
        _watch(session, started)
    result = session.check(stream=session.streams)
    if request.add_noqa:
        _add_noqa(session, result)
    outcome = _fix(session, result) if request.fix or request.diff else None
    if outcome is not None and outcome.applied:
        result = session.check(stream=False)  # the findings the fixes left
    _report(session, result, outcome, started)


def _paths(request: CheckRequest) -> tuple[Path, ...]:
    """The paths to check, refused with a usage error when one does not exist or the options contradict."""
    paths = request.paths
    if request.stdin_filename and not paths:
        paths = (STDIN,)  # as ruff: a name for standard input and nothing else to check
    missing = [str(path) for path in paths if path != STDIN and not os.path.lexists(path)]
    if missing:
        raise UsageError(f"path {missing[0]!r} does not exist")
    if request.watch and (request.fix or request.diff or request.add_noqa or request.probe or paths == (STDIN,)
                          or request.output_file is not None):
        raise UsageError("--watch checks and reports again on each change: use it without --fix, --diff, "
                         "--add-noqa, --probe, --output-file and standard input")
    if request.add_noqa and (request.fix or request.diff or paths == (STDIN,)):
        raise UsageError("--add-noqa edits files: use it without --fix, --diff and standard input")
    from mhalint.run.noqa import reason_fits

    if request.add_noqa_reason is not None and not reason_fits(request.add_noqa_reason):
        raise UsageError("--add-noqa=REASON takes one line of text that does not start with a code (it would be "
                         "read as one)")
    return paths


def _settings(request: CheckRequest, rules, paths: tuple[Path, ...]) -> Settings:
    from mhalint.configuration.settings import resolve

    config_path, overrides = _config_arguments(request.config)
    if request.isolated and config_path is not None:
        raise UsageError("--isolated reads no configuration file: use it without --config FILE")
    return resolve(
        rules, list(paths), config_path=config_path, overrides=overrides,
        per_file_ignores=_per_file_ignores(request.per_file_ignores) or None,
        select=rule_codes(request.select) if request.select else None,
        extend_select=rule_codes(request.extend_select), ignore=rule_codes(request.ignore) if request.ignore else None,
        exclude=list(request.exclude) if request.exclude else None, extend_exclude=list(request.extend_exclude),
        respect_gitignore=request.respect_gitignore, min_severity=request.min_severity,
        probe_timeout=request.probe_timeout, probe_total_timeout=request.probe_total_timeout,
        probe_memory=request.probe_memory, force_exclude=request.force_exclude, jobs=request.jobs,
        isolated=request.isolated)


def _config_arguments(given: tuple[str, ...]) -> tuple[Path | None, dict]:
    """--config's file, and its KEY=VALUE settings as one table (ruff's inline TOML: `min-severity = 'info'`,
    `probe.timeout = 5`). A value that names something that exists is the file, whatever its name holds."""
    from mhalint.configuration.config import inline

    files, table = [], {}
    for value in given:
        if os.path.lexists(value) or "=" not in value:
            if os.path.isdir(value) or not os.path.lexists(value):
                raise UsageError(f"--config {value!r}: {'a directory' if os.path.isdir(value) else 'no such file'}")
            files.append(Path(value))  # read as the configuration reads files (a FIFO is refused there)
            continue
        for key, item in inline(value).items():
            table[key] = {**table[key], **item} if isinstance(item, dict) and isinstance(table.get(key), dict) \
                else item
    if len(files) > 1:
        raise UsageError("--config names one file; give the other settings as KEY=VALUE")
    return (files[0] if files else None), table


def _per_file_ignores(given: tuple[str, ...]) -> dict[str, list[str]]:
    """--per-file-ignores `PATTERN:CODES` as the setting's table (the pattern may hold a colon: the last one
    splits)."""
    table: dict[str, list[str]] = {}
    for value in given:
        pattern, colon, codes = value.rpartition(":")
        if not colon or not pattern or not codes.strip():
            raise UsageError(f"--per-file-ignores {value!r}: write PATTERN:CODES, such as 'tests/*:MHA007,MHA012'")
        table.setdefault(pattern, []).extend(code.strip() for code in codes.split(",") if code.strip())
    return table


def _discovery(settings: Settings) -> dict:
    """How the files to check are found, as the settings say."""
    return {"respect_gitignore": settings.respect_gitignore, "exclude": settings.exclude,
            "default_exclude": settings.default_exclude, "anchors": [settings.config.root],
            "force_exclude": settings.force_exclude}


class _Session:
    """What one command checks and prints with: the checker, the output, the printer, the cache and the progress
    line, kept for the check after the fixes."""

    def __init__(self, request: CheckRequest, settings: Settings, rules, paths: tuple[Path, ...]):
        from mhalint.report import RenderOptions
        from mhalint.report.printer import HUMAN, Printer
        from mhalint.run.engine import Checker

        self.request, self.settings, self.rules, self.paths = request, settings, rules, paths
        self.checker = Checker(settings.selection.rules, unused_noqa=True,  # always (cached alike); shown when selected
                               budget=settings.file_budget, parse_all=request.parse_all,
                               ignore_noqa=request.ignore_noqa)
        start_up_done()
        self.out = Output(request.output_file, quiet=request.quiet, silent=request.silent)
        self.output_format = request.output_format or (
            "full" if request.output_file is None and sys.stdout.isatty() else "concise")
        self.human = self.output_format in HUMAN
        display = RenderOptions(explain=request.explain, unsafe_fixes=request.unsafe_fixes,
                                color=use_color(request.color) and (request.output_file is None
                                                                    or request.color == "always"))
        self.printer = Printer(FORMATS[self.output_format], self.output_format, rules, display, self.out)
        self.stdin = paths == (STDIN,)
        # concise and full are printed file by file while the run goes on, unless something needs every finding first
        self.streams = self.human and request.output_file is None and not self.stdin and not (
            request.fix or request.diff or request.statistics or request.probe or request.add_noqa)
        options = [name for name in ("parse_all", "ignore_noqa") if getattr(request, name)]
        self.cache = None if request.no_cache or self.stdin else _cache(settings, request.cache_dir, options)
        self.bar = None if self.stdin else _progress(self.output_format, request.quiet or request.silent)

    def shown(self, found) -> list:
        return [self.settings.offered(f) for f in found if self.settings.reports(f)]

    @property
    def within(self) -> list[Path]:
        """The project roots that --fix and --add-noqa may write in."""
        from mhalint.fixes import project_roots

        return project_roots(self.paths or (Path("."),), self.settings.config.root)

    def check(self, *, stream: bool) -> Result:
        """The run's result; with `stream`, each file's findings printed as soon as it is done."""
        request = self.request
        if self.stdin:
            return _check_stdin(self.checker, self.shown, request.stdin_filename or "-", fix=request.fix,
                                diff=request.diff, unsafe=request.unsafe_fixes)
        bar, counted = self.bar, 0

        def advance(done: int, total: int, found) -> None:
            nonlocal counted
            counted += len(self.shown(found))
            bar.update(done, total, counted)

        def print_file(path: str, found) -> None:
            if bar is not None:
                bar.clear()  # the report's line starts at the left margin; the next update redraws the bar
            self.printer.findings(self.shown(found))

        try:
            return self.checker.check_paths(self.paths or (Path("."),), cache=self.cache, jobs=self.settings.jobs,
                                            on_file=print_file if stream else None,
                                            progress=advance if bar is not None else None,
                                            **_discovery(self.settings))
        finally:
            if bar is not None:
                bar.clear()


def _add_noqa(session: _Session, result: Result) -> NoReturn:
    """`--add-noqa`: a directive on each line with a finding, except the engine's own findings (a file that cannot
    be read or parsed, an unused directive)."""
    from mhalint.run import noqa
    from mhalint.run.diagnostics import ENGINE_CODES, INTERNAL_ERROR

    found = [f for f in session.shown(result.findings) if f.code not in ENGINE_CODES or f.code == INTERNAL_ERROR]
    added, failures = noqa.add_to_files(found, lambda text: click.echo(text, err=True), session.within,
                                        session.request.add_noqa_reason or "")
    session.out.status(f"Added {summary.plural(added, 'noqa directive')}.")
    sys.exit(EXIT_ERROR if failures else EXIT_CLEAN)


@dataclass
class _FixOutcome:
    before: list  # the findings shown before the fixes
    applied: int = 0
    failures: int = 0


def _fix(session: _Session, result: Result) -> _FixOutcome:
    """`--fix` writes the fixes; `--diff` prints them and exits."""
    request = session.request
    outcome = _fix_files(session.checker, session.shown(result.findings), session.shown,
                         unsafe=request.unsafe_fixes, write=not request.diff, out=session.out, within=session.within)
    if request.diff:
        session.out.close()
        session.out.status(summary.would_fix(outcome.applied, outcome.before, request.unsafe_fixes))
        sys.exit(EXIT_ERROR if outcome.failures else EXIT_FINDINGS if outcome.applied and not request.exit_zero
                 else EXIT_CLEAN)
    return outcome


def _fix_files(checker: Checker, findings, shown, *, unsafe: bool, write: bool, out: Output,
               within: Sequence[Path]) -> _FixOutcome:
    """Fix (or, when not writing, print the diff of) every file with an applicable fix, a notebook's cells too, in
    files whose real path is `within` the project. A file that cannot be fixed gets a one-line message, and the
    others are still fixed."""
    from mhalint.fixes import FixError, SourceFile, applicable, fix_source
    from mhalint.parse import notebook
    from mhalint.parse.lazy import cst

    outcome = _FixOutcome(findings)
    for path in sorted({f.path for f in findings if applicable(f, unsafe)}):
        try:
            source = SourceFile.read(Path(path))
            in_notebook = path.endswith(".ipynb")
            encoding = "utf-8" if in_notebook else source.encoding  # a notebook's lint sees its cells as a module

            def lint(text: str, path=path, encoding=encoding):
                return shown(checker.check_source(text.encode(encoding), path))

            new_text, applied = (notebook.fix if in_notebook else fix_source)(source.text, lint, unsafe)
            if applied and write:
                source.write(new_text, within)
            elif applied:
                out.report(notebook.diff(source.text, new_text, path) if in_notebook else source.diff(new_text),
                           end="")
            outcome.applied += applied
        except (FixError, OSError, UnicodeError, LookupError, notebook.NotebookError,
                cst.ParserSyntaxError) as error:
            outcome.failures += 1
            click.echo(f"mhalint: error: cannot fix {printable(path)}: {getattr(error, 'strerror', None) or error}",
                       err=True)
    return outcome


def _report(session: _Session, result: Result, outcome: _FixOutcome | None, started: float) -> NoReturn:
    """The report, then the exit code."""
    sys.exit(_printed(session, result, outcome, started))


def _printed(session: _Session, result: Result, outcome: _FixOutcome | None, started: float) -> int:
    """The findings (unless streamed), the statistics, the fixes and the summary line; the exit code they make."""
    request, settings, out = session.request, session.settings, session.out
    findings = session.shown(result.findings)
    if request.probe:
        findings = probe_findings(findings, session.rules, settings.probe_limits)
    line = summary.found(len(findings), result.files_checked, [f for f in result.findings if settings.hidden(f)],
                         settings.threshold, result.files_unparsed)
    line += f" {summary.fixed(outcome.applied, findings, request.unsafe_fixes)}" if request.fix else (
        f" {summary.fixable(findings, request.unsafe_fixes)}".rstrip())
    if request.probe:
        line += f" {summary.probe_counts(findings)}"
    remaining = findings
    if request.fix_only:  # what was fixed, not what remains (as ruff's --fix-only)
        line, findings = summary.fixed(outcome.applied, remaining, request.unsafe_fixes), []
    if request.statistics:
        session.printer.statistics(findings)
    elif not session.streams:
        session.printer.findings(findings)
    if request.show_fixes and outcome is not None:  # without --fix, nothing was fixed to list
        out.summary(summary.fixes_by_file(summary.fixed_codes(outcome.before, remaining, request.unsafe_fixes),
                                          {f.code: f.name for f in outcome.before}))
    if session.human:
        out.summary(line)
    out.close()
    if request.verbose:
        click.echo(f"mhalint: {summary.plural(result.files_checked, 'file')} checked in "
                   f"{time.perf_counter() - started:.2f} s", err=True)
    if request.show_traceback:
        for text in result.tracebacks:
            click.echo(text, err=True)
    fixed = outcome.applied if outcome is not None else 0
    if result.internal_errors or (outcome is not None and outcome.failures):
        return EXIT_ERROR
    if request.exit_zero:
        return EXIT_CLEAN
    return EXIT_FINDINGS if findings or (request.exit_non_zero_on_fix and fixed) else EXIT_CLEAN


WATCH_EVERY = 0.5  # seconds between two looks at the files under --watch


def _watch(session: _Session, started: float) -> NoReturn:
    """--watch, as ruff's: check and report, then again each time a file to check is saved, added or removed
    (looked for every WATCH_EVERY seconds; the cache makes a check of the changed files only), until Ctrl-C ends
    it with exit 130."""
    seen = None
    while True:
        now = _files_state(session)
        if now != seen:
            if seen is not None:
                session.out.status(f"[{time.strftime('%H:%M:%S')}] File change detected...")
            seen = now
            _printed(session, session.check(stream=session.streams), None, started)
            session.out.status(f"[{time.strftime('%H:%M:%S')}] Watching for file changes.")
        time.sleep(WATCH_EVERY)


def _files_state(session: _Session) -> tuple:
    """(path, size, modification time) of each file `check` would read, sorted."""
    from mhalint.configuration.discovery import discover
    from mhalint.run.engine import SOURCES

    state = []
    for path in discover(session.paths or (Path("."),), extensions=SOURCES, **_discovery(session.settings)).files:
        try:
            status = os.stat(path)
        except OSError:
            continue
        state.append((os.fsdecode(path), status.st_size, status.st_mtime_ns))
    return tuple(sorted(state))


def _progress(output_format: str, quiet: bool):
    """A progress line on standard error for a long run: on a terminal only, for the formats people read, and
    not with --quiet or --silent; None otherwise."""
    from mhalint.cli.progress import Progress
    from mhalint.report.printer import HUMAN

    if quiet or output_format not in HUMAN or not sys.stderr.isatty() or os.environ.get("TERM") == "dumb":
        return None
    return Progress()


def _show_files(paths, discovery: dict) -> None:
    """The files `check` would read, sorted, one per line (as ruff's --show-files); paths that cannot be checked
    go to stderr."""
    from mhalint.configuration.discovery import discover
    from mhalint.run.engine import SOURCES

    found = discover(paths, extensions=SOURCES, **discovery)
    for path in found.files:
        click.echo(printable(os.fsdecode(path)))
    for path, reason in found.errors:
        click.echo(f"mhalint: warning: {printable(os.fsdecode(path))}: cannot be checked: {reason}", err=True)


def _check_stdin(checker: Checker, shown, filename: str, *, fix: bool, diff: bool, unsafe: bool) -> Result:
    """Lint standard input, the result reported like a file's; with --fix print the fixed source (findings go to
    stderr), as ruff does."""
    from mhalint.fixes import FixError, fix_source, unified_diff
    from mhalint.parse.source import decode
    from mhalint.report import concise
    from mhalint.run.engine import Result

    raw = sys.stdin.buffer.read()  # bytes: the file's own encoding decides, as for a file on disk
    found = checker.check_source(raw, filename)
    if fix or diff:
        try:
            text, encoding = decode(raw)
            fixed, applied = fix_source(text, lambda t: shown(checker.check_source(t.encode(encoding), filename)),
                                        unsafe)
        except (FixError, SyntaxError, UnicodeError) as error:
            raise UsageError(f"cannot fix {filename}: {error}")
        if diff:
            click.echo(unified_diff(text, fixed, filename), nl=False)
            click.echo(summary.would_fix(applied, shown(found), unsafe), err=True)
            sys.exit(EXIT_FINDINGS if applied else EXIT_CLEAN)
        sys.stdout.flush()
        sys.stdout.buffer.write(fixed.encode(encoding))
        sys.stdout.buffer.flush()
        findings = shown(checker.check_source(fixed.encode(encoding), filename))
        if findings:
            click.echo(concise.render(findings), err=True)
        sys.exit(EXIT_FINDINGS if findings else EXIT_CLEAN)
    return Result(found, files_checked=1)


def _cache(settings: Settings, chosen: Path | None, options: list[str]):
    """The run's cache (in `chosen`, --cache-dir, if given); only a run that keeps one loads its module."""
    from mhalint.run.cache import Cache, cache_dir

    directory, follow = cache_dir(settings.config.root, chosen, settings.config.cache_dir)
    return Cache(directory, settings.selection.rules, follow=follow, options=options)
