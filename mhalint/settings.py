"""The settings of one run: command-line options over `[tool.mhalint]` over mhalint's defaults."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from mhalint import config
from mhalint.discovery import DEFAULT_EXCLUDE
from mhalint.engine import ENGINE_CODES
from mhalint.finding import Finding, Severity
from mhalint.probe.runner import ProbeLimits
from mhalint.rule import Rule
from mhalint.selection import Selection


@dataclass(frozen=True)
class Settings:
    config: config.Config
    selection: Selection
    threshold: Severity
    respect_gitignore: bool
    exclude: tuple[str, ...]
    default_exclude: frozenset[str]
    probe_limits: ProbeLimits

    def reports(self, finding: Finding) -> bool:
        """Selected, not ignored for its file, and at or above the minimum severity."""
        return (finding.severity >= self.threshold
                and self.selection.reports(finding.code, self.config.ignored_in(finding.path)))

    def hidden(self, finding: Finding) -> bool:
        """Reported but for its severity: counted in the summary so users know --min-severity info shows it."""
        return finding.severity < self.threshold and self.selection.reports(
            finding.code, self.config.ignored_in(finding.path))


def resolve(rules: Mapping[str, type[Rule]], paths: Sequence[Path], *, config_path: Path | None,
            select: list[str] | None, extend_select: list[str], ignore: list[str] | None,
            exclude: list[str] | None, extend_exclude: list[str], respect_gitignore: bool | None,
            min_severity: str | None, probe_timeout: float | None, probe_total_timeout: float | None,
            probe_memory: int | None) -> Settings:
    """Merge the command line (None: not given) with the configuration file found for `paths`."""
    found = config_path or config.find(paths[0] if paths else Path.cwd())
    settings = config.load(found)
    where = f"in {settings.path}" if settings.path else ""
    origins = {"select": "--select" if select is not None else f"`select` {where}",
               "ignore": "--ignore" if ignore is not None else f"`ignore` {where}",
               "extend-select": f"--extend-select or `extend-select` {where}"}
    # As in ruff, the command line is a layer over the file: a --select there starts afresh, so the file's
    # ignore no longer applies (a --ignore on the command line still does).
    file_ignore = list(settings.ignore) if select is None else []
    selection = Selection(rules, select if select is not None else list(settings.select or []),
                          ignore if ignore is not None else file_ignore, engine_codes=ENGINE_CODES,
                          extend_select=[*settings.extend_select, *extend_select], origins=origins)
    for glob, codes in settings.per_file_ignores.items():
        selection.validate(codes, f"`per-file-ignores` entry {glob!r} {where}")
    patterns = exclude if exclude is not None else settings.exclude
    probe = settings.probe
    return Settings(
        config=settings,
        selection=selection,
        threshold=Severity.parse(min_severity or settings.min_severity),
        respect_gitignore=settings.respect_gitignore if respect_gitignore is None else respect_gitignore,
        exclude=(*(patterns or ()), *settings.extend_exclude, *extend_exclude),
        default_exclude=frozenset() if patterns is not None else DEFAULT_EXCLUDE,
        probe_limits=ProbeLimits(
            probe_timeout or probe.get("timeout", ProbeLimits.site_timeout),
            probe_total_timeout or probe.get("total-timeout", ProbeLimits.total_timeout),
            probe_memory or int(probe.get("memory", ProbeLimits.memory_mb))))
