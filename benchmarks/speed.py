"""Speed of mhalint on a 3-million-line tree, against ruff and grep in the same run (issues 7 and 18).

The corpus is the Python sources of pinned releases: transformers, diffusers and timm (their wheels, from
`pip download --no-deps`, `.py` files only) and torch's own `torch/` package (copied from the installed torch).
It is built once and kept in `--corpus-dir`; a ruff of its own is installed there in a separate venv.

Measured, interleaved over `--rounds` rounds (the order rotates each round, so load on a shared machine hits
every command alike), wall time and peak memory of each child process:
  ruff        `ruff check --no-cache --isolated --select PLW1510 --exit-zero CORPUS` (the baseline)
  grep        `grep -rlP '<trigger patterns>' CORPUS` with LC_ALL=C (the floor: reading the tree)
  cold        `mhalint check --no-cache --exit-zero --output-format concise CORPUS`
  warm        the same with a filled cache (MHALINT_CACHE_DIR) instead of --no-cache
  1 file +    `mhalint check --no-cache --output-format concise FILE`, FILE a small file with an attention call
  1 file -    the same on a small file without one (it should not import libcst)
Peak memory is ru_maxrss from os.wait4 (the largest single process of the child's tree) and, for a process pool,
the largest sum over the child and its descendants of the resident (RSS) and proportional (PSS) set sizes, sampled
from /proc every 0.1 s (the process tree is re-read every second). The memory figure held to the target is the PSS
sum: the memory of all the run's processes, each page once.

mhalint exiting 1 (findings) counts as success; any other failure is printed and makes the script exit 1.
The script uses the standard library only; everything else runs in subprocesses.

With `--before PYTHON` (a Python where an earlier commit of mhalint is installed), that mhalint's cold run joins
the rounds as `before`, and the report compares the two cold runs (wall and CPU medians): changes compared
in the same interleaved rounds, not across runs made at different times on a shared machine. Where the current
mhalint has rules the earlier one lacks, a `same rules` cold run (those rules ignored) joins the rounds too: the
same work done then and now.

Usage:
    python benchmarks/speed.py [--rounds 3] [--corpus-dir /tmp/mhalint-speed-corpus] [--quick] [--before PYTHON]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PINS = {"transformers": "5.24.0", "diffusers": "0.42.1", "timm": "1.0.31"}
TORCH_PIN = "2.13.0"
RUFF_PIN = "0.17.6"
CORPUS_FORMAT = 1  # bump when the layout of a built package changes

TARGETS = {  # issue 18 (issue 7 asked for cold <= 1.0x ruff, warm <= 3x grep, one file <= 0.35 s)
    "cold / ruff": (2.0, None),
    "warm / grep": (1.5, None),
    "1 file + wall (s)": (0.25, None),
    "cold peak PSS (MB)": (300.0, None),
}

PLAIN_FILE = '''\
"""A small module with nothing about attention in it: the common pre-commit case."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field


@dataclass
class Settings:
    name: str
    retries: int = 3
    tags: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"{self.name} ({self.retries} retries, tags: {', '.join(self.tags) or 'none'})"


def load(path: str) -> Settings:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return Settings(name=data["name"], retries=int(data.get("retries", 3)), tags=list(data.get("tags", [])))


def main() -> None:
    path = os.environ.get("SETTINGS", "settings.json")
    if os.path.exists(path):
        print(load(path).describe())
    else:
        print("no settings at", path)


if __name__ == "__main__":
    main()
