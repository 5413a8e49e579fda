"""The probe's limits, apart from the runner: options and settings show the defaults without loading the runner
(subprocess, tempfile), which a run without --probe never uses."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProbeLimits:
    site_timeout: float = 20.0  # seconds per experiment
    total_timeout: float = 300.0  # seconds for the whole worker, torch import included
    memory_mb: int = 2048  # address-space cap of the worker
