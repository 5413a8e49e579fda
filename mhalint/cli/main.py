"""The `mhalint` command line: thin click commands that parse options, call the engine and print.

Exit codes follow ruff and flake8: 0 clean, 1 findings, 2 usage or internal error; 130 and 143 after an
interrupt (SIGINT, SIGTERM).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

import click

from mhalint import HOME, __version__
from mhalint.cli.output import Output, OutputError
from mhalint.configuration import schema
from mhalint.finding import Severity
from mhalint.names import printable
from mhalint.probe.limits import ProbeLimits
from mhalint.run import interrupts

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

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """`--add-noqa=REASON` (ruff's spelling) as `--add-noqa` and a reason: click gives an option either a value
        always or never, and `--add-noqa PATH` must stay a flag and a path."""
        if "--" in args:
            end = args.index("--")
            return super().parse_args(ctx, [*_split_noqa_reason(args[:end]), *args[end:]])
        return super().parse_args(ctx, _split_noqa_reason(args))

    def resolve_command(self, ctx: click.Context, args):
        name, command, rest = super().resolve_command(ctx, args)
        if name != "check":  # check says when its start-up is over: once its rules are loaded
            start_up_done()
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


_NOQA_REASON = "--add-noqa-reason"


def _split_noqa_reason(args: list[str]) -> list[str]:
    split: list[str] = []
    for arg in args:
        split += ["--add-noqa", _NOQA_REASON, arg[len("--add-noqa="):]] if arg.startswith("--add-noqa=") else [arg]
    return split


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
    is off until the command has loaded what it needs (`start_up_done`), what exists then is frozen out of its
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


def start_up_done() -> None:
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


def use_color(choice: str) -> bool:
    """--color, then the NO_COLOR and FORCE_COLOR conventions (no-color.org, force-color.org), then the terminal."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


FORMATS = {name: f"mhalint.report.{name.replace('-', '_')}" for name in (
    "concise", "full", "grouped", "json", "json-lines", "github", "sarif", "junit", "gitlab", "pylint", "rdjson",
    "azure")}
_FORMAT_HELP = "Default: full on a terminal, concise otherwise."
STDIN = Path("-")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--config", "config", multiple=True, metavar="FILE|KEY=VALUE",
              help="Read settings from this file instead of the nearest one (a pyproject.toml with [tool.mhalint], "
                   "or a .toml file with top-level keys); or, as KEY=VALUE in TOML (`min-severity = 'info'`), a "
                   "setting over the file's. May be given several times.")
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
@click.option("--output-format", type=click.Choice(sorted(FORMATS)), default=None, help=_FORMAT_HELP)
@click.option("--per-file-ignores", "per_file_ignores", multiple=True, metavar="PATTERN:CODES",
              help="Codes to ignore in the files a glob matches (`tests/*:MHA007,MHA012`), in place of the "
                   "configuration's per-file-ignores; may be given several times.")
@click.option("--watch", is_flag=True, help="Check again each time a file is saved, added or removed, until Ctrl-C.")
@click.option("--isolated", is_flag=True,
              help="Ignore every configuration file: the defaults and the command line only.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Keep the findings cache in DIR (default: MHALINT_CACHE_DIR, else .mhalint_cache in the project).")
@click.option("--ignore-noqa", is_flag=True, help="Report the findings `# noqa` comments would suppress, too.")
@click.option("--fix-only", is_flag=True, help="Apply the fixes, like --fix, without reporting the findings that "
                                               "remain; exit 0 unless an error (or --exit-non-zero-on-fix).")
@click.option("--parse-all", is_flag=True,
              help="Also parse the files whose code names no attention API (no rule can act on them) and report "
                   "their syntax errors, as ruff does; off by default, for speed.")
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
@click.option("--add-noqa", is_flag=True,
              help="Add `# noqa: CODE` to each line with a finding, keeping the directives already there; "
                   "--add-noqa=REASON writes REASON after the codes of each directive it adds.")
