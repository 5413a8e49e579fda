"""The parent side of the probe: send findings to one worker process, with time and memory limits.

The worker is `python -m mhalint.probe` under the same interpreter. It gets rule codes and resolved values only,
never a path or a line of the user's code. A worker that crashes or runs out of time marks the sites it had not
answered as skipped, with the reason; the static findings are always kept.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import replace
from typing import TYPE_CHECKING, Mapping, Sequence

from mhalint import INSTALL_TORCH
from mhalint.finding import SKIPPED, Finding, ProbeResult
from mhalint.probe.limits import ProbeLimits

if TYPE_CHECKING:  # the rules import libcst, which `mhalint --version` and the probe worker need not load
    from mhalint.rule import Rule


class ProbeUnavailable(Exception):
    """torch is not installed: the probe cannot run at all."""


def probe_findings(findings: Sequence[Finding], rules: Mapping[str, type[Rule]],
                   limits: ProbeLimits = ProbeLimits()) -> list[Finding]:
    """The findings with a ProbeResult on every one whose rule has an experiment."""
    sites = [{"id": index, "code": f.code, "arguments": dict(f.arguments)}
             for index, f in enumerate(findings) if f.code in rules and rules[f.code].probe is not None]
    if not sites:
        return list(findings)
    if importlib.util.find_spec("torch") is None:
        raise ProbeUnavailable(f"the probe needs torch, which is not installed: {INSTALL_TORCH}")
    results = _run_worker(sites, limits)
    probed = list(findings)
    for site in sites:
        probed[site["id"]] = replace(probed[site["id"]], probe=results[site["id"]])
    return probed


def _run_worker(sites: list[dict], limits: ProbeLimits) -> dict[int, ProbeResult]:
    request = json.dumps({"site_timeout": limits.site_timeout, "sites": sites})
    # An empty working directory: `python -m` puts it first on sys.path, and the user's own directory there
    # would let a json.py or torch.py of theirs be imported by the worker.
    with tempfile.TemporaryDirectory(prefix="mhalint-probe-") as empty:
        return _communicate(request, sites, limits, empty)


def _communicate(request: str, sites: list[dict], limits: ProbeLimits, cwd: str) -> dict[int, ProbeResult]:
    process = subprocess.Popen(
        [sys.executable, "-m", "mhalint.probe"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=_memory_cap(limits.memory_mb))
    try:
        stdout, stderr = process.communicate(request, timeout=limits.total_timeout)
        failure = None if process.returncode == 0 else _exit_reason(process.returncode, stderr)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        failure = f"the probe run took longer than its limit of {limits.total_timeout:g} s and was stopped"
    except BaseException:  # an interrupt of mhalint: the probe process must not outlive it
        process.kill()
        process.wait()
        raise
    torch_version, results, error = _parse(stdout)
    if error is not None:
        failure = error
    elif torch_version is None and failure is None:
        failure = "the probe process did not start its experiments"
    return {site["id"]: results.get(site["id"]) or ProbeResult(SKIPPED, failure or "no answer from the probe")
            for site in sites}


def _parse(stdout: str) -> tuple[str | None, dict[int, ProbeResult], str | None]:
    torch_version, results, error = None, {}, None
    for line in stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue  # torch or a library printed something: not ours
        if not isinstance(message, dict):
            continue
        if "error" in message:
            error = str(message["error"])
        elif "torch" in message:
            torch_version = str(message["torch"])
        elif isinstance(message.get("id"), int) and "status" in message:
            results[message["id"]] = ProbeResult(str(message["status"]), str(message.get("evidence", "")),
                                                 torch_version)
    return torch_version, results, error


def _exit_reason(code: int, stderr: str) -> str:
    last = next((line for line in reversed(stderr.strip().splitlines()) if line.strip()), "")
    if code < 0:
        return f"the probe process was killed by signal {-code} (memory cap or crash); {last}".rstrip("; ")
    return f"the probe process exited with code {code}: {last}".rstrip(": ")


def _memory_cap(megabytes: int):
    def apply() -> None:
        limit = megabytes * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply
