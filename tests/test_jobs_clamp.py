"""`--jobs` is clamped (issue 34): a run starts at most min(jobs, files, usable CPUs) worker processes at once, in
its first pass (mhalint/run/scan.py) and in its checks (the engine), and `--show-settings` says why `jobs` is less
than asked. `--jobs 100000` once forked thousands of processes and exhausted the machine's memory."""

from __future__ import annotations

import multiprocessing.context
import os
from pathlib import Path

import pytest
from invoke import invoke

TRIGGER = "import torch.nn as nn\nattn = nn.MultiheadAttention(60, 5)\n"


def cpus(monkeypatch, count: int) -> None:
    """The process may run on `count` CPUs, whatever the machine has."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(count)), raising=False)


def watch_workers(monkeypatch, limit: int) -> list[int]:
    """[the most worker processes alive at once], filled in as the run forks them. Starting one past `limit`
    fails at once, so that a regression is a failed test, not thousands of processes."""
    start, alive, peak = multiprocessing.context.ForkProcess.start, [], [0]

    def counted(process) -> None:
        alive[:] = [other for other in alive if other.is_alive()]
        if len(alive) >= limit:
            raise AssertionError(f"a worker process started while {len(alive)} were running (at most {limit})")
        start(process)
        alive.append(process)
        peak[0] = max(peak[0], len(alive))

    monkeypatch.setattr(multiprocessing.context.ForkProcess, "start", counted)
    return peak


def project(root: Path, matching: int, plain: int = 0) -> Path:
    for index in range(matching):
        (root / f"model_{index}.py").write_text(TRIGGER)
    for index in range(plain):  # read in the first pass, never parsed
        (root / f"plain_{index}.py").write_text("x = 1\n")
    return root


@pytest.mark.parametrize(("files", "cpu_count"), [(10, 3), (8, 16)])
def test_huge_jobs_start_no_more_workers_than_files_or_cpus(tmp_path: Path, monkeypatch, files: int,
                                                            cpu_count: int):
    cpus(monkeypatch, cpu_count)
    peak = watch_workers(monkeypatch, min(files, cpu_count))
    result = invoke("check", "--no-cache", "--jobs", "100000", ".", cwd=project(tmp_path, files))
    assert result.exit_code == 1 and result.stdout.count("MHA001") == files
    assert peak == [min(files, cpu_count)]  # clamped, and still spread


def test_the_first_pass_is_clamped_too(tmp_path: Path, monkeypatch):
    cpus(monkeypatch, 3)
    peak = watch_workers(monkeypatch, 3)
    result = invoke("check", "--no-cache", "--jobs", "100000", ".", cwd=project(tmp_path, 8, plain=450))
    assert result.exit_code == 1 and result.stdout.count("MHA001") == 8
    assert peak == [3]


@pytest.mark.parametrize(("args", "shown"), [
    (("--jobs", "100000"), "jobs                = 3  # --jobs 100000, clamped to the 3 CPUs available"),
    (("--jobs", "2"), "jobs                = 2  # --jobs"),
    ((), "jobs                = 3  # default: the 3 CPUs available"),
])
def test_show_settings_says_when_jobs_was_clamped(tmp_path: Path, monkeypatch, args, shown):
    cpus(monkeypatch, 3)
    result = invoke("check", "--show-settings", *args, cwd=tmp_path)
    assert shown in result.stdout.splitlines()


def test_without_an_affinity_call_the_cpu_count_bounds_jobs(tmp_path: Path, monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 5)
    result = invoke("check", "--show-settings", "--jobs", "64", cwd=tmp_path)
    assert "jobs                = 5  # --jobs 64, clamped to the 5 CPUs available" in result.stdout.splitlines()