@click.option(_NOQA_REASON, hidden=True, default=None)  # what --add-noqa=REASON becomes (_Group.parse_args)
@click.option("-q", "--quiet", is_flag=True, help="Print the findings and nothing else.")
@click.option("-s", "--silent", is_flag=True, help="Print nothing; only the exit status tells.")
@click.option("-v", "--verbose", is_flag=True, help="Say on stderr which configuration was read, and how many files "
                                                    "were checked in what time.")
def check(**options) -> None:
    """Check PATHS (files or directories; default: the current directory; - reads standard input)."""
    from mhalint.cli.check import CheckRequest, run

    run(CheckRequest(**options))


@main.command()
def clean() -> None:
    """Remove the findings cache (.mhalint_cache in the project, its `cache-dir` setting, or MHALINT_CACHE_DIR)."""
    from mhalint.cli import summary
    from mhalint.configuration import config
    from mhalint.run.cache import cache_dir
    from mhalint.run.cache import clean as clean_cache

    found = config.find(Path.cwd())
    directory, follow = cache_dir(found.parent if found else Path.cwd(), None, config.load(found).cache_dir)
    removed = clean_cache(directory, follow=follow)
    shown = printable(str(directory))
    click.echo(f"Removed {shown} ({summary.plural(removed, 'file')})." if removed else f"No cache at {shown}.")


@main.command(name="probe")
@click.argument("source", default="-", type=click.File("r"))
@click.option("--output-format", type=click.Choice(sorted(FORMATS)), default=None, help=_FORMAT_HELP)
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
    findings = probe_findings(findings, rules, limits)
    output_format = output_format or ("full" if sys.stdout.isatty() else "concise")
    out = Output()
    Printer(FORMATS[output_format], output_format, rules, RenderOptions(explain=explain, color=use_color(color)),
            out).findings(findings)
    if output_format in HUMAN:
        out.summary(f"Probed {summary.plural(len(findings), 'finding')}. {summary.probe_counts(findings)}")
    sys.exit(EXIT_FINDINGS if findings else EXIT_CLEAN)


def probe_findings(findings, rules, limits: ProbeLimits):
    """The findings with what the probe found at each (`check --probe` and `probe`)."""
    from mhalint.probe.runner import ProbeUnavailable, probe_findings

    try:
        return probe_findings(findings, rules, limits)
    except ProbeUnavailable as error:
        raise UsageError(str(error))


@main.command()
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json: {\"version\": ..., \"home\": ...}.")
def version(output_format: str) -> None:
    """Print mhalint's version (a pre-commit `rev` is `v` and this version)."""
    if output_format == "json":
        import json

        click.echo(json.dumps({"version": __version__, "home": HOME}))
    else:
        click.echo(f"mhalint {__version__}")


@main.command()
def server() -> None:
    """Run the language server on standard input and output, for an editor (needs the `server` extra)."""
    try:
        from mhalint.server.app import serve
    except ImportError as error:
        if error.name not in ("pygls", "lsprotocol") and not str(error.name).startswith(("pygls.", "lsprotocol.")):
            raise
        raise UsageError("the server needs pygls and lsprotocol, which are not installed: in a clone of mhalint, "
                         "pip install -e '.[server]'; else pip install 'mhalint[server] @ git+" + HOME + "'") from None
    serve()


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "full", "json", "markdown"]), default="text",
              show_default=True, help="json: machine-readable, the whole documentation; full (with --all): every "
                                      "rule's documentation, as `ruff rule --all` prints it; markdown (with --all): "
                                      "the README's rules table.")
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
        elif output_format == "full":
            out.report("\n\n".join(ruledocs.text(rule_class) for rule_class in rules.values()))
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


def rule_codes(values: tuple[str, ...]) -> list[str]:
    return [part.strip().upper() for value in values for part in value.split(",") if part.strip()]
