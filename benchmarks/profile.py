"""Where a cold run of `mhalint check` spends its time, phase by phase (issue 18).

Runs `Checker.check_paths` in this one process (`--jobs 1`, no cache, default settings), as `mhalint check` does,
on a tree (by default benchmarks/speed.py's corpus), with a timer around each function that makes up a phase. A
phase's time leaves out the phases it calls (the positions an analysis asks for are not analysis), so the
phases add up to the run; the cyclic garbage collector's passes are a phase (`collector`, timed by a gc
callback); what no timer covers (the engine's own loop, the pool's bookkeeping) is `other`.
Start-up is the import of mhalint, its rules and libcst, measured in a fresh interpreter.

A serial run's phases are CPU time spent one after the other; a parallel run spreads the first pass (read,
prefilter, import index) and then the parse and analysis over worker processes. The figures come from wall clocks on
a shared machine: run it twice and read the shares, not the third digit.

With `--calls`, no timer: the run is counted instead, in Python function calls (cProfile's count, in the main
thread and in the thread that checks each file). The count is work that the machine's load does not move, so two
commits compare by it on a busy machine, where their times would not (it moves by a few calls from run to run
with the order of sets of strings).

Usage:
    python benchmarks/profile.py [--calls] [TREE]   (default /tmp/mhalint-speed-corpus/tree; build it with speed.py)
"""

from __future__ import annotations

import functools
import gc
import io
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

DEFAULT_TREE = Path("/tmp/mhalint-speed-corpus/tree")
STARTUP = "import libcst, mhalint.cli.main, mhalint.rule; mhalint.rule.load_rules()"


class Phases:
    """Exclusive time per phase: each timed call's time, less that of the timed calls made inside it."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._inner: list[float] = []  # per open timed call, the time of the timed calls inside it so far

    def timed(self, phase: str, function):
        @functools.wraps(function)
        def measured(*args, **kwargs):
            start = time.perf_counter()
            self._inner.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                self.seconds[phase] += elapsed - self._inner.pop()
                self.calls[phase] += 1
                if self._inner:
                    self._inner[-1] += elapsed
        return measured

    def wrap(self, phase: str, owner, name: str) -> None:
        setattr(owner, name, self.timed(phase, getattr(owner, name)))

    def collections(self, stage: str, info: dict) -> None:
        """A gc callback: the cyclic collector's passes are a phase of their own, out of the phase they interrupt."""
        if stage == "start":
            self._collecting = time.perf_counter()
            return
        elapsed = time.perf_counter() - self._collecting
        self.seconds["collector"] += elapsed
        self.calls["collector"] += 1
        if self._inner:
            self._inner[-1] += elapsed


class Parses:
    """libcst parses per file (issue 37: each file parsed at most once a run): a parse counts for the file being
    checked, or for the other file the project reads for its analysis, whichever asked for it last."""

    def __init__(self):
        self.files: Counter[str] = Counter()
        self.other: set[str] = set()  # the files parsed for another file's analysis
        self.pending = 0  # function bodies left out of a parse (mhalint.parse.lazy_bodies)
        self.bodies = 0  # those parsed alone since, when something read them
        self._reading: list[str] = []
        self._in_body = False

    def counted(self, parse):
        @functools.wraps(parse)
        def counting(*args, **kwargs):
            if self._in_body:
                self.bodies += 1
            elif self._reading:
                self.files[self._reading[-1]] += 1
            return parse(*args, **kwargs)
        return counting

    def lazy(self, lazy_bodies) -> None:
        """Count the bodies a parse leaves out, and those parsed alone later (not as parses of a file)."""
        shell, body = lazy_bodies.parse, lazy_bodies.Pending.parse

        @functools.wraps(shell)
        def parse(*args, **kwargs):
            found = shell(*args, **kwargs)
            self.pending += len(found.pending)
            return found

        @functools.wraps(body)
        def parse_body(*args, **kwargs):
            self._in_body = True
            try:
                return body(*args, **kwargs)
            finally:
                self._in_body = False
        lazy_bodies.parse, lazy_bodies.Pending.parse = parse, parse_body

    def reading(self, owner, name: str, path_at: int, other: bool) -> None:
        """The function `owner.name` parses the file named by its argument at `path_at`."""
        function = getattr(owner, name)

        @functools.wraps(function)
        def read(*args, **kwargs):
            path = str(Path(args[path_at]).resolve())
            self._reading.append(path)
            if other:
                self.other.add(path)
            try:
                return function(*args, **kwargs)
            finally:
                self._reading.pop()
        setattr(owner, name, read)

    def lines(self) -> list[str]:
        twice = sorted((count, path) for path, count in self.files.items() if count > 1)
        found = [f"libcst parses  {sum(self.files.values())} of {len(self.files)} files "
                 f"({len(self.other)} of them read for another file's analysis); "
                 f"files parsed more than once: {len(twice)}"]
        found.append(f"function bodies left out of those parses {self.pending:,}, parsed alone since {self.bodies:,}")
        return found + [f"  {count} parses of {path}" for count, path in reversed(twice[-10:])]


