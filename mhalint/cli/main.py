"""The `mhalint` command line: thin click commands that parse options, call the engine and print.

Exit codes follow ruff and flake8: 0 clean, 1 findings, 2 usage or internal error; 130 and 143 after an
interrupt (SIGINT, SIGTERM).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from mhalint import __version__
from mhalint.cli.output import Output, OutputError
from mhalint.configuration import schema
from mhalint.finding import Severity
from mhalint.names import printable
from mhalint.probe.limits import ProbeLimits
from mhalint.run import interrupts

if TYPE_CHECKING:
    from typing import Sequence

    from mhalint.run.engine import Checker, Result

# Everything that imports libcst (the engine, the rules, the formats that need rule metadata) is imported inside the
# commands, so that `mhalint --version` and `mhalint --help` start in a few milliseconds.

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """A mistake in how mhalint was called: reported in one line, exit code 2."""


class _Group(click.Group):
    """Turns usage and plugin errors into a one-line message and exit 2 instead of a traceback, and interrupts
    into a one-line message and exit 130 (Ctrl-C, SIGINT) or 143 (SIGTERM), after every `finally` on the way
    has run (workers stopped, temporary files removed); click's own handling would say `Aborted!` and exit 1,
    the code for findings."""

    def resolve_command(self, ctx: click.Context, args):
        name, command, rest = super().resolve_command(ctx, args)
        if name != "check":  # check says when its start-up is over: once its rules are loaded
            _started()
        return name, command, rest

    def invoke(self, ctx: click.Context):
        try:
            with interrupts.raised_as_exceptions():
                return super().invoke(ctx)
        except (KeyboardInterrupt, interrupts.Terminated) as interrupt:
            _stop(ctx, interrupt)
        except Exception as error:
            interrupt = interrupts.behind(error)
            if interrupt is not None:
                _stop(ctx, interrupt)
            from mhalint.configuration.config import ConfigError
            from mhalint.configuration.selection import SelectionError
            from mhalint.rule import PluginError

            if not isinstance(error, (UsageError, PluginError, SelectionError, ConfigError, OutputError)):
                raise
            click.echo(f"mhalint: error: {printable(str(error))}", err=True)  # it may name a file
            ctx.exit(EXIT_ERROR)


def _stop(ctx: click.Context, interrupt: KeyboardInterrupt | interrupts.Terminated):
    """The interrupt's message and exit code; the console script leaves at once (`_leave`), ignoring the signals
    from here on: a second Ctrl-C would otherwise end it with click's `Aborted!` and exit 1."""
    if _console:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
    interrupted = isinstance(interrupt, KeyboardInterrupt)
    click.echo("mhalint: interrupted" if interrupted else "mhalint: terminated", err=True)
    code = interrupts.EXIT_INTERRUPTED if interrupted else interrupts.EXIT_TERMINATED
    if _console:
        _leave(code)
    ctx.exit(code)


_starting = False  # set by console() until the command has loaded what it needs
_console = False  # set by console(): the process is mhalint's own and ends with the command


def console() -> None:
    """The `mhalint` console script and `python -m mhalint`: `main`, with its start-up kept from the cyclic
    collector. Start-up creates objects that live as long as the process (the modules and classes of mhalint, its
    rules, click, and libcst once a file needs it). The collector's passes while they are created, and its pass at
    exit, walk all of them for nothing: about 11 ms and 27 ms of a 0.27 s check of one small file. So the collector
    is off until the command has loaded what it needs (`_started`), what exists then is frozen out of its
    generations (gc.freeze; forked workers then share those pages too), and so is everything at exit. `main`
    called in-process (click's CliRunner) leaves the caller's collector as it is."""
    global _starting, _console
    _starting = _console = True
    gc.disable()
    try:
        main()
    finally:
        gc.freeze()  # only the interpreter's exit follows


def _leave(code: int) -> NoReturn:
    """Exit with `code` now, the standard streams flushed, without the interpreter's finalization (every `finally`
    of the command has run): an interrupt can leave the check thread (mhalint.run.deep_stack) inside libcst's native
    parser, and a daemon thread that wakes during finalization is ended with pthread_exit, which cannot unwind the
    parser's Rust frames, so glibc aborted the process (SIGABRT, issue 34)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that closed the pipe, a stream already closed
            pass
    os._exit(code)


def _started() -> None:
    """The command has loaded its modules and rules: the collector back on, with what exists now frozen."""
    global _starting
    if _starting:
        _starting = False
        gc.freeze()
        gc.enable()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mhalint")
def main() -> None:
    """mhalint: find the PyTorch attention mistakes that corrupt results without raising an error."""


class _Number(click.ParamType):
    """A number the command line takes, refused outside its range in mhalint.configuration.schema, as the configuration
    file and the server's options refuse it."""

    def __init__(self, key: str):
        self.number = schema.NUMBERS[key]
        self.name = self.number.unit

    def convert(self, value, param, ctx):
        try:
            return self.number.parse(value) if isinstance(value, str) else self.number.check(value)
        except ValueError as error:
            self.fail(str(error), param, ctx)


