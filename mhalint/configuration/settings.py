"""The settings of one run: command-line options over the configuration file over mhalint's defaults, and where
each value came from (`--show-settings`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from mhalint.cli.summary import plural
from mhalint.configuration import config, schema
from mhalint.configuration.discovery import DEFAULT_EXCLUDE
from mhalint.configuration.selection import Selection
from mhalint.finding import Finding, Severity
from mhalint.probe.limits import ProbeLimits
from mhalint.rule import Rule
from mhalint.run.budget import FileBudget
from mhalint.run.diagnostics import ENGINE_CODES
from mhalint.run.noqa import UNUSED_NOQA


@dataclass(frozen=True)
class Settings:
    config: config.Config
    selection: Selection
    threshold: Severity
    respect_gitignore: bool
    exclude: tuple[str, ...]
    default_exclude: frozenset[str]
    probe_limits: ProbeLimits
    force_exclude: bool = False
    file_budget: FileBudget = FileBudget()  # the time and memory one file's check may take (MHA903 past it)
    jobs: int = 1  # worker processes at most: --jobs clamped to the usable CPUs (the engine clamps to the files)
    # (key, value, where it came from) of each setting, in the configuration file's spelling, for --show-settings
    origins: tuple[tuple[str, object, str], ...] = ()
    fixes: Selection | None = None  # the codes whose fixes are offered (`fixable` less `unfixable`); None: all

    def show(self) -> str:
        """The resolved settings as TOML lines, each with where its value came from in a comment."""
        lines = [f"# settings from {self.config.source}"]
        width = max((len(key) for key, _, _ in self.origins), default=0)
        for key, value, origin in self.origins:
            lines.append(f"{key:<{width}} = {_toml(value)}  # {origin}")
        enabled = [rule.code for rule in self.selection.rules] + [UNUSED_NOQA] * self.selection.reports(UNUSED_NOQA)
        lines.append(f"# enabled rules: {', '.join(enabled) or 'none'}")
        return "\n".join(lines)

    def reports(self, finding: Finding) -> bool:
        """Selected, not ignored for its file, and at or above the minimum severity."""
        return (finding.severity >= self.threshold
                and self.selection.reports(finding.code, self.config.ignored_in(finding.path)))

    def offered(self, finding: Finding) -> Finding:
        """The finding as reported: without its fix when its code is not `fixable` (or is `unfixable`), so that
        --fix leaves it, no `[*]` marks it and no summary counts it, as ruff does."""
        if finding.fix is None or self.fixes is None or self.fixes.reports(finding.code):
            return finding
        return replace(finding, fix=None)

    def hidden(self, finding: Finding) -> bool:
        """Reported but for its severity: counted in the summary so users know --min-severity info shows it."""
        return finding.severity < self.threshold and self.selection.reports(
            finding.code, self.config.ignored_in(finding.path))


def resolve(rules: Mapping[str, type[Rule]], paths: Sequence[Path], *, config_path: Path | None,
            select: list[str] | None, extend_select: list[str], ignore: list[str] | None,
            exclude: list[str] | None, extend_exclude: list[str], respect_gitignore: bool | None,
            min_severity: str | None, probe_timeout: float | None, probe_total_timeout: float | None,
            probe_memory: int | None, force_exclude: bool | None = None, isolated: bool = False,
            jobs: int | None = None, overrides: Mapping[str, object] | None = None,
            per_file_ignores: Mapping[str, list[str]] | None = None) -> Settings:
    """Merge the command line (None: not given) with the configuration file found for `paths` (none when
    `isolated`), and on it the `overrides` of --config KEY=VALUE and --per-file-ignores' table."""
    found = None if isolated else config_path or config.find(paths[0] if paths else Path.cwd())
    if per_file_ignores:
        overrides = {**(overrides or {}), "per-file-ignores": dict(per_file_ignores)}
    settings = config.load(found, overrides)
    where = f"in {settings.path}" if settings.path else ""
    origins = {"select": "--select" if select is not None else f"`select` {where}",
               "ignore": "--ignore" if ignore is not None else f"`ignore` {where}",
               "extend-select": f"--extend-select or `extend-select` {where}"}
    # As in ruff, the command line is a layer over the file: a --select there starts afresh, so the file's
    # ignore no longer applies (a --ignore on the command line still does).
    file_ignore = list(settings.ignore) if select is None else []
    selection = Selection(rules, select if select is not None else list(settings.select or []),
                          ignore if ignore is not None else file_ignore, engine_codes=ENGINE_CODES,
                          extend_select=[*settings.extend_select, *extend_select], origins=origins,
                          checks=[UNUSED_NOQA])
    for glob, codes in settings.per_file_ignores.items():
        selection.validate(codes, f"--per-file-ignores {glob!r}" if per_file_ignores else
                           f"`per-file-ignores` entry {glob!r} {where}".rstrip())
    unfixable = ["ALL"] if settings.fixable == () else list(settings.unfixable)  # `fixable = []`: none
    fixes = Selection(rules, list(settings.fixable or []), unfixable, engine_codes=ENGINE_CODES,
                      origins={"select": f"`fixable` {where}", "ignore": f"`unfixable` {where}"},
                      checks=[UNUSED_NOQA]) if settings.fixable is not None or settings.unfixable else None
    patterns = exclude if exclude is not None else settings.exclude
    probe = settings.probe
    cpus = schema.usable_cpus()
    resolved = Settings(
        config=settings,
        selection=selection,
        threshold=Severity.parse(min_severity or settings.min_severity),
        respect_gitignore=settings.respect_gitignore if respect_gitignore is None else respect_gitignore,
        exclude=(*(patterns or ()), *settings.extend_exclude, *extend_exclude),
        default_exclude=frozenset() if patterns is not None else DEFAULT_EXCLUDE,
        probe_limits=ProbeLimits(
            probe_timeout or probe.get("timeout", ProbeLimits.site_timeout),
            probe_total_timeout or probe.get("total-timeout", ProbeLimits.total_timeout),
            probe_memory or int(probe.get("memory", ProbeLimits.memory_mb))),
        force_exclude=settings.force_exclude if force_exclude is None else force_exclude,
        file_budget=FileBudget(settings.file_time_limit or FileBudget.seconds,
                               settings.file_memory_limit or FileBudget.megabytes),
        jobs=min(jobs or cpus, cpus), fixes=fixes)

    def origin(key: str, option: object, in_file: bool | None = None) -> str:
        """The command line when `option` was given there, else the file when it sets `key`, else the default."""
        in_file = key in settings.keys if in_file is None else in_file
        sources = [f"--{key}"] if option not in (None, [], ()) else []
        given = "--config" if ("probe" if key.startswith("probe") else key) in settings.overridden else settings.source
        sources += [given] if in_file and (not sources or key.startswith("extend-")) else []
        return " and ".join(sources) or "default"

    limits = resolved.probe_limits
    if select is not None and ignore is None and settings.ignore:
        ignore_origin = f"default (--select starts afresh: `ignore` in {settings.source} no longer applies)"
    else:
        ignore_origin = origin("ignore", ignore)
    return replace(resolved, origins=(
        ("select", select if select is not None else list(settings.select or ["ALL"]), origin("select", select)),
        ("extend-select", [*settings.extend_select, *extend_select], origin("extend-select", extend_select)),
        ("ignore", ignore if ignore is not None else file_ignore, ignore_origin),
        ("per-file-ignores", settings.per_file_ignores, origin("per-file-ignores", per_file_ignores)),
        ("exclude", list(patterns) if patterns is not None else sorted(DEFAULT_EXCLUDE), origin("exclude", exclude)),
        ("extend-exclude", [*settings.extend_exclude, *extend_exclude], origin("extend-exclude", extend_exclude)),
        ("respect-gitignore", resolved.respect_gitignore, origin("respect-gitignore", respect_gitignore)),
        ("force-exclude", resolved.force_exclude, origin("force-exclude", force_exclude)),
        ("min-severity", str(resolved.threshold), origin("min-severity", min_severity)),
        ("file-time-limit", resolved.file_budget.seconds, origin("file-time-limit", None)),
        ("file-memory-limit", resolved.file_budget.megabytes, origin("file-memory-limit", None)),
        ("probe.timeout", limits.site_timeout, origin("probe-timeout", probe_timeout, "timeout" in probe)),
        ("probe.total-timeout", limits.total_timeout,
         origin("probe-total-timeout", probe_total_timeout, "total-timeout" in probe)),
        ("probe.memory", limits.memory_mb, origin("probe-memory", probe_memory, "memory" in probe)),
        ("jobs", resolved.jobs, f"default: the {plural(cpus, 'CPU')} available" if jobs is None else
         f"--jobs {jobs}, clamped to the {plural(cpus, 'CPU')} available" if jobs > cpus else "--jobs"),
        *([("required-version", settings.required_version, settings.source)] if settings.required_version else []),
        *([("extend", settings.extend, settings.source)] if settings.extend else []),
        *([("cache-dir", settings.cache_dir, settings.source)] if settings.cache_dir else []),
        ("fixable", list(settings.fixable or ["ALL"]), origin("fixable", None)),
        ("unfixable", list(settings.unfixable), origin("unfixable", None)),
    ))


def _toml(value: object) -> str:
    """A value as TOML writes it (lists and strings as JSON does, which TOML reads the same)."""
    import json  # only --show-settings needs it
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(key)} = {_toml(list(item))}" for key, item in value.items()) + "}"
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value)
