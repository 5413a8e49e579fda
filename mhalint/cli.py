"""The `mhalint` command line: thin click commands that parse options, call the engine and print.

Exit codes follow ruff and flake8: 0 clean, 1 findings, 2 usage or internal error.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mhalint import __version__
from mhalint.finding import PROBE_STATUSES, SAFE, Finding, Severity
from mhalint.probe.runner import ProbeLimits, ProbeUnavailable, probe_findings

if TYPE_CHECKING:
    from mhalint.engine import Checker

# Everything that imports libcst (the engine, the rules, the formats that need rule metadata) is imported inside the
# commands, so that `mhalint --version` and `mhalint --help` start in a few milliseconds.

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """A mistake in how mhalint was called: reported in one line, exit code 2."""


class _Group(click.Group):
    """Turns usage and plugin errors into a one-line message and exit 2 instead of a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except Exception as error:
            from mhalint.config import ConfigError
            from mhalint.rule import PluginError
            from mhalint.selection import SelectionError

            if not isinstance(error, (UsageError, PluginError, SelectionError, ConfigError)):
                raise
            click.echo(f"mhalint: error: {error}", err=True)
            ctx.exit(EXIT_ERROR)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mhalint")
def main() -> None:
    """mhalint: find the PyTorch attention mistakes that corrupt results without raising an error."""


def _probe_options(command):
    """The probe's limits, shared by `check --probe` and `probe` (None: from the configuration, else defaults)."""
    command = click.option("--probe-timeout", type=click.FloatRange(min=0.1), default=None,
                           help=f"Seconds one site's experiment may take [default: {ProbeLimits.site_timeout:g}].")(
        command)
    command = click.option("--probe-total-timeout", type=click.FloatRange(min=1), default=None,
                           help="Seconds the whole probe run may take, torch import included "
                                f"[default: {ProbeLimits.total_timeout:g}].")(command)
    return click.option("--probe-memory", type=click.IntRange(min=256), default=None, metavar="MB",
                        help=f"Memory cap of the probe process [default: {ProbeLimits.memory_mb}].")(command)


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
              help="Read settings from this pyproject.toml instead of the nearest one.")
@click.option("--select", multiple=True, metavar="CODES",
              help="Comma-separated rule codes or prefixes to enable (default: all rules).")
@click.option("--extend-select", multiple=True, metavar="CODES", help="Codes or prefixes to enable on top of select.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Comma-separated rule codes or prefixes to disable.")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None,
              help="Skip files that .gitignore excludes [default: respect].")
@click.option("--exclude", multiple=True, metavar="PATTERN",
              help="gitignore-style patterns of paths to skip, replacing the default list (venvs, caches, ...).")
@click.option("--extend-exclude", multiple=True, metavar="PATTERN", help="Patterns to skip on top of exclude.")
@click.option("--min-severity", type=click.Choice([str(s) for s in Severity]), default=None,
              help="Hide findings below this severity [default: warning].")
@click.option("--output-format", type=click.Choice(sorted(_FORMATS)), default=None, help=_FORMAT_HELP)
@click.option("--stdin-filename", metavar="PATH", help="The name to report for source read from `-`.")
@_display_options
@click.option("--fix", is_flag=True, help="Apply safe fixes in place (atomic writes).")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, also apply fixes that change behaviour.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff and write nothing.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (errors still exit 2).")
@click.option("--no-cache", is_flag=True, help="Check every file again (the cache lives in .mhalint_cache, or "
                                               "MHALINT_CACHE_DIR).")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Processes to parse files in [default: the number of CPUs].")