def _number_option(name: str, key: str, default: object, metavar: str | None = None):
    """An option for the setting `key` of mhalint.configuration.schema (None when not given), its help the schema's."""
    number = schema.NUMBERS[key]
    return click.option(name, type=_Number(key), default=None, metavar=metavar or number.unit.upper(),
                        help=f"{number.doc[0].upper()}{number.doc[1:]}: {number.range} [default: {default}].")


def _probe_options(command):
    """The probe's limits, shared by `check --probe` and `probe` (None: from the configuration, else defaults)."""
    command = _number_option("--probe-timeout", "probe.timeout", f"{ProbeLimits.site_timeout:g}")(command)
    command = _number_option("--probe-total-timeout", "probe.total-timeout", f"{ProbeLimits.total_timeout:g}")(command)
    return _number_option("--probe-memory", "probe.memory", ProbeLimits.memory_mb)(command)


def _display_options(command):
    """How the human-readable output looks, shared by `check` and `probe`."""
    command = click.option("--explain", is_flag=True,
                           help="With the full format, print each finding's explanation (the torch behaviour "
                                "behind it).")(command)
    return click.option("--color", "color", type=click.Choice(["auto", "always", "never"]), default="auto",
                        show_default=True,
                        help="Colour the full format: auto colours a terminal unless NO_COLOR is set (FORCE_COLOR "
                             "colours a pipe).")(command)


