"""The `mhalint` command line: thin click commands that parse options, call the engine and print.

Exit codes follow ruff and flake8: 0 clean, 1 findings, 2 usage or internal error.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import libcst as cst

from mhalint import __version__
from mhalint.engine import ENGINE_CODES, Checker
from mhalint.finding import Finding, Severity
from mhalint.fixes import FixError, SourceFile, applicable, fix_source
from mhalint.probe.runner import ProbeLimits, ProbeUnavailable, probe_findings
from mhalint.report import concise
from mhalint.report import json as json_report
from mhalint.rule import PluginError, Rule, load_rules
from mhalint.selection import Selection, SelectionError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """A mistake in how mhalint was called: reported in one line, exit code 2."""


class _Group(click.Group):
    """Turns usage and plugin errors into a one-line message and exit 2 instead of a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (UsageError, PluginError, SelectionError) as error:
            click.echo(f"mhalint: error: {error}", err=True)
            ctx.exit(EXIT_ERROR)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mhalint")
def main() -> None:
    """mhalint: find the PyTorch attention mistakes that corrupt results without raising an error."""


def _probe_options(command):
    """The probe's limits, shared by `check --probe` and `probe`."""
    command = click.option("--probe-timeout", type=click.FloatRange(min=0.1), default=ProbeLimits.site_timeout,
                           show_default=True, help="Seconds one site's experiment may take.")(command)
    command = click.option("--probe-total-timeout", type=click.FloatRange(min=1), default=ProbeLimits.total_timeout,
                           show_default=True, help="Seconds the whole probe run may take (torch import included).")(command)
    return click.option("--probe-memory", type=click.IntRange(min=256), default=ProbeLimits.memory_mb,
                        show_default=True, metavar="MB", help="Memory cap of the probe process.")(command)


_FORMATS = {"concise": concise, "json": json_report}


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--select", multiple=True, metavar="CODES",
              help="Comma-separated rule codes or prefixes to enable (default: all rules).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Comma-separated rule codes or prefixes to disable.")
@click.option("--respect-gitignore/--no-respect-gitignore", default=True, show_default=True,
              help="Skip files that .gitignore excludes.")
@click.option("--exclude", multiple=True, metavar="PATTERN", help="gitignore-style pattern of paths to skip.")
@click.option("--min-severity", type=click.Choice([str(s) for s in Severity]), default="warning",
              show_default=True, help="Hide findings below this severity (info: correct code relying on a default).")
@click.option("--output-format", type=click.Choice(sorted(_FORMATS)), default="concise", show_default=True)
@click.option("--fix", is_flag=True, help="Apply safe fixes in place (atomic writes).")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, also apply fixes that change behaviour.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff and write nothing.")
@click.option("--probe", is_flag=True, help="Confirm each finding by re-creating it with torch (needs torch).")
@_probe_options
@click.option("--show-traceback", is_flag=True, help="Print the traceback of any internal error.")
def check(paths: tuple[Path, ...], select: tuple[str, ...], ignore: tuple[str, ...], respect_gitignore: bool,
          exclude: tuple[str, ...], min_severity: str, output_format: str, fix: bool, unsafe_fixes: bool,
          diff: bool, probe: bool, probe_timeout: float, probe_total_timeout: float, probe_memory: int,
          show_traceback: bool) -> None:
    """Check PATHS (files or directories; default: the current directory)."""
    missing = [str(path) for path in paths if not os.path.lexists(path)]
    if missing:
        raise UsageError(f"path {missing[0]!r} does not exist")
    rules = load_rules()
    selection = Selection(rules, _split(select), _split(ignore), engine_codes=ENGINE_CODES)
    checker = Checker(selection.rules)
    threshold = Severity.parse(min_severity)

    def shown(found):
        return [f for f in found if selection.reports(f.code) and f.severity >= threshold]

    def run():
        return checker.check_paths(paths or (Path("."),), respect_gitignore=respect_gitignore, exclude=exclude)

    result = run()
    if diff or fix:
        outcome = _fix_files(checker, shown(result.findings), shown, unsafe=unsafe_fixes, write=not diff)
        if diff:
            sys.exit(EXIT_ERROR if outcome.failures else EXIT_FINDINGS if outcome.applied else EXIT_CLEAN)
        if outcome.applied:
            result = run()
    reported = [f for f in result.findings if selection.reports(f.code)]
    findings = [f for f in reported if f.severity >= threshold]
    if probe:
        findings = _probe(findings, rules, ProbeLimits(probe_timeout, probe_total_timeout, probe_memory))
    summary = _summary(len(findings), result.files_checked, hidden=len(reported) - len(findings),
                       threshold=threshold)
    fixable = sum(1 for f in findings if applicable(f, unsafe=False))
    if fix:
        summary += f" Fixed {outcome.applied} finding{'s' if outcome.applied != 1 else ''}."
    elif fixable:
        summary += f" {fixable} fixable with --fix."
    _print(findings, output_format, summary)
    if show_traceback:
        for text in result.tracebacks:
            click.echo(text, err=True)
    if result.internal_errors or (fix and outcome.failures):
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_FINDINGS if findings else EXIT_CLEAN)