'''


def say(*parts: object) -> None:
    print(*parts, flush=True)


def fail(message: str) -> None:
    say(f"error: {message}")
    sys.exit(2)


def run_text(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


# ---------------------------------------------------------------------------------------------- the corpus

def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def available_versions(pip: list[str], name: str) -> list[str]:
    result = run_text(pip + ["index", "versions", name])
    match = re.search(r"Available versions:\s*(.+)", result.stdout)
    return [v.strip() for v in match.group(1).split(",")] if match else []


def nearest(versions: list[str], pin: str) -> str | None:
    below = [v for v in versions if version_key(v) <= version_key(pin)]
    above = [v for v in versions if version_key(v) > version_key(pin)]
    if below:
        return max(below, key=version_key)
    return min(above, key=version_key) if above else None


def wheel_in(directory: Path, name: str, version: str) -> Path | None:
    normal = re.sub(r"[-_.]+", "_", name).lower()
    for wheel in directory.glob("*.whl"):
        parts = wheel.name.split("-")
        if len(parts) >= 2 and re.sub(r"[-_.]+", "_", parts[0]).lower() == normal and parts[1] == version:
            return wheel
    return None


def download(pip: list[str], name: str, pin: str, downloads: Path) -> tuple[str, Path]:
    """The wheel of name==pin, or of the nearest available version (said loudly)."""
    downloads.mkdir(parents=True, exist_ok=True)
    for version in (pin, None):
        if version is None:
            version = nearest(available_versions(pip, name), pin)
            if version is None:
                fail(f"no version of {name} is available from pip")
            say(f"  !!! {name}=={pin} could not be downloaded; USING THE NEAREST AVAILABLE VERSION {name}=={version}")
        wheel = wheel_in(downloads, name, version)
        if wheel is not None:
            return version, wheel
        say(f"  pip download --no-deps --only-binary :all: {name}=={version}")
        result = run_text(pip + ["download", "--no-deps", "--only-binary", ":all:", f"{name}=={version}",
                                 "-d", str(downloads)])
        wheel = wheel_in(downloads, name, version)
        if wheel is not None:
            return version, wheel
        if version != pin:
            fail(f"pip download {name}=={version} failed:\n{result.stderr[-2000:]}")
    raise AssertionError


def count_tree(root: Path) -> tuple[int, int]:
    files = lines = 0
    for path in root.rglob("*.py"):
        files += 1
        lines += path.read_bytes().count(b"\n")
    return files, lines


def finish_package(target: Path, name: str, version: str, pin: str, source: str) -> dict:
    files, lines = count_tree(target)
    record = {"name": name, "version": version, "pin": pin, "source": source, "files": files, "lines": lines,
              "format": CORPUS_FORMAT}
    (target / ".complete.json").write_text(json.dumps(record))
    return record


def built(target: Path, version: str) -> dict | None:
    marker = target / ".complete.json"
    if marker.exists():
        record = json.loads(marker.read_text())
        if record.get("version") == version and record.get("format") == CORPUS_FORMAT:
            return record
    return None


def build_wheel_package(pip: list[str], name: str, pin: str, corpus: Path) -> dict:
    # A wheel already built from this pin (or from its fallback) is reused without asking pip.
    for existing in sorted(corpus.joinpath("tree").glob(f"{name}-*")):
        record = built(existing, existing.name.split("-", 1)[1])
        if record is not None and record["pin"] == pin:
            return record | {"path": str(existing)}
    version, wheel = download(pip, name, pin, corpus / "downloads")
    target = corpus / "tree" / f"{name}-{version}"
    shutil.rmtree(target, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist()
                   if m.endswith(".py") and not m.split("/", 1)[0].endswith((".dist-info", ".data"))]
        for member in members:
            archive.extract(member, target)
    return finish_package(target, name, version, pin, wheel.name) | {"path": str(target)}


def build_torch_package(python: str, corpus: Path) -> dict:
    # Locate the installed torch without importing it (not here, and not in the child either: find_spec only).
    probe = run_text([python, "-c",
                      "import importlib.util, importlib.metadata, os\n"
                      "spec = importlib.util.find_spec('torch')\n"
                      "print(os.path.dirname(spec.origin) if spec else '')\n"
                      "print(importlib.metadata.version('torch') if spec else '')"])
    lines = probe.stdout.splitlines()
    if probe.returncode != 0 or len(lines) < 2 or not lines[0]:
        fail(f"torch is not installed for {python}: {probe.stderr[-500:]}")
    torch_dir, version = Path(lines[0]), lines[1].split("+", 1)[0]
    if version != TORCH_PIN:
        say(f"  !!! installed torch is {lines[1]}, not {TORCH_PIN}; USING THE INSTALLED torch=={version}")
    target = corpus / "tree" / f"torch-{version}"
    record = built(target, version)
    if record is not None:
        return record | {"path": str(target)}
    shutil.rmtree(target, ignore_errors=True)
    for source in torch_dir.rglob("*.py"):
        destination = target / "torch" / source.relative_to(torch_dir)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
    return finish_package(target, "torch", version, TORCH_PIN, f"installed wheel at {torch_dir}") | {
        "path": str(target)}


def build_corpus(python: str, corpus: Path, quick: bool) -> list[dict]:
    pip = [sys.executable, "-m", "pip"]
    if run_text(pip + ["--version"]).returncode != 0:
        pip = [python, "-m", "pip"]
    names = ["timm"] if quick else list(PINS)
    packages = [build_wheel_package(pip, name, PINS[name], corpus) for name in names]
    if not quick:
        packages.append(build_torch_package(python, corpus))
    return packages


def ensure_ruff(corpus: Path, pin: str) -> Path:
    venv = corpus / "ruff-venv"
    ruff = venv / "bin" / "ruff"
    if ruff.exists():
        return ruff
    say(f"  python -m venv {venv}; pip install ruff=={pin}")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    result = run_text([str(venv / "bin" / "python"), "-m", "pip", "install", f"ruff=={pin}"])
    if result.returncode != 0:
        say(f"  !!! ruff=={pin} could not be installed; installing the newest ruff instead")
        result = run_text([str(venv / "bin" / "python"), "-m", "pip", "install", "ruff"])
    if result.returncode != 0 or not ruff.exists():
        fail(f"pip install ruff failed:\n{result.stderr[-2000:]}")
    return ruff


# ---------------------------------------------------------------------------------------------- measuring

@dataclass
class Run:
    wall: float
    maxrss_mb: float  # ru_maxrss of the child (the largest single process in its tree)
    tree_rss_mb: float  # largest sampled sum of resident sets of the child and its descendants
    tree_pss_mb: float  # the same with proportional set sizes (shared pages counted once)
    cpu: float  # user + system seconds of the child and its waited-for descendants
    code: int
    stdout: str
    stderr: str


@dataclass
class Command:
    name: str
    argv: list[str]
    ok_codes: tuple[int, ...]
    env: dict[str, str] | None = None
    prepare: object = None  # called before each measured run; returns extra environment variables
    runs: list[Run] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _pss_bytes(pid: int) -> int:
    """Proportional set size: shared pages (a pool's copy-on-write image) divided among their sharers."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _parents() -> dict[int, list[int]]:
    """Children of every process, from /proc/*/stat (kernels without /proc/PID/task/TID/children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    return children


class TreeSampler(threading.Thread):
    """Samples the summed RSS of a process and all its descendants until stopped: the resident sets every 0.1 s,
    the process tree every second (a scan of /proc costs ~20 ms here, which a 2-core machine should not pay
    ten times a second; pool workers live for the whole run)."""

    def __init__(self, pid: int, interval: float = 0.1, rescan_every: int = 10):
        super().__init__(daemon=True)
        self.pid, self.interval, self.rescan_every = pid, interval, rescan_every
        self.peak = self.peak_pss = 0
        self.done = threading.Event()

    def tree(self) -> list[int]:
        children = _parents()
        found, stack = [], [self.pid]
        while stack:
            pid = stack.pop()
            if pid not in found:
                found.append(pid)
                stack.extend(children.get(pid, ()))
        return found

    def run(self) -> None:
        samples = 0
        pids = [self.pid]
        while not self.done.is_set():
            if samples % self.rescan_every == 1:  # the first scan after 0.1 s: workers have started by then
                pids = self.tree()
            self.peak = max(self.peak, sum(_rss_bytes(pid) for pid in pids))
            self.peak_pss = max(self.peak_pss, sum(_pss_bytes(pid) for pid in pids))
            samples += 1
            self.done.wait(self.interval)


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> Run:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        sampler = TreeSampler(process.pid)
        sampler.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:  # interrupted (Ctrl-C, SIGTERM): take the child down with us
            process.kill()
            process.wait()
            sampler.done.set()
            raise
        wall = time.perf_counter() - start
        sampler.done.set()
        sampler.join()
        process.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(wall=wall, maxrss_mb=usage.ru_maxrss / 1024, tree_rss_mb=sampler.peak / 2**20,
                   tree_pss_mb=sampler.peak_pss / 2**20,
                   cpu=usage.ru_utime + usage.ru_stime, code=code,
                   stdout=out.read().decode("utf-8", "replace"), stderr=err.read().decode("utf-8", "replace"))


def execute(command: Command, cwd: Path) -> Run:
    env = dict(os.environ if command.env is None else command.env)
    if command.prepare is not None:
        env.update(command.prepare())
    run = measure(command.argv, env, cwd)
    if run.code not in command.ok_codes:
        message = f"{command.name}: exit {run.code}: {' '.join(command.argv)}\n{run.stderr[-3000:]}"
        command.errors.append(message)
        say(f"  !!! {message}")
    return run


# ---------------------------------------------------------------------------------------------- helpers

def trigger_words(python: str, cwd: Path) -> list[str]:
    result = run_text([python, "-c",
                       "from mhalint.rule import load_rules\n"
                       "words = set()\n"
                       "for rule in load_rules().values(): words.update(rule.triggers)\n"
                       "print('\\n'.join(sorted(words)))"], cwd=cwd)
    if result.returncode != 0 or not result.stdout.strip():
        fail(f"could not read the rules' trigger words:\n{result.stderr[-2000:]}")
    return result.stdout.splitlines()  # a pattern may hold spaces (`(?<!def )`)


def imported(python: str, argv_tail: list[str], cwd: Path, env: dict[str, str]) -> dict[str, bool]:
    """Which heavy modules `python -X importtime -m mhalint ARGS` imports (importtime lines end in the name)."""
    result = run_text([python, "-X", "importtime", "-m", "mhalint"] + argv_tail, cwd=cwd, env=env)
    modules = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
               if line.startswith("import time:")}
    return {name: any(m == name or m.startswith(name + ".") for m in modules) for name in ("libcst", "torch")}


def summary_files(output: str) -> str:
    match = re.search(r"\((\d+) files? checked", output)
    return match.group(1) if match else "?"


def findings_of(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(r".+:\d+:\d+: [A-Z]+\d+ ", line)]


def mhalint_folders(python: str, env: dict[str, str], cwd: Path) -> list[Path]:
    """The folders the measured mhalint and its rules are loaded from."""
    result = run_text([python, "-c",
                       "import importlib.util\n"
                       "for name in ('mhalint', 'mhalint.rules'):\n"
                       "    spec = importlib.util.find_spec(name)\n"
                       "    print(list(spec.submodule_search_locations)[0] if spec else '')"], env=env, cwd=cwd)
    return [Path(line) for line in result.stdout.splitlines() if line] if result.returncode == 0 else []


def compile_bytecode(python: str, folders: list[Path]) -> str:
    """Byte-compile the measured sources, as pip does when it installs a package. An editable checkout changed
    since its last import, on a machine with PYTHONDONTWRITEBYTECODE=1 (this one), would otherwise compile
    every changed module at each start: 55 ms of a 0.33 s single-file run."""
    result = run_text([python, "-m", "compileall", "-q", *map(str, folders)])
    return "byte-compiled" if result.returncode == 0 else f"byte-compiling failed: {result.stderr.strip()[:200]}"


def mhalint_sources(python: str, env: dict[str, str], cwd: Path) -> str:
    """Where the measured mhalint is loaded from and a digest of its sources (the tree may change under a run)."""
    folders = mhalint_folders(python, env, cwd)
    if not folders:
        return "unknown"
    digest = hashlib.sha256()
    count = 0
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
            count += 1
    state = ""
    git = run_text(["git", "-C", str(folders[0]), "rev-parse", "--short", "HEAD"])
    if git.returncode == 0:
        changed = run_text(["git", "-C", str(folders[0]), "status", "--short", "--", "."] +
                           ([str(folders[1])] if len(folders) > 1 else []))
        state = f", git HEAD {git.stdout.strip()} with {len(changed.stdout.splitlines())} changed/untracked paths"
    return f"{folders[0]} ({count} files, sha256 {digest.hexdigest()[:12]}{state})"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def own_rss_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def version_of(argv: list[str], cwd: Path | None = None) -> str:
    try:
        result = run_text(argv, cwd=cwd)
    except OSError:
        return "unknown"
    return (result.stdout or result.stderr).strip().splitlines()[0] if (result.stdout or result.stderr) else "?"


def rule_codes(mhalint: list[str], cwd: Path) -> set[str]:
    """The rule codes an mhalint install has (`mhalint rule --all --output-format json`)."""
    listed = run_text(mhalint + ["rule", "--all", "--output-format", "json"], cwd=cwd)
    if listed.returncode != 0:
        fail(f"`{' '.join(mhalint)} rule --all` failed: {listed.stderr.strip()[-300:]}")
    return {rule["code"] for rule in json.loads(listed.stdout)}


def fmt_s(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.2f}"


# ---------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds of every command [3]")
    parser.add_argument("--corpus-dir", type=Path, default=Path("/tmp/mhalint-speed-corpus"),
                        help="where the corpus, the downloads and ruff's venv are kept [/tmp/mhalint-speed-corpus]")
    parser.add_argument("--quick", action="store_true", help="timm's sources only (for iterating)")
    parser.add_argument("--python", default=None,
                        help="the Python that has mhalint (and torch, for the corpus) [repo's .venv, else this one]")
    parser.add_argument("--ruff-version", default=RUFF_PIN, help=f"ruff installed for the baseline [{RUFF_PIN}]")
    parser.add_argument("--before", metavar="PYTHON", default=None,
                        help="a Python with an earlier mhalint: its cold run joins the interleaved rounds as "
                             "`before`, and the two cold runs are compared (issue 35: no slower than before)")
    options = parser.parse_args(argv)
    if options.rounds < 1:
        parser.error("--rounds must be at least 1")

    python = options.python or (str(REPO / ".venv" / "bin" / "python")
                                if (REPO / ".venv" / "bin" / "python").exists() else sys.executable)
    script = Path(python).parent / "mhalint"
    mhalint = [str(script)] if script.exists() else [python, "-m", "mhalint"]
    corpus = options.corpus_dir.resolve()
    corpus.mkdir(parents=True, exist_ok=True)
    work = corpus / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()

    started = datetime.datetime.now().astimezone()
    load_start = load()
    say(f"mhalint speed benchmark, {started:%Y-%m-%d %H:%M %Z}{' (--quick: timm only)' if options.quick else ''}")
    say(f"load average at start: {load_start}")

    sources_start = mhalint_sources(python, dict(os.environ), work)
    say(f"mhalint measured: {sources_start}; "
        f"{compile_bytecode(python, mhalint_folders(python, dict(os.environ), work))}")
    say("corpus:")
    packages = build_corpus(python, corpus, options.quick)
    paths = [p["path"] for p in packages]
    total_files = sum(p["files"] for p in packages)
    total_lines = sum(p["lines"] for p in packages)
    for p in packages:
        pinned = "" if p["version"] == p["pin"] else f"  (!!! pinned {p['pin']}, not available)"
        say(f"  {p['name'] + '==' + p['version']:<22} {p['files']:>6,} files {p['lines']:>10,} lines"
            f"   from {p['source']}{pinned}")
    say(f"  {'total':<22} {total_files:>6,} files {total_lines:>10,} lines   in {corpus / 'tree'}")

    ruff = ensure_ruff(corpus, options.ruff_version)
    words = trigger_words(python, work)
    pattern = "|".join(f"(?:{word})" for word in words)  # the rules' triggers are (Perl-style) regexes

    help_text = run_text(mhalint + ["check", "--help"], cwd=work).stdout
    no_cache = "--no-cache" in help_text
    jobs_option = next((m.group(0) for m in re.finditer(r"--(jobs|workers|processes|threads)\b", help_text)), None)

    base_env = dict(os.environ)
    base_env.pop("MHALINT_CACHE_DIR", None)
    grep_env = base_env | {"LC_ALL": "C"}

    scratch = work / "cache-scratch"
    scratch.mkdir()
    cold_caches: list[Path] = []

    def fresh_cache() -> dict[str, str]:
        directory = Path(tempfile.mkdtemp(prefix="cold-", dir=scratch))
        cold_caches.append(directory)
        return {"MHALINT_CACHE_DIR": str(directory)}

    warm_cache = work / "cache-warm"
    concise = ["--output-format", "concise"]
    cold_argv = mhalint + ["check"] + (["--no-cache"] if no_cache else []) + ["--exit-zero"] + concise + paths

    single = work / "single"
    single.mkdir()
    with_attention = single / "with_attention.py"
    shutil.copyfile(REPO / "examples" / "mha001_batch_first_default_bad.py", with_attention)
    without_attention = single / "plain.py"
    without_attention.write_text(PLAIN_FILE)
    if re.search(pattern, PLAIN_FILE):
        fail("the plain file contains a trigger word")
    single_argv = mhalint + ["check"] + (["--no-cache"] if no_cache else []) + concise

    commands = [
        Command("ruff", [str(ruff), "check", "--no-cache", "--isolated", "--select", "PLW1510", "--exit-zero"]
                + paths, (0, 1), base_env),
        Command("grep", ["grep", "-rlP", pattern] + paths, (0, 1), grep_env),
        Command("cold", cold_argv, (0, 1), base_env, fresh_cache),
        Command("warm", mhalint + ["check", "--exit-zero"] + concise + paths, (0, 1),
                base_env | {"MHALINT_CACHE_DIR": str(warm_cache)}),
        Command("1 file +", single_argv + [str(with_attention)], (0, 1), base_env, fresh_cache),
        Command("1 file -", single_argv + [str(without_attention)], (0, 1), base_env, fresh_cache),
    ]
    if options.before:
        before_script = Path(options.before).parent / "mhalint"
        before = [str(before_script)] if before_script.exists() else [options.before, "-m", "mhalint"]
        commands.append(Command("before", before + cold_argv[len(mhalint):], (0, 1), base_env, fresh_cache))
        added = sorted(rule_codes(mhalint, work) - rule_codes(before, work))
        if added:  # the rules added since: the same work is compared without them, too
            commands.append(Command("same rules", mhalint + ["check", "--ignore", ",".join(added)]
                                    + cold_argv[len(mhalint) + 1:],
                                    (0, 1), base_env, fresh_cache))
    by_name = {command.name: command for command in commands}

    say("tools:")
    libcst_version = version_of([python, "-c", "import importlib.metadata as m; print(m.version('libcst'))"], work)
    say(f"  {version_of(mhalint + ['--version'], work)} ({' '.join(mhalint)}), libcst {libcst_version}, "
        f"{version_of([python, '--version'])}")
    say(f"  {version_of([str(ruff), '--version'])} ({ruff})")
    say(f"  {version_of(['grep', '--version'])}")
    say(f"  trigger words: {', '.join(words)}")
    no_cache_note = "NOT in `mhalint check --help`: cold runs use a fresh MHALINT_CACHE_DIR each"
    say(f"  mhalint --no-cache: {'supported' if no_cache else no_cache_note}")
    say(f"  mhalint jobs option: {jobs_option or 'none in `mhalint check --help` (no serial/parallel comparison)'}")
    say("commands:")
    for command in commands:
        shown = " ".join(a if len(a) < 60 else a[:57] + "..." for a in command.argv[:12])
        say(f"  {command.name:<9} {shown}{' ...' if len(command.argv) > 12 else ''}")

    # Files each tool sees, and the page cache: one unmeasured pass of grep and ruff reads the whole tree.
    say("warm-up (unmeasured; fills the page cache):")
    shown = run_text([str(ruff), "check", "--isolated", "--show-files"] + paths, env=base_env)
    ruff_files = sum(1 for line in shown.stdout.splitlines() if line.strip().endswith(".py"))
    grep_run = execute(by_name["grep"], work)
    grep_hits = len(grep_run.stdout.splitlines())
    execute(by_name["ruff"], work)
    say(f"  files ruff sees: {ruff_files:,}; files with a trigger word (grep -l): {grep_hits:,} of {total_files:,}")
    shutil.rmtree(warm_cache, ignore_errors=True)
    fill = execute(by_name["warm"], work)
    say(f"  cache fill run (mhalint with an empty MHALINT_CACHE_DIR): {fmt_s(fill.wall)} s, "
        f"{summary_files(fill.stdout)} files checked, {len(findings_of(fill.stdout))} findings")
    if warm_cache.exists():
        cache_files = [p for p in warm_cache.rglob("*") if p.is_file()]
        say(f"  cache dir after the fill: {len(cache_files)} files, "
            f"{sum(p.stat().st_size for p in cache_files) / 2**20:.1f} MB")
    else:
        say("  cache dir after the fill: not created (mhalint has no cache yet: warm = cold)")

    say(f"measuring {options.rounds} rounds (order rotates each round):")
    loads = [os.getloadavg()[0]]
    for index in range(options.rounds):
        order = commands[index % len(commands):] + commands[:index % len(commands)]
        for command in order:
            command.runs.append(execute(command, work))
        loads.append(os.getloadavg()[0])
        say(f"  round {index + 1}: " + ", ".join(f"{c.name} {fmt_s(c.runs[-1].wall)}" for c in commands)
            + f"   (load {load()})")

    serial = None
    if jobs_option:
        serial_argv = cold_argv[:2] + [jobs_option, "1"] + cold_argv[2:]
        serial = execute(Command("cold serial", serial_argv, (0, 1), base_env, fresh_cache), work)
        say(f"  cold serial ({jobs_option} 1), once: {fmt_s(serial.wall)} s, cpu {serial.cpu:.2f} s, "
            f"peak {serial.maxrss_mb:.0f} MB "
            f"(parallel cold median: {fmt_s(statistics.median(r.wall for r in by_name['cold'].runs))} s)")

    # -------------------------------------------------------------------------------------- the report
    ended = datetime.datetime.now().astimezone()
    say("")
    say(f"== mhalint speed, {ended:%Y-%m-%d} ==")
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    say(f"machine: {affinity} cores usable (nproc; {os.cpu_count()} online), {cpu_model()}, {memory_total()} RAM, "
        f"{platform.system()} {platform.release()}")
    say(f"load average: start {load_start}, end {load()} (1-min max during rounds {max(loads):.2f})")
    sources_end = mhalint_sources(python, dict(os.environ), work)
    say(f"mhalint: {sources_end}" if sources_end == sources_start else
        f"!!! mhalint's sources CHANGED during the run: the figures mix versions\n    start {sources_start}\n"
        f"    end   {sources_end}")
    say(f"corpus: {total_files:,} files, {total_lines:,} lines ("
        + ", ".join(f"{p['name']} {p['version']}" for p in packages) + ")")
    say("")
    header = (f"{'command':<10} {'median s':>9} {'min s':>8} {'max s':>8} {'cpu s':>7} {'RSS MB':>7} {'tree RSS':>8}"
              f" {'tree PSS':>8}  all runs (s)")
    say(header)
    say("-" * len(header))
    medians: dict[str, float] = {}
    for command in commands:
        if not command.runs:
            continue
        walls = [run.wall for run in command.runs]
        medians[command.name] = statistics.median(walls)
        say(f"{command.name:<10} {fmt_s(medians[command.name]):>9} {fmt_s(min(walls)):>8} {fmt_s(max(walls)):>8} "
            f"{statistics.median(r.cpu for r in command.runs):>7.2f} "
            f"{max(r.maxrss_mb for r in command.runs):>7.0f} {max(r.tree_rss_mb for r in command.runs):>8.0f} "
            f"{max(r.tree_pss_mb for r in command.runs):>8.0f}  "
            + " ".join(fmt_s(w) for w in walls))
    say("(median/min/max of wall time; cpu: median user+sys of the child tree; RSS MB: max ru_maxrss over the runs,"
        " the largest single process; tree RSS / PSS: max sampled sum over the child and its descendants, of"
        " resident / proportional set sizes: RSS counts pages a pool's workers share once per worker, PSS once)")
    say(f"(ru_maxrss counts the image forked from this script before exec, so {own_rss_mb():.0f} MB, this script's"
        " own peak, is a floor: smaller tools show that figure)")

    cold_pss = max(r.tree_pss_mb for r in by_name["cold"].runs)  # all processes, shared pages counted once
    figures = {
        "cold / ruff": medians["cold"] / medians["ruff"],
        "warm / grep": medians["warm"] / medians["grep"],
        "1 file + wall (s)": medians["1 file +"],
        "cold peak PSS (MB)": cold_pss,
    }
    say("")
    say(f"{'figure':<20} {'value':>8}  target")
    for name, value in figures.items():
        target, stretch = TARGETS[name]
        verdict = "met" if value <= target else f"NOT met ({value / target:.2f}x the target)"
        if stretch is not None:
            verdict += f"; stretch <= {stretch}: {'met' if value <= stretch else 'not met'}"
        say(f"{name:<20} {value:>8.2f}  <= {target}: {verdict}")
    say(f"{'1 file - wall (s)':<20} {medians['1 file -']:>8.2f}  (no target; the file has no trigger word)")
    if options.before:
        cpu = {name: statistics.median(r.cpu for r in by_name[name].runs) for name in ("cold", "before")}
        say(f"{'cold / before':<20} {medians['cold'] / medians['before']:>8.2f}  wall medians; CPU "
            f"{cpu['cold'] / cpu['before']:.2f}; before: {medians['before'] / medians['ruff']:.2f}x ruff, "
            f"{version_of(before + ['--version'], work)} ({options.before})")
        if "same rules" in by_name:
            same = statistics.median(r.cpu for r in by_name["same rules"].runs)
            say(f"{'same rules / before':<20} {medians['same rules'] / medians['before']:>8.2f}  wall medians; CPU "
                f"{same / cpu['before']:.2f}; the cold run without the rules added since "
                f"({by_name['same rules'].argv[by_name['same rules'].argv.index('--ignore') + 1]})")

    import_env = base_env | fresh_cache()
    plain_imports = imported(python, ["check"] + (["--no-cache"] if no_cache else []) + [str(without_attention)],
                             single, import_env)
    attention_imports = imported(python, ["check"] + (["--no-cache"] if no_cache else []) + [str(with_attention)],
                                 single, import_env)
    version_imports = imported(python, ["--version"], single, import_env)
    yes_no = {True: "yes", False: "no"}
    say(f"libcst imported: file without an attention call: {yes_no[plain_imports['libcst']]}"
        f"{'' if not plain_imports['libcst'] else ' (target: no)'}; with one: {yes_no[attention_imports['libcst']]};"
        f" `mhalint --version`: {yes_no[version_imports['libcst']]}")
    say(f"torch imported: file without: {yes_no[plain_imports['torch']]}, with: {yes_no[attention_imports['torch']]},"
        f" `mhalint --version`: {yes_no[version_imports['torch']]} (target: no for all)")

    # -------------------------------------------------------------------------------------- same findings
    # The finding lines (path:line:col: CODE ...) in order; the summary line may say more on a warm run.
    reference_text = by_name["cold"].runs[0].stdout if by_name["cold"].runs else ""
    reference = findings_of(reference_text)
    outputs = {f"cold #{i + 1}": findings_of(r.stdout) for i, r in enumerate(by_name["cold"].runs)}
    outputs["warm fill"] = findings_of(fill.stdout)
    outputs |= {f"warm #{i + 1}": findings_of(r.stdout) for i, r in enumerate(by_name["warm"].runs)}
    if serial is not None:
        outputs[f"cold serial ({jobs_option} 1)"] = findings_of(serial.stdout)
    different = [name for name, lines in outputs.items() if lines != reference]
    say(f"findings: {len(reference)} in {summary_files(reference_text)} checked files; "
        f"cold, warm{', serial' if serial is not None else ''} findings identical: "
        f"{'yes' if not different else 'NO'} ({len(outputs)} outputs compared, concise lines in order)")
    for name in different:
        a, b = set(reference), set(outputs[name])
        say(f"  {name} differs from cold #1: {len(b - a)} lines only in it, {len(a - b)} only in cold #1"
            + ("; same lines in another order" if a == b and len(reference) == len(outputs[name]) else ""))
        for line in sorted(b - a)[:3]:
            say(f"    + {line[:160]}")
        for line in sorted(a - b)[:3]:
            say(f"    - {line[:160]}")
    if no_cache:
        leaked = [p for d in cold_caches for p in d.rglob("*") if p.is_file()]
        say(f"--no-cache runs wrote {len(leaked)} files into their MHALINT_CACHE_DIR"
            + ("" if not leaked else " (expected none)"))

    results = corpus / f"results-{started:%Y%m%d-%H%M%S}.json"
    results.write_text(json.dumps({
        "started": started.isoformat(), "ended": ended.isoformat(), "load_start": load_start, "load_end": load(),
        "cpu": cpu_model(), "cores": affinity, "mhalint": sources_end, "corpus": packages,
        "figures": figures,
        "runs": {c.name: [{"wall": r.wall, "cpu": r.cpu, "maxrss_mb": r.maxrss_mb, "tree_rss_mb": r.tree_rss_mb,
                           "tree_pss_mb": r.tree_pss_mb, "code": r.code} for r in c.runs] for c in commands},
    }, indent=1))
    say(f"(all runs saved in {results})")

    errors = [error for command in commands for error in command.errors]
    if serial is not None and serial.code not in (0, 1):
        errors.append(f"cold serial: exit {serial.code}")
    if errors:
        say(f"\n{len(errors)} command(s) failed; see the messages above.")
        return 1
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
