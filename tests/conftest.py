"""Shared helpers: `lint(source, select=None, min_severity=None)` runs the loaded rules over a source snippet."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from mhalint.finding import Finding, Severity
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

RULES = load_rules()


def lint(source: str, select: str | None = None, min_severity: Severity | str | None = None) -> list[Finding]:
    """Findings for a dedented source snippet; `select` keeps only rules whose code starts with it."""
    rules = [rule for code, rule in RULES.items() if select is None or code.startswith(select)]
    findings = Checker(rules).check_source(textwrap.dedent(source).encode(), "snippet.py")
    if min_severity is not None:
        threshold = Severity.parse(min_severity) if isinstance(min_severity, str) else min_severity
        findings = [f for f in findings if f.severity >= threshold]
    return findings


@pytest.fixture(name="lint")
def lint_fixture():
    return lint


def rule_checker(code: str, head: str):
    """`check(body)` for one rule's tests: `head` and the dedented `body` linted with that rule alone, asserting
    that nothing else (an engine diagnostic) is found."""
    def check(body: str) -> list[Finding]:
        found = lint(head + textwrap.dedent(body), code)
        assert all(f.code == code for f in found), found
        return found
    return check


@pytest.fixture(name="torch", scope="session")
def torch_fixture():
    """torch for the tests that run experiments; they are skipped where it is not installed."""
    return pytest.importorskip("torch")


# ---- the bad examples through `check --probe`, once -------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]
BAD_EXAMPLES = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "examples").glob("*_bad.py"))


@dataclass(frozen=True)
class ProbedExamples:
    completed: subprocess.CompletedProcess
    seconds: float

    def of(self, example: str) -> "ExampleOutput":
        """The concise lines about one example: its findings and the probe lines under them."""
        lines, mine = [], False
        for line in self.completed.stdout.splitlines():
            if not line.startswith(" "):
                mine = line.startswith(f"examples/{example}:")
            if mine:
                lines.append(line)
        assert lines, f"no finding in {example}:\n{self.completed.stdout}"
        return ExampleOutput("\n".join(lines) + "\n")


@dataclass(frozen=True)
class ExampleOutput:
    output: str


# The probe's widest limits: a test asserts what an experiment finds, never that it is done within the default
# 20 s (flex_attention's compiles took longer than that on a machine with every core busy).
PATIENT_PROBE = ["--probe-timeout", "3600", "--probe-total-timeout", "86400"]


def _probe_the_examples() -> dict:
    start = time.monotonic()
    args = [sys.executable, "-m", "mhalint", "check", "--probe", *PATIENT_PROBE, *BAD_EXAMPLES]
    completed = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    return {"args": args, "returncode": completed.returncode, "stdout": completed.stdout,
            "stderr": completed.stderr, "seconds": time.monotonic() - start}


@pytest.fixture(scope="session")
def probed_examples(tmp_path_factory) -> ProbedExamples:
    """`python -m mhalint check --probe` over every bad example (one probe worker for all of them, as a user's run
    over a project has), and the seconds it took. It runs once per test run: under xdist the first worker that
    needs it runs it, under a lock in the run's shared temporary directory, and the others read its result."""
    pytest.importorskip("torch")
    try:
        import fcntl
    except ImportError:  # no flock (Windows): each worker runs it
        fcntl = None
    if fcntl is None or "PYTEST_XDIST_WORKER" not in os.environ:
        run = _probe_the_examples()
    else:
        shared = tmp_path_factory.getbasetemp().parent  # the workers' basetemps are popen-gwN in there
        result = shared / "probed-examples.json"
        with open(shared / "probed-examples.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if result.is_file():
                run = json.loads(result.read_text())
            else:
                run = _probe_the_examples()
                result.write_text(json.dumps(run))
    completed = subprocess.CompletedProcess(run["args"], run["returncode"], run["stdout"], run["stderr"])
    return ProbedExamples(completed, run["seconds"])


# ---- parallel by default -----------------------------------------------------------------------------------------
# With pytest-xdist installed (the `test` extra), a plain `python -m pytest` runs on one worker per CPU core
# (`-n auto`), and a worker that runs out of tests takes some from the other's queue (`--dist worksteal`: the
# durations vary from milliseconds to half a minute). Anything the user says about distribution wins: `-n 0` or
# `-p no:xdist` runs serially, `-n 4` or `--dist ...` is taken as given; `--pdb` and `--collect-only` stay serial.
# Every test is parallel-safe: each writes under its own tmp_path (runs over examples/ also update the repository's
# .mhalint_cache, which mhalint replaces atomically, as it must for a user's concurrent runs), and changes the working
# directory and the environment of its own process only (monkeypatch, or restored in a finally).
@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    if importlib.util.find_spec("xdist") is None or not config.pluginmanager.hasplugin("xdist"):
        return  # not installed, or turned off with -p no:xdist
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller has distributed already
    option = config.option
    chosen = (option.numprocesses is not None or option.dist != "no" or option.distload or option.tx
              or option.usepdb or option.collectonly)
    if not chosen:
        option.numprocesses = "auto"
        option.dist = "worksteal"


# ---- bytecode is written ------------------------------------------------------------------------------------------
# About 150 tests start `python -m mhalint`, flake8, pytest or a probe worker as a user would. Where
# PYTHONDONTWRITEBYTECODE=1 (as on the CI machines), each of those processes compiled mhalint, its rules and the test
# modules again, which made a fresh clone's run about 25 s slower on 2 cores than a working checkout's. The test run
# writes bytecode as Python does by default, into __pycache__ folders (.gitignore lists them); its workers, started
# after this, inherit the setting. Nothing the tests check is imported, so no __pycache__ appears there.
def pytest_configure(config: pytest.Config) -> None:
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


# The `slow` tests (each 3-30 s) run first, so that the workers share them out while there is plenty of other work
# left to balance with, instead of one worker finishing a 30-second test alone at the end.
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