def _use_color(choice: str) -> bool:
    """--color, then the NO_COLOR and FORCE_COLOR conventions (no-color.org, force-color.org), then the terminal."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


_FORMATS = {"concise": "mhalint.report.concise", "full": "mhalint.report.full", "json": "mhalint.report.json",
            "json-lines": "mhalint.report.json_lines", "github": "mhalint.report.github",
            "sarif": "mhalint.report.sarif"}
_FORMAT_HELP = "Default: full on a terminal, concise otherwise."
STDIN = Path("-")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read settings from this file instead of the nearest one: a pyproject.toml ([tool.mhalint]), "
                   "or a mhalint.toml or other .toml file (top-level keys).")
@click.option("--select", multiple=True, metavar="CODES",
              help="Comma-separated rule codes or prefixes to enable (default: all rules).")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Codes or prefixes to enable on top of select.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Comma-separated rule codes or prefixes to disable.")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None,
              help="Skip files that .gitignore excludes [default: respect].")
@click.option("--exclude", multiple=True, metavar="PATTERN",
              help="gitignore-style patterns of paths to skip, replacing the default list (venvs, caches, ...).")
@click.option("--extend-exclude", multiple=True, metavar="PATTERN", help="Patterns to skip on top of exclude.")
@click.option("--force-exclude/--no-force-exclude", default=None,
              help="Apply exclude and extend-exclude to the paths named on the command line too, as pre-commit "
                   "needs [default: no].")
@click.option("--show-settings", is_flag=True, help="Print the resolved settings, each with where it came from, "
                                                    "and exit.")
@click.option("--show-files", is_flag=True, help="Print the files that would be checked, one per line, and exit.")
@click.option("--min-severity", type=click.Choice([str(s) for s in Severity]), default=None,
              help="Hide findings below this severity [default: warning].")
@click.option("--output-format", type=click.Choice(sorted(_FORMATS)), default=None, help=_FORMAT_HELP)
@click.option("--stdin-filename", metavar="PATH",
              help="The name to report for source read from standard input (read when no PATHS are given, or -).")
@_display_options
@click.option("--fix", is_flag=True, help="Apply safe fixes in place (atomic writes).")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, also apply fixes that change behaviour.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff and write nothing.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (errors still exit 2).")
@click.option("--no-cache", is_flag=True, help="Check every file again (the cache lives in .mhalint_cache, or "
                                               "MHALINT_CACHE_DIR).")
@_number_option("--jobs", "jobs", "the usable CPUs", metavar="N")
@click.option("--probe", is_flag=True, help="Confirm each finding by re-creating it with torch (needs torch).")
@_probe_options
@click.option("--show-traceback", is_flag=True, help="Print the traceback of any internal error.")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to this file instead of standard output.")
@click.option("--statistics", is_flag=True, help="Print the number of findings of each code instead of the findings.")
@click.option("--show-fixes", is_flag=True, help="With --fix, list what was fixed, by file and code.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="With --fix, exit 1 when a file was fixed, even when no "
                                                            "finding is left.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to each line with a finding, keeping the "
                                               "directives already there.")
@click.option("-q", "--quiet", is_flag=True, help="Print the findings and nothing else.")
@click.option("-s", "--silent", is_flag=True, help="Print nothing; only the exit status tells.")
@click.option("-v", "--verbose", is_flag=True, help="Say on stderr which configuration was read, and how many files "
                                                    "were checked in what time.")
def check(paths: tuple[Path, ...], config_path: Path | None, select, extend_select, ignore, respect_gitignore,
          exclude, extend_exclude, force_exclude: bool | None, show_settings: bool, show_files: bool, min_severity,
          output_format: str, stdin_filename: str | None, fix: bool,
          explain: bool, color: str, unsafe_fixes: bool, diff: bool, exit_zero: bool, no_cache: bool,
          jobs: int | None, probe: bool, probe_timeout, probe_total_timeout, probe_memory,
          show_traceback: bool, output_file: Path | None, statistics: bool, show_fixes: bool,
          exit_non_zero_on_fix: bool, add_noqa: bool, quiet: bool, silent: bool, verbose: bool) -> None:
    """Check PATHS (files or directories; default: the current directory; - reads standard input)."""
    from mhalint.cli import summary
    from mhalint.configuration.settings import resolve as resolve_settings
    from mhalint.fixes import project_roots
    from mhalint.report import RenderOptions
    from mhalint.report.printer import HUMAN, Printer
    from mhalint.rule import load_rules
    from mhalint.run import noqa
    from mhalint.run.diagnostics import ENGINE_CODES, INTERNAL_ERROR
    from mhalint.run.engine import Checker

    if stdin_filename and not paths:
        paths = (STDIN,)  # as ruff: a name for standard input and nothing else to check
    missing = [str(path) for path in paths if path != STDIN and not os.path.lexists(path)]
    if missing:
        raise UsageError(f"path {missing[0]!r} does not exist")
    if show_fixes and not fix:
        raise UsageError("--show-fixes lists what --fix fixed; use it with --fix")
    if add_noqa and (fix or diff or paths == (STDIN,)):
        raise UsageError("--add-noqa edits files: use it without --fix, --diff and standard input")
    started = time.perf_counter()
    rules = load_rules()
    settings = resolve_settings(
        rules, list(paths), config_path=config_path, select=_split(select) if select else None,
        extend_select=_split(extend_select), ignore=_split(ignore) if ignore else None,
        exclude=list(exclude) if exclude else None, extend_exclude=list(extend_exclude),
        respect_gitignore=respect_gitignore, min_severity=min_severity, probe_timeout=probe_timeout,
        probe_total_timeout=probe_total_timeout, probe_memory=probe_memory, force_exclude=force_exclude, jobs=jobs)
    if verbose:
        where = settings.config.source if settings.config.path else "none found, the defaults"
        click.echo(f"mhalint: configuration: {where}", err=True)
    discovery = {"respect_gitignore": settings.respect_gitignore, "exclude": settings.exclude,
                 "default_exclude": settings.default_exclude, "anchors": [settings.config.root],
                 "force_exclude": settings.force_exclude}
    if show_settings:
        click.echo(settings.show())
        sys.exit(EXIT_CLEAN)
    if show_files:
        _show_files(paths or (Path("."),), discovery)
        sys.exit(EXIT_CLEAN)
    checker = Checker(settings.selection.rules, unused_noqa=True,  # always (cached alike); shown when selected
                      budget=settings.file_budget)
    _started()
    out = Output(output_file, quiet=quiet, silent=silent)
    output_format = output_format or ("full" if output_file is None and sys.stdout.isatty() else "concise")
    display = RenderOptions(explain=explain, color=_use_color(color) and (output_file is None or color == "always"),
                            unsafe_fixes=unsafe_fixes)

    def shown(found):
        return [f for f in found if settings.reports(f)]

    printer = Printer(_FORMATS[output_format], output_format, rules, display, out)
    # concise and full are printed file by file while the run goes on, unless something needs every finding first
    stream = output_format in HUMAN and output_file is None and paths != (STDIN,) and not (
        fix or diff or statistics or probe or add_noqa)
    if paths == (STDIN,):
        result = _check_stdin(checker, shown, stdin_filename or "-", fix=fix, diff=diff, unsafe=unsafe_fixes)
    else:
        cache = None if no_cache else _cache(settings)

        bar = _progress(output_format, quiet or silent)
        counted = 0

        def advance(done: int, total: int, found) -> None:
            nonlocal counted
            counted += len(shown(found))
            bar.update(done, total, counted)

        def print_file(path: str, found) -> None:
            if bar is not None:
                bar.clear()  # the report's line starts at the left margin; the next update redraws the bar
            printer.findings(shown(found))

        def run(on_file=None):
            nonlocal counted
            counted = 0
            try:
                return checker.check_paths(paths or (Path("."),), cache=cache, jobs=settings.jobs, on_file=on_file,
                                           progress=advance if bar is not None else None, **discovery)
            finally:
                if bar is not None:
                    bar.clear()

        result = run(print_file if stream else None)
    within = project_roots(paths or (Path("."),), settings.config.root)  # what --fix and --add-noqa may write
    if add_noqa:  # not on the engine's own findings (a file that cannot be read or parsed, an unused directive)
        added, failures = noqa.add_to_files([f for f in shown(result.findings) if f.code not in ENGINE_CODES
                                             or f.code == INTERNAL_ERROR], lambda text: click.echo(text, err=True),
                                            within)
        out.status(f"Added {summary.plural(added, 'noqa directive')}.")
        sys.exit(EXIT_ERROR if failures else EXIT_CLEAN)
    before = shown(result.findings)
    if diff or fix:
        outcome = _fix_files(checker, before, shown, unsafe=unsafe_fixes, write=not diff, out=out, within=within)
        if diff:
            out.close()
            out.status(summary.would_fix(outcome.applied, before, unsafe_fixes))
            sys.exit(EXIT_ERROR if outcome.failures else EXIT_FINDINGS if outcome.applied and not exit_zero
                     else EXIT_CLEAN)
        if outcome.applied:
            result = run()
    findings = shown(result.findings)
    if probe:
        findings = _probe(findings, rules, settings.probe_limits)
    line = summary.found(len(findings), result.files_checked, [f for f in result.findings if settings.hidden(f)],
                         settings.threshold)
    line += f" {summary.fixed(outcome.applied, findings, unsafe_fixes)}" if fix else (
        f" {summary.fixable(findings, unsafe_fixes)}".rstrip())
    if probe:
        line += f" {summary.probe_counts(findings)}"
    if statistics:
        printer.statistics(findings)
    elif not stream:
        printer.findings(findings)
    if show_fixes:
        out.summary(summary.fixes_by_file(summary.fixed_codes(before, findings, unsafe_fixes),
                                          {f.code: f.name for f in before}))
    if output_format in HUMAN:
        out.summary(line)
    out.close()
    if verbose:
        click.echo(f"mhalint: {summary.plural(result.files_checked, 'file')} checked in "
                   f"{time.perf_counter() - started:.2f} s", err=True)
    if show_traceback:
        for text in result.tracebacks:
            click.echo(text, err=True)
    if result.internal_errors or (fix and outcome.failures):
        sys.exit(EXIT_ERROR)
    if exit_zero:
        sys.exit(EXIT_CLEAN)
    sys.exit(EXIT_FINDINGS if findings or (exit_non_zero_on_fix and fix and outcome.applied) else EXIT_CLEAN)


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
    from mhalint.cli import summary
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


@main.command()
def clean() -> None:
    """Remove the findings cache (.mhalint_cache in the project, or MHALINT_CACHE_DIR)."""
    from mhalint.cli import summary
    from mhalint.configuration import config
    from mhalint.run.cache import cache_dir
    from mhalint.run.cache import clean as clean_cache

    found = config.find(Path.cwd())
    directory, follow = cache_dir(found.parent if found else Path.cwd())
    removed = clean_cache(directory, follow=follow)
    shown = printable(str(directory))
    click.echo(f"Removed {shown} ({summary.plural(removed, 'file')})." if removed else f"No cache at {shown}.")


@main.command(name="probe")
@click.argument("source", default="-", type=click.File("r"))
@click.option("--output-format", type=click.Choice(sorted(_FORMATS)), default=None, help=_FORMAT_HELP)
@_display_options
@_probe_options
def probe_command(source, output_format: str, explain: bool, color: str, probe_timeout: float,
                  probe_total_timeout: float, probe_memory: int) -> None:
    """Run the probe on findings saved with `check --output-format json`, `json-lines` or `sarif` (SOURCE: a file,
    or - for stdin)."""
    from mhalint.cli import summary
    from mhalint.report import RenderOptions
    from mhalint.report.load import load
    from mhalint.report.printer import HUMAN, Printer
    from mhalint.rule import load_rules

    try:
        findings = load(source.read())
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, RecursionError) as error:
        raise UsageError(f"{source.name} is not a JSON list of mhalint findings, nor json-lines or SARIF output "
                         f"of mhalint ({type(error).__name__}: {error})")
    limits = ProbeLimits(probe_timeout or ProbeLimits.site_timeout, probe_total_timeout or ProbeLimits.total_timeout,
                         probe_memory or ProbeLimits.memory_mb)
    rules = load_rules()
    findings = _probe(findings, rules, limits)
    output_format = output_format or ("full" if sys.stdout.isatty() else "concise")
    out = Output()
    Printer(_FORMATS[output_format], output_format, rules, RenderOptions(explain=explain, color=_use_color(color)),
            out).findings(findings)
    if output_format in HUMAN:
        out.summary(f"Probed {summary.plural(len(findings), 'finding')}. {summary.probe_counts(findings)}")
    sys.exit(EXIT_FINDINGS if findings else EXIT_CLEAN)


@dataclass
class _FixOutcome:
    applied: int = 0
    failures: int = 0


def _fix_files(checker: Checker, findings, shown, *, unsafe: bool, write: bool, out: Output,
               within: Sequence[Path]) -> _FixOutcome:
    """Fix (or, when not writing, print the diff of) every file with an applicable fix, a notebook's cells too, in
    files whose real path is `within` the project. A file that cannot be fixed gets a one-line message, and the
    others are still fixed."""
    from mhalint.fixes import FixError, SourceFile, applicable, fix_source
    from mhalint.parse import notebook
    from mhalint.parse.lazy import cst

    outcome = _FixOutcome()
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


def _cache(settings):
    """The run's cache; only a run that keeps one loads its module (hashlib)."""
    from mhalint.run.cache import Cache, cache_dir

    directory, follow = cache_dir(settings.config.root)
    return Cache(directory, settings.selection.rules, follow=follow)


