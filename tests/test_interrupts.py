"""Ctrl-C and SIGTERM stop a run at once and cleanly (issue 16): exit 130 or 143 after little work (a bound on the
CPU time spent after the signal, which other load on the machine does not stretch), a one-line message and no
traceback, no worker process left, no stray file, and a cache that gives the same findings as no cache.

The random-moment tests send real signals to the real command line, at moments from a seeded generator (a failure
names its trial and moment, and the same seed gives the same moments again), counted from when the command line
is up: when its SIGTERM handler shows in /proc/PID/status. A signal before that lands in the interpreter's start,
before any of mhalint's code runs.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from mhalint.rule import load_rules
from mhalint.run.cache import Cache
from mhalint.run.engine import Checker

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FILES = 3000
ATTENTION_EVERY = 10  # one file in ten is an example with attention code, which the parser reaches
EXIT_CPU = 5  # seconds of CPU that mhalint and its workers may spend from the signal to the exit
HANG_GUARD = 300  # seconds of wall time: only a hang is this slow (other work on the machine stretches wall time)
TRIALS = 20
COLD_TRIALS = 12  # --no-cache and cold-cache runs, which take several seconds; then warm-cache runs
TOUCHED_PER_WARM_TRIAL = 40  # attention files edited before each warm run, so it parses (in workers) again


def _generate(root: Path) -> list[Path]:
    """FILES files in 30 packages, a [tool.mhalint] table at the top (the cache goes to root/.mhalint_cache);
    the attention files, returned, are copies of the examples."""
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.mhalint]\n")
    examples = sorted(EXAMPLES.glob("*.py"))
    attention = []
    for index in range(FILES):
        package = root / f"pkg{index % 30}"
        package.mkdir(parents=True, exist_ok=True)
        path = package / f"module{index}.py"
        if index % ATTENTION_EVERY == 0:
            shutil.copy(examples[index // ATTENTION_EVERY % len(examples)], path)
            attention.append(path)
        else:
            path.write_text(f"def step{index}(x):\n    return x + {index}\n" * 5)
    return attention


def _environment() -> dict:
    environment = {name: value for name, value in os.environ.items() if name != "MHALINT_CACHE_DIR"}
    return {**environment, "PYTHONUNBUFFERED": "1"}


def _check(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mhalint", "check", *args, "."], cwd=root, capture_output=True,
                          text=True, env=_environment(), timeout=300)


@dataclass
class Trial:
    returncode: int
    stdout: str
    stderr: str
    exit_cpu: float  # seconds of CPU spent by mhalint and its workers from the signal to the exit
    survivors: list[int]  # processes of its process group still alive after it exited
    finished_after: float | None = None  # seconds from up to its exit, when it exited before its signal


def _interrupt(root: Path, args: list[str], signum: int, moment: float, *, group: bool, out: Path) -> Trial:
    """Run `mhalint check ARGS .` in its own process group, send `signum` `moment` seconds after it is up (to
    the whole group, as a terminal's Ctrl-C or `timeout` does, or to mhalint alone, as `kill PID`)."""
    stdout, stderr = out / "stdout", out / "stderr"
    with open(stdout, "w") as out_file, open(stderr, "w") as err_file:  # files, not pipes: a worker left
        process = subprocess.Popen(                                      # alive cannot hold them open
            [sys.executable, "-m", "mhalint", "check", *args, "."], cwd=root, stdout=out_file, stderr=err_file,
            env=_environment(), start_new_session=True)
    try:
        _wait_until_up(process)
        up = time.monotonic()
        try:
            process.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            pass
        else:  # it finished its work first: nothing to signal, and its duration tells the next moments
            return Trial(process.returncode, stdout.read_text(), stderr.read_text(), 0.0,
                         _group_members(process.pid), time.monotonic() - up)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = _group_cpu(process.pid)
        (os.killpg if group else os.kill)(process.pid, signum)
        try:
            process.wait(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            pytest.fail(f"mhalint did not exit within {HANG_GUARD} s of signal {signum} sent "
                        f"{moment:.3f} s after it was up")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        exit_cpu = _cpu(after) - _cpu(before) - spent
        survivors = _group_members(process.pid)
    finally:
        _kill_group(process)
    return Trial(process.returncode, stdout.read_text(), stderr.read_text(), exit_cpu, survivors)


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def _group_cpu(group: int) -> float:
    """Seconds of CPU the live processes of a process group have used so far (/proc/PID/stat's utime and stime).
    Subtracted from what they have used when reaped, it leaves what they spent from now on: a bound on the work
    done after a signal that the machine's other load does not stretch, as it stretches wall time."""
    ticks = sum(sum(map(int, fields[11:15])) for _, fields in _in_group(group))  # its own, and its reaped children's
    return ticks / os.sysconf("SC_CLK_TCK")


def _in_group(group: int):
    """(pid, the fields of /proc/PID/stat after the command's name, from the state on) of each process of a
    process group."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = status[status.rindex(")") + 2:].split()
        if int(fields[2]) == group:
            yield int(entry), fields


def _wait_until_up(process: subprocess.Popen) -> None:
    """Until the command line has installed its SIGTERM handler, which it must have to exit 143 on SIGTERM."""
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline and process.poll() is None:
        caught = next(line for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
                      if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.002)
    pytest.fail(f"mhalint exited or ran {HANG_GUARD} s without handling SIGTERM")


def _group_members(group: int, grace: float = 1.0) -> list[int]:
    """The live (not zombie) processes of a process group, after up to `grace` seconds for them to go."""
    deadline = time.monotonic() + grace
    while True:
        members = [pid for pid, fields in _in_group(group) if fields[0] != "Z"]
        if not members or time.monotonic() > deadline:
            return members
        time.sleep(0.05)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _snapshot(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


def _stray(root: Path, before: set[str]) -> list[str]:
    """Files the run left that are not the cache's own: its index and .gitignore."""
    new = _snapshot(root) - before
    own = {".mhalint_cache", ".mhalint_cache/.gitignore"}
    return sorted(name for name in new if name not in own and not
                  (name.startswith(".mhalint_cache/findings-") and name.endswith(".json")))


def _assert_the_cache_serves_what_no_cache_finds(root: Path, baseline: str) -> float:
    """Two complete runs with the cache give the --no-cache run's output: the first reads the cache that the
    interrupted runs left, the second the one the first wrote. The second one's seconds."""
    for _ in range(2):
        started = time.monotonic()
        completed = _check(root)
        seconds = time.monotonic() - started
        assert completed.returncode == 1 and completed.stderr == ""
        assert completed.stdout == baseline
    indexes = sorted((root / ".mhalint_cache").glob("findings-*.json"), key=lambda path: path.stat().st_mtime_ns)
    documents = [json.loads(index.read_text()) for index in indexes]  # each whole: valid JSON
    assert len(documents[-1]["entries"]) == FILES
    return seconds


def _random_moments(signum: int, interrupted_message: str, exit_code: int, tmp_path: Path) -> None:
    """TRIALS runs, each sent `signum` at a random moment: the first COLD_TRIALS with --no-cache or a cache
    without entries, the others with a warm cache and TOUCHED_PER_WARM_TRIAL files edited, which are parsed
    again (libcst is imported, workers are forked). The moments are drawn within the first half of the shortest
    such run seen so far (at most 3 s), so that the signals land while mhalint is running: a run that finishes
    before its signal (the machine's other load can make a run faster than the one measured first) only has to
    have given the whole output, and its duration narrows the moments of the runs after it."""
    root = tmp_path / "tree"
    attention = _generate(root)
    started = time.monotonic()
    baseline = _check(root, "--no-cache")
    cold_seconds = time.monotonic() - started
    assert baseline.returncode == 1 and baseline.stdout.count(": MHA") > 100, baseline.stdout + baseline.stderr
    rng = random.Random(1600 + signum)
    out = tmp_path / "out"
    out.mkdir()
    shortest = {True: cold_seconds, False: None}  # of a cold and of a warm run, so far
    finished_first = []
    for number in range(TRIALS):
        cold = number < COLD_TRIALS
        if shortest[cold] is None:
            shortest[cold] = _assert_the_cache_serves_what_no_cache_finds(root, baseline.stdout)
        if not cold:
            for path in rng.sample(attention, TOUCHED_PER_WARM_TRIAL):
                with open(path, "a") as source:
                    source.write(f"# trial {number}\n")
        args = ["--no-cache"] if cold and number % 3 == 0 else []
        moment = rng.random() * min(3.0, 0.5 * shortest[cold])
        group = number % 2 == 0
        before = _snapshot(root)
        trial = _interrupt(root, args, signum, moment, group=group, out=out)
        target = "group" if group else "process"
        where = f"trial {number} ({' '.join(args) or 'cache'}, {moment:.3f} s, to the {target})"
        if trial.finished_after is not None:
            shortest[cold] = min(shortest[cold], trial.finished_after)
        if trial.stdout == baseline.stdout:  # it had finished its work when the signal came
            finished_first.append(where)
        else:
            assert trial.returncode == exit_code, f"{where}: exit {trial.returncode}\n{trial.stderr}"
            assert trial.stderr == interrupted_message, f"{where}:\n{trial.stderr}"
        assert trial.exit_cpu < EXIT_CPU, f"{where}: {trial.exit_cpu:.1f} s of CPU after the signal"
        assert trial.survivors == [], f"{where}: processes left: {trial.survivors}"
        assert _stray(root, before) == [], where
    assert len(finished_first) <= 3, finished_first
    _assert_the_cache_serves_what_no_cache_finds(root, baseline.stdout)


@pytest.mark.slow
def test_ctrl_c_at_random_moments_exits_130_at_once_and_leaves_a_usable_cache(tmp_path: Path):
    _random_moments(signal.SIGINT, "mhalint: interrupted\n", 130, tmp_path)


@pytest.mark.slow
def test_sigterm_at_random_moments_exits_143_and_stops_the_workers(tmp_path: Path):
    _random_moments(signal.SIGTERM, "mhalint: terminated\n", 143, tmp_path)


# ---- the steps that must not stop half-way ------------------------------------------------------------------------

def test_an_interrupt_while_the_cache_is_written_waits_for_the_write(tmp_path: Path, monkeypatch):
    """A Ctrl-C just after the temporary index file is created: the write finishes (no temporary file is left,
    and the index is whole), and then the interrupt is raised."""
    from mhalint.run import cache as cache_module
    for name in ("mha001_batch_first_default_bad.py", "mha003_is_causal_without_mask_bad.py", "mha001_batch_first_default_fixed.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    rules = list(load_rules().values())
    real_create = cache_module._create_temporary

    def interrupted_create(*args, **kwargs):
        created = real_create(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)
        return created

    monkeypatch.setattr(cache_module, "_create_temporary", interrupted_create)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            Checker(rules).check_paths(sorted(tmp_path.glob("*.py")), cache=Cache(tmp_path / "cache", rules))
    finally:
        signal.signal(signal.SIGINT, previous)
    monkeypatch.undo()
    assert [path.name for path in (tmp_path / "cache").iterdir() if path.suffix != ".json"] == [".gitignore"]
    [index] = (tmp_path / "cache").glob("findings-*.json")
    assert sorted(json.loads(index.read_text())["entries"]) == sorted(map(str, tmp_path.glob("*.py")))
    warm = Checker(rules).check_paths(sorted(tmp_path.glob("*.py")), cache=Cache(tmp_path / "cache", rules))
    fresh = Checker(rules).check_paths(sorted(tmp_path.glob("*.py")))
    assert warm.findings and [f.to_dict() for f in warm.findings] == [f.to_dict() for f in fresh.findings]


def test_an_import_of_libcst_interrupted_half_way_is_imported_again_on_next_use():
    """A Ctrl-C inside the deferred `import libcst` (here: raised when libcst imports its node classes) leaves no
    half-initialised libcst behind: the next use imports it whole."""
    program = textwrap.dedent("""
        import sys
        from mhalint.parse.lazy import cst

        class Interrupt:
            def find_spec(self, name, path=None, target=None):
                if name == "libcst._nodes.expression":
                    raise KeyboardInterrupt
                return None

        sys.meta_path.insert(0, Interrupt())
        try:
            cst.parse_module
        except KeyboardInterrupt:
            print("interrupted")
        del sys.meta_path[0]
        print(cst.parse_module("x = 1\\n").code, end="")
        print(type(cst.parse_module("y = 2\\n").body[0]) is sys.modules["libcst"].SimpleStatementLine)
    """)
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert completed.stdout == "interrupted\nx = 1\nTrue\n", completed.stdout + completed.stderr


@pytest.mark.parametrize(("signum", "message", "code"), [
    (signal.SIGTERM, "mhalint: terminated\n", 143),
    (signal.SIGINT, "mhalint: interrupted\n", 130),
])
def test_a_signal_while_a_class_is_created_is_still_that_signal(tmp_path: Path, signum: int, message: str,
                                                                code: int):
    """A signal that lands in a `__set_name__` while a class is created (libcst's dataclasses, made during its
    deferred import) reaches the command line wrapped in a RuntimeError on Python 3.11: it still exits as the
    signal does, not with a traceback and exit 1."""
    shutil.copy(EXAMPLES / "mha001_batch_first_default_bad.py", tmp_path / "model.py")
    program = textwrap.dedent(f"""
        import signal, sys
        from mhalint.cli import main as cli
        from mhalint.run import engine
        check_paths = engine.Checker.check_paths

        def check_paths_signalled_in_a_class(self, *args, **kwargs):
            class Field:
                def __set_name__(self, owner, name):
                    signal.raise_signal({int(signum)})

            class Node:
                whitespace_before = Field()

            return check_paths(self, *args, **kwargs)

        engine.Checker.check_paths = check_paths_signalled_in_a_class
        sys.argv = ["mhalint", "check", "--no-cache", {str(tmp_path / "model.py")!r}]
        cli.main()
    """)
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert (completed.returncode, completed.stderr) == (code, message)


def test_a_run_stopped_while_the_probe_runs_stops_the_probe_process(tmp_path: Path):
    """SIGTERM to mhalint alone (`kill PID`) while its torch probe process runs: mhalint exits 143 and the probe
    process, which the signal did not reach, does not outlive it."""
    pytest.importorskip("torch")
    shutil.copy(EXAMPLES / "mha001_batch_first_default_bad.py", tmp_path / "model.py")
    process = subprocess.Popen([sys.executable, "-m", "mhalint", "check", "--no-cache", "--probe", "model.py"],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=_environment(), start_new_session=True)
    try:
        _wait_until_up(process)
        deadline = time.monotonic() + 60
        while not [pid for pid in _group_members(process.pid, grace=0) if pid != process.pid]:
            assert process.poll() is None and time.monotonic() < deadline, "the probe process never started"
            time.sleep(0.01)
        os.kill(process.pid, signal.SIGTERM)
        _, stderr = process.communicate(timeout=HANG_GUARD)
        assert process.returncode == 143, stderr
        assert _group_members(process.pid, grace=0.2) == []  # not left to die of a broken pipe later
    finally:
        _kill_group(process)


@pytest.mark.slow
@pytest.mark.parametrize("again", [False, True], ids=["once", "twice"])
@pytest.mark.parametrize(("signum", "message", "code"), [
    (signal.SIGINT, "mhalint: interrupted\n", 130),
    (signal.SIGTERM, "mhalint: terminated\n", 143),
])
def test_a_signal_while_libcst_builds_the_tree_exits_with_its_code_not_an_abort(tmp_path: Path, signum: int,
                                                                                message: str, code: int,
                                                                                again: bool):
    """Issue 34: a signal while the check thread is inside libcst's native parser left it there while the
    interpreter finalized, and the process aborted (SIGABRT) after its message. Here a node class, which the
    parser calls, sends the signal and keeps the thread in the parser, sleeping (so it wakes during the
    finalization), for as long as the process lives. `twice` sends it again as the message is written (a second
    Ctrl-C), which ended the run with click's `Aborted!` and exit 1, or killed it (SIGTERM). Each case failed
    before the fix."""
    shutil.copy(EXAMPLES / "mha001_batch_first_default_bad.py", tmp_path / "model.py")
    program = textwrap.dedent(f"""
        import os, sys, time
        import libcst
        from mhalint.cli import main as cli
        echo = cli.click.echo

        def echo_signalled_again(*args, **kwargs):
            os.kill(os.getpid(), {int(signum)})
            return echo(*args, **kwargs)

        class Name(libcst.Name):
            def __init__(self, *args, **kwargs):
                if {again}:
                    cli.click.echo = echo_signalled_again
                os.kill(os.getpid(), {int(signum)})
                while True:
                    time.sleep(0.001)

        libcst.Name = Name  # the parser looks its node classes up on the module
        sys.argv = ["mhalint", "check", "--no-cache", {str(tmp_path / "model.py")!r}]
        cli.console()
    """)
    for _ in range(8):
        completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
        assert (completed.returncode, completed.stderr) == (code, message)