@main.command(name="probe")
@click.argument("source", default="-", type=click.File("r"))
@click.option("--output-format", type=click.Choice(sorted(_FORMATS)), default="concise", show_default=True)
@_probe_options
def probe_command(source, output_format: str, probe_timeout: float, probe_total_timeout: float,
                  probe_memory: int) -> None:
    """Run the probe on findings saved with `check --output-format json` (SOURCE: a file, or - for stdin)."""
    try:
        data = json.load(source)
        items = data["findings"] if isinstance(data, dict) else data
        findings = [Finding.from_dict(item) for item in items]
    except (ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{source.name} is not a JSON list of mhalint findings ({type(error).__name__}: {error})")
    findings = _probe(findings, load_rules(), ProbeLimits(probe_timeout, probe_total_timeout, probe_memory))
    _print(findings, output_format, f"Probed {len(findings)} finding{'s' if len(findings) != 1 else ''}.")
    sys.exit(EXIT_FINDINGS if findings else EXIT_CLEAN)


@dataclass
class _FixOutcome:
    applied: int = 0
    failures: int = 0


def _fix_files(checker: Checker, findings, shown, *, unsafe: bool, write: bool) -> _FixOutcome:
    """Fix (or, when not writing, print the diff of) every file with an applicable fix."""
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


def _print(findings, output_format: str, summary: str) -> None:
    text = _FORMATS[output_format].render(findings)
    if text:
        click.echo(text)
    if output_format == "concise":
        click.echo(summary)


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
def rule(code: str | None, show_all: bool) -> None:
    """Explain rule CODE, or list all rules with --all."""
    rules = load_rules()
    if show_all or code is None:
        for rule_class in rules.values():
            click.echo(f"{rule_class.code}  {rule_class.name:<28} {rule_class.summary}")
        return
    rule_class = rules.get(code.upper())
    if rule_class is None:
        raise UsageError(f"unknown rule code {code!r}; `mhalint rule --all` lists them")
    click.echo(_rule_text(rule_class))


def _rule_text(rule_class: type[Rule]) -> str:
    return f"# {rule_class.name} ({rule_class.code})\n\n{rule_class.documentation()}"


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip().upper() for value in values for part in value.split(",") if part.strip()]


def _summary(count: int, files: int, hidden: int, threshold: Severity) -> str:
    checked = f"{files} file{'s' if files != 1 else ''} checked"
    if hidden:
        checked += f"; {hidden} below {threshold} hidden, --min-severity info shows them"
    if count == 0:
        return f"All checks passed! ({checked})"
    return f"Found {count} finding{'s' if count != 1 else ''} ({checked})."