def _probe(findings, rules, limits: ProbeLimits):
    from mhalint.probe.runner import ProbeUnavailable, probe_findings

    try:
        return probe_findings(findings, rules, limits)
    except ProbeUnavailable as error:
        raise UsageError(str(error))


@main.command()
def server() -> None:
    """Run the language server on standard input and output, for an editor (needs the `server` extra)."""
    try:
        from mhalint.server.app import serve
    except ImportError as error:
        if error.name not in ("pygls", "lsprotocol") and not str(error.name).startswith(("pygls.", "lsprotocol.")):
            raise
        raise UsageError("the server needs pygls and lsprotocol, which are not installed: "
                         "pip install 'mhalint[server]' (in a clone: pip install -e '.[server]')") from None
    serve()


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True, help="json: machine-readable; markdown (with --all): the README's rules table.")
def rule(code: str | None, show_all: bool, output_format: str) -> None:
    """Explain rule CODE (a code such as MHA001, or a name such as batch-first-default), or list all rules with
    --all."""
    import json

    from mhalint.cli import ruledocs
    from mhalint.rule import load_rules

    rules = load_rules()
    out = Output()
    if show_all or code is None:
        if output_format == "json":
            out.report(json.dumps([ruledocs.as_dict(r) for r in rules.values()], indent=2))
        elif output_format == "markdown":
            out.report(ruledocs.markdown_table(rules))
        else:
            for rule_class in rules.values():
                out.report(f"{rule_class.code}  {rule_class.name:<28} {rule_class.summary}")
        return
    found = ruledocs.lookup(rules, code)
    if found is None:
        raise UsageError(f"unknown rule code {code!r}; `mhalint rule --all` lists them")
    if isinstance(found, str):  # one of the engine's codes
        out.report(json.dumps(ruledocs.engine_dict(found), indent=2) if output_format == "json"
                   else ruledocs.engine_text(found))
        return
    out.report(json.dumps(ruledocs.as_dict(found), indent=2) if output_format == "json" else ruledocs.text(found))


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip().upper() for value in values for part in value.split(",") if part.strip()]