@click.option("--probe", is_flag=True, help="Confirm each finding by re-creating it with torch (needs torch).")
@_probe_options
@click.option("--show-traceback", is_flag=True, help="Print the traceback of any internal error.")
def check(paths: tuple[Path, ...], config_path: Path | None, select, extend_select, ignore, respect_gitignore,
          exclude, extend_exclude, min_severity, output_format: str, stdin_filename: str | None, fix: bool,
          explain: bool, color: str, unsafe_fixes: bool, diff: bool, exit_zero: bool, no_cache: bool,
          jobs: int | None, probe: bool, probe_timeout, probe_total_timeout, probe_memory,
          show_traceback: bool) -> None:
    """Check PATHS (files or directories; default: the current directory; - reads standard input)."""
    from mhalint.cache import Cache, cache_dir
    from mhalint.engine import Checker
    from mhalint.report import RenderOptions
    from mhalint.rule import load_rules
    from mhalint.settings import resolve as resolve_settings

    missing = [str(path) for path in paths if path != STDIN and not os.path.lexists(path)]
    if missing:
        raise UsageError(f"path {missing[0]!r} does not exist")
    rules = load_rules()
    settings = resolve_settings(
        rules, list(paths), config_path=config_path, select=_split(select) if select else None,
        extend_select=_split(extend_select), ignore=_split(ignore) if ignore else None,
        exclude=list(exclude) if exclude else None, extend_exclude=list(extend_exclude),
        respect_gitignore=respect_gitignore, min_severity=min_severity, probe_timeout=probe_timeout,
        probe_total_timeout=probe_total_timeout, probe_memory=probe_memory)
    checker = Checker(settings.selection.rules)
    display = RenderOptions(explain=explain, color=_use_color(color))

    def shown(found):
        return [f for f in found if settings.reports(f)]

    if paths == (STDIN,):
        _check_stdin(checker, shown, stdin_filename or "-", fix=fix, diff=diff, unsafe=unsafe_fixes,
                     output_format=output_format, rules=rules, display=display)
        return

    cache = None if no_cache else Cache(cache_dir(settings.config.root), settings.selection.rules)

    def run():
        return checker.check_paths(paths or (Path("."),), cache=cache, jobs=jobs,
                                   respect_gitignore=settings.respect_gitignore, exclude=settings.exclude,
                                   default_exclude=settings.default_exclude, anchors=[settings.config.root])

    result = run()
    if diff or fix:
        outcome = _fix_files(checker, shown(result.findings), shown, unsafe=unsafe_fixes, write=not diff)
        if diff:
            sys.exit(EXIT_ERROR if outcome.failures else EXIT_FINDINGS if outcome.applied else EXIT_CLEAN)
        if outcome.applied:
            result = run()
    findings = shown(result.findings)
    if probe:
        findings = _probe(findings, rules, settings.probe_limits)
    summary = _summary(len(findings), result.files_checked, hidden=sum(map(settings.hidden, result.findings)),
                       threshold=settings.threshold)
    fixable = sum(1 for f in findings if f.fix is not None and f.fix.applicability == SAFE)
    if fix:
        summary += f" Fixed {outcome.applied} finding{'s' if outcome.applied != 1 else ''}."
    elif fixable:
        summary += f" {fixable} fixable with --fix."
    if probe:
        summary += f" {_probe_counts(findings)}"
    _print(findings, output_format, summary, rules, display)
    if show_traceback:
        for text in result.tracebacks:
            click.echo(text, err=True)
    if result.internal_errors or (fix and outcome.failures):
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if findings and not exit_zero else EXIT_CLEAN)


def _check_stdin(checker: Checker, shown, filename: str, *, fix: bool, diff: bool, unsafe: bool,
                 output_format: str | None, rules, display) -> None:
    """Lint standard input; with --fix print the fixed source (findings go to stderr), as ruff does."""
    from mhalint.fixes import FixError, fix_source
    from mhalint.report import concise
    from mhalint.source import decode

    raw = sys.stdin.buffer.read()  # bytes: the file's own encoding decides, as for a file on disk
    findings = shown(checker.check_source(raw, filename))
    if fix or diff:
        try:
            text, encoding = decode(raw)
            fixed, applied = fix_source(text, lambda t: shown(checker.check_source(t.encode(encoding), filename)),
                                        unsafe)
        except (FixError, SyntaxError, UnicodeError) as error:
            raise UsageError(f"cannot fix {filename}: {error}")
        if diff:
            click.echo("".join(difflib.unified_diff(text.splitlines(True), fixed.splitlines(True), filename,
                                                    filename)), nl=False)
            sys.exit(EXIT_FINDINGS if applied else EXIT_CLEAN)
        sys.stdout.flush()
        sys.stdout.buffer.write(fixed.encode(encoding))
        sys.stdout.buffer.flush()
        findings = shown(checker.check_source(fixed.encode(encoding), filename))
        if findings:
            click.echo(concise.render(findings), err=True)
        sys.exit(EXIT_FINDINGS if findings else EXIT_CLEAN)
    _print(findings, output_format, _summary(len(findings), 1, hidden=0, threshold=Severity.INFO), rules, display)
    sys.exit(EXIT_FINDINGS if findings else EXIT_CLEAN)


@main.command()
def clean() -> None:
    """Remove the findings cache (.mhalint_cache in the project, or MHALINT_CACHE_DIR)."""
    from mhalint import config
    from mhalint.cache import cache_dir
    from mhalint.cache import clean as clean_cache

    found = config.find(Path.cwd())
    directory = cache_dir(found.parent if found else Path.cwd())
    removed = clean_cache(directory)
    click.echo(f"Removed {directory} ({removed} file{'s' if removed != 1 else ''})." if removed
               else f"No cache at {directory}.")