def instrument(phases: Phases, parses: Parses) -> None:
    """Timers around the functions of each phase, where the engine and the analyses look them up."""
    from functools import cached_property

    import libcst

    from mhalint import context
    from mhalint.analysis import project
    from mhalint.parse import lazy_bodies, positions
    from mhalint.parse.lazy import cst
    from mhalint.run import dispatch, engine, noqa, scan
    from mhalint.run.prefilter import Prefilter

    phases.wrap("discovery", engine, "discover")
    phases.wrap("read", scan, "read")
    phases.wrap("prefilter", Prefilter, "matches")
    phases.wrap("prefilter", Prefilter, "only_passed_as_values")
    phases.wrap("import index", project.Project, "_imports_of")
    names = project.Project.__dict__["_names"]
    assert isinstance(names, cached_property)
    names.func = phases.timed("import index", names.func)
    phases.wrap("CPython parse", engine, "_python_parse")
    parse = phases.timed("libcst parse", parses.counted(libcst.parse_module))
    parses.reading(engine.Checker, "_check_within", 2, other=False)  # (self, source, path, ...)
    parses.reading(project, "_parse", 0, other=True)  # (path, raw, limits, project)
    parses.lazy(lazy_bodies)
    for module in {libcst, cst}:  # the real module and mhalint's deferred stand-in for it
        module.parse_module = parse
    for name in ("first_lines", "body_lines", "statement_starts"):
        phases.wrap("positions", positions, name)
    for name in ("_generate_statement", "_generate_module"):
        phases.wrap("positions", positions.Positions, name)
    phases.wrap("analysis", context.ModuleContext, "walk_indexed")  # the one walk, which indexes the tree
    phases.wrap("analysis", dispatch.RuleDispatch, "run")  # the rules, and the analyses they ask
    phases.wrap("noqa", noqa, "suppress")
    gc.callbacks.append(phases.collections)


def startup_seconds() -> float:
    """A fresh interpreter that imports mhalint, its rules and libcst (the best of three)."""
    def once() -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", STARTUP], check=True)
        return time.perf_counter() - start

    return min(once() for _ in range(3))


def counted_calls(check):
    """`check()`'s result and the Python function calls it made, in this thread and in the thread that checks each
    file (mhalint.run.deep_stack), where a profiler is switched on around each check."""
    import _lsprof  # cProfile's profiler: `import cProfile` would import this script, which shadows `profile`

    from mhalint.run import deep_stack

    here, in_checks, submit = _lsprof.Profiler(), _lsprof.Profiler(), deep_stack.run

    def profiled(function, *arguments):
        def checking(*inner):
            in_checks.enable()
            try:
                return function(*inner)
            finally:
                in_checks.disable()
        return submit(checking, *arguments)

    deep_stack.run = profiled
    here.enable()
    try:
        result = check()
    finally:
        here.disable()
        deep_stack.run = submit
    return result, sum(entry.callcount for profile in (here, in_checks) for entry in profile.getstats())


def main() -> None:
    arguments = [argument for argument in sys.argv[1:] if argument != "--calls"]
    calls_only = len(arguments) < len(sys.argv) - 1
    tree = Path(arguments[0]) if arguments else DEFAULT_TREE
    if not tree.is_dir():
        sys.exit(f"{tree}: no such directory (python benchmarks/speed.py builds the default corpus)")
    startup = 0.0 if calls_only else startup_seconds()
    from mhalint.configuration.settings import resolve
    from mhalint.report import concise
    from mhalint.rule import load_rules
    from mhalint.run.engine import Checker

    phases, parses = Phases(), Parses()
    if not calls_only:
        instrument(phases, parses)
    settings = resolve(load_rules(), [tree], config_path=None, select=None, extend_select=[], ignore=None,
                       exclude=None, extend_exclude=[], respect_gitignore=None, min_severity=None,
                       probe_timeout=None, probe_total_timeout=None, probe_memory=None, isolated=True)
    checker = Checker(settings.selection.rules, unused_noqa=True, budget=settings.file_budget)

    def check():
        return checker.check_paths([tree], jobs=1, respect_gitignore=settings.respect_gitignore,
                                   exclude=settings.exclude, default_exclude=settings.default_exclude)

    if calls_only:
        result, calls = counted_calls(check)
        shown = sum(settings.reports(finding) for finding in result.findings)
        print(f"mhalint profile: {tree}, {result.files_checked:,} files, {shown} findings, one process")
        print(f"Python function calls: {calls:,}")
        return
    start = time.perf_counter()
    result = check()
    report_start = time.perf_counter()
    shown = [finding for finding in result.findings if settings.reports(finding)]
    io.StringIO().write(concise.render(shown))
    phases.seconds["report"] += time.perf_counter() - report_start
    phases.calls["report"] += 1
    total = time.perf_counter() - start
    phases.seconds["other"] = total - sum(phases.seconds.values())

    print(f"mhalint profile: {tree}, {result.files_checked:,} files, {len(shown)} findings, one process")
    print(f"{'phase':<14} {'seconds':>8} {'share':>6} {'calls':>7}")
    print(f"{'start-up':<14} {startup:>8.2f} {'':>6} {'1':>7}   (Python and the imports; not in the total)")
    for phase in ("discovery", "read", "prefilter", "import index", "CPython parse", "libcst parse", "positions",
                  "analysis", "noqa", "collector", "report", "other"):
        seconds = phases.seconds.get(phase, 0.0)
        calls = str(phases.calls[phase]) if phase != "other" else ""
        print(f"{phase:<14} {seconds:>8.2f} {seconds / total:>6.1%} {calls:>7}")
    print(f"{'total':<14} {total:>8.2f} {1:>6.0%}")
    print("\n".join(parses.lines()))


if __name__ == "__main__":
    main()