@main.command(name="probe")
@click.argument("source", default="-", type=click.File("r"))
@click.option("--output-format", type=click.Choice(sorted(_FORMATS)), default=None, help=_FORMAT_HELP)
@_display_options
@_probe_options
def probe_command(source, output_format: str, explain: bool, color: str, probe_timeout: float,
                  probe_total_timeout: float, probe_memory: int) -> None:
    """Run the probe on findings saved with `check --output-format json` (SOURCE: a file, or - for stdin)."""
    from mhalint.report import RenderOptions
    from mhalint.rule import load_rules

    try:
        data = json.load(source)
        items = data["findings"] if isinstance(data, dict) else data
        findings = [Finding.from_dict(item) for item in items]
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as error:
        raise UsageError(f"{source.name} is not a JSON list of mhalint findings ({type(error).__name__}: {error})")
    limits = ProbeLimits(probe_timeout or ProbeLimits.site_timeout, probe_total_timeout or ProbeLimits.total_timeout,
                         probe_memory or ProbeLimits.memory_mb)
    rules = load_rules()
    findings = _probe(findings, rules, limits)
    _print(findings, output_format, f"Probed {len(findings)} finding{'s' if len(findings) != 1 else ''}. "
           f"{_probe_counts(findings)}", rules, RenderOptions(explain=explain, color=_use_color(color)))
    sys.exit(EXIT_FINDINGS if findings else EXIT_CLEAN)


@dataclass
class _FixOutcome:
    applied: int = 0
    failures: int = 0


def _fix_files(checker: Checker, findings, shown, *, unsafe: bool, write: bool) -> _FixOutcome:
    """Fix (or, when not writing, print the diff of) every file with an applicable fix."""
    import libcst as cst

    from mhalint.fixes import FixError, SourceFile, applicable, fix_source

    outcome = _FixOutcome()
    for path in sorted({f.path for f in findings if applicable(f, unsafe)}):
        try:
            source = SourceFile.read(Path(path))
            new_text, applied = fix_source(
                source.text, lambda text: shown(checker.check_source(text.encode(source.encoding), path)), unsafe)
            if applied and write:
                source.write(new_text)
            elif applied:
                click.echo(source.diff(new_text), nl=False)
            outcome.applied += applied
        except (FixError, OSError, UnicodeError, LookupError, cst.ParserSyntaxError) as error:
            outcome.failures += 1
            click.echo(f"mhalint: error: cannot fix {path}: {getattr(error, 'strerror', None) or error}", err=True)
    return outcome


def _probe(findings, rules, limits: ProbeLimits):
    try:
        return probe_findings(findings, rules, limits)
    except ProbeUnavailable as error:
        raise UsageError(str(error))


def _probe_counts(findings) -> str:
    """`Probe: 2 confirmed, 1 reproduced, 0 not confirmed, 1 skipped.` over the findings that were probed."""
    probed = [f.probe.status for f in findings if f.probe is not None]
    return "Probe: " + ", ".join(f"{probed.count(status)} {status}" for status in PROBE_STATUSES) + "."


def _print(findings, output_format: str | None, summary: str, rules, display) -> None:
    """Findings in the chosen format; the summary line only for the human formats."""
    output_format = output_format or ("full" if sys.stdout.isatty() else "concise")
    text = importlib.import_module(_FORMATS[output_format]).render(findings, rules, display)
    if text:
        click.echo(text.rstrip("\n"), color=display.color)
    if output_format in ("concise", "full"):
        click.echo(summary)


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json", "markdown"]), default="text",
              show_default=True, help="json: machine-readable; markdown (with --all): the README's rules table.")
def rule(code: str | None, show_all: bool, output_format: str) -> None:
    """Explain rule CODE, or list all rules with --all."""
    from mhalint import ruledocs
    from mhalint.engine import ENGINE_CODES
    from mhalint.rule import load_rules

    rules = load_rules()
    if show_all or code is None:
        if output_format == "json":
            click.echo(json.dumps([ruledocs.as_dict(r) for r in rules.values()], indent=2))
        elif output_format == "markdown":
            click.echo(ruledocs.markdown_table(rules))
        else:
            for rule_class in rules.values():
                click.echo(f"{rule_class.code}  {rule_class.name:<28} {rule_class.summary}")
        return
    rule_class = rules.get(code.upper())
    if rule_class is None and code.upper() in ENGINE_CODES:
        click.echo(json.dumps(ruledocs.engine_dict(code.upper()), indent=2) if output_format == "json"
                   else ruledocs.engine_text(code.upper()))
        return
    if rule_class is None:
        raise UsageError(f"unknown rule code {code!r}; `mhalint rule --all` lists them")
    click.echo(json.dumps(ruledocs.as_dict(rule_class), indent=2) if output_format == "json"
               else ruledocs.text(rule_class))


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip().upper() for value in values for part in value.split(",") if part.strip()]


def _summary(count: int, files: int, hidden: int, threshold: Severity) -> str:
    checked = f"{files} file{'s' if files != 1 else ''} checked"
    if hidden:
        checked += f"; {hidden} below {threshold} hidden, --min-severity info shows them"
    if count == 0:
        return f"All checks passed! ({checked})"
    return f"Found {count} finding{'s' if count != 1 else ''} ({checked})."
