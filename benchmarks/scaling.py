"""How the time and memory to check one file grow with the attention sites in it (issues 16 and 37).

A generated or vendored file with thousands of attention sites must not take quadratic time. For each shape of
generated code below, one file of N attention sites (constructions and calls) is written for every N in
`--sizes` (default 1k, 2k, 4k, 8k) and checked as `mhalint check --no-cache FILE` checks it: an in-process
`Checker.check_paths` with every rule and no cache, but without the file budget, so that the analysis itself is
timed and never cut short as MHA903. Each size is checked `--repeat` times (the fastest counts), and once more
in a forked child whose peak resident memory, less that of a child that checks nothing, is the check's memory.
The script prints the wall and CPU seconds, the memory and the findings per size (they must grow with N: a shape
that stopped being analysed would look fast), then fits the exponent k of t = c * N^k per shape (least squares
of log t on log N), for wall and CPU time and for memory. Before all that, it times the second largest file of
the first shape with the real command line in a subprocess (wall time, peak RSS, with the default budget).

CPU time and memory are what the exit status judges: on a shared machine the wall time also measures the
neighbours.

Shapes (sites per unit of generated code):
  module body   `attnI = nn.MultiheadAttention(64, 8)` statements at module level (1)
  pairs         the same, each followed by its call on one shared input, `outI, _ = attnI(x, x, x)` (2): one
                tensor read by every call
  one line      the same statements on one line, separated by semicolons (1)
  classes       classes that build an nn.MultiheadAttention in __init__ from parameters, call it in forward,
                and are instantiated at module level (2)
  masks         classes that build a padding, a keep and a causal mask and give them to SDPA (twice) and to an
                nn.MultiheadAttention (4): the mask, mask-axes, shape and dataflow analyses run
  rebound       one name bound again and again at module level to an nn.MultiheadAttention that is then called,
                with a shape unpacking and an SDPA call each time (3): a name with N bindings and N reads

Exit status: 1 when a fitted CPU or memory exponent exceeds `--max-exponent` (default 1.2), a size reports no
findings or the command line fails; else 0. The script imports mhalint and its rules, never torch.

Usage:
    python benchmarks/scaling.py [--sizes 1000,2000,4000,8000] [--shapes masks,classes] [--repeat 1]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mhalint.rule import load_rules  # noqa: E402
from mhalint.run.engine import Checker  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nPAD_ID = 0\n"


def module_body(units: int) -> str:
    return HEADER + "".join(f"attn{i} = nn.MultiheadAttention(64, 8)\n" for i in range(units))


def pairs(units: int) -> str:
    return HEADER + "x = torch.randn(10, 4, 64)\n" + "".join(
        f"attn{i} = nn.MultiheadAttention(64, 8)\nout{i}, _ = attn{i}(x, x, x)\n" for i in range(units))


def one_line(units: int) -> str:
    return HEADER + "; ".join(f"attn{i} = nn.MultiheadAttention(64, 8)" for i in range(units)) + "\n"


def classes(units: int) -> str:
    return HEADER + "".join(f'''

class Block{i}(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads)

    def forward(self, x, padding):
        out, _ = self.attn(x, x, x, key_padding_mask=padding)
        return out


block{i} = Block{i}(64, 8)
''' for i in range(units))


def masks(units: int) -> str:
    return HEADER + "".join(f'''

class Encoder{i}(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.heads = heads
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x, lengths, tokens):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        keep = torch.arange(t)[None, :] < lengths[:, None]
        pad = tokens == PAD_ID
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :], is_causal=True)
        out, _ = self.mha(x, x, x, key_padding_mask=pad, attn_mask=causal)
        return out, y, z


encoder{i} = Encoder{i}(64, 8)
''' for i in range(units))


def rebound(units: int) -> str:
    return HEADER + "x = torch.randn(10, 4, 64)\n" + "".join('''attn = nn.MultiheadAttention(64, 8)
out, _ = attn(x, x, x)
B, T, C = x.shape
mask = torch.ones(T, T).tril()
y = F.scaled_dot_product_attention(x, x, x, attn_mask=mask)
''' for _ in range(units))


SHAPES = {"module body": (module_body, 1), "pairs": (pairs, 2), "one line": (one_line, 1), "classes": (classes, 2),
          "masks": (masks, 4), "rebound": (rebound, 3)}


def say(*parts: object) -> None:
    print(*parts, flush=True)


def exponent(sizes: list[int], times: list[float]) -> float:
    """The slope of the least-squares line through (log N, log t)."""
    xs = [math.log(n) for n in sizes]
    ys = [math.log(max(t, 1e-6)) for t in times]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)


def generated(shape: str, sites: int) -> str:
    write, per_unit = SHAPES[shape]
    return write(max(1, round(sites / per_unit)))


def check_in_process(checker: Checker, path: Path, repeat: int) -> tuple[float, float, int]:
    """The fastest wall and CPU seconds of `repeat` runs of `check_paths` on one file, and its findings."""
    best_wall = best_cpu = math.inf
    for _ in range(repeat):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        result = checker.check_paths([path], cache=None, jobs=1)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    engine = [f for f in result.findings if f.code.startswith("MHA90")]
    if engine:
        raise SystemExit(f"{path}: the engine reported {engine[0].code}: {engine[0].message}")
    return best_wall, best_cpu, len(result.findings)


def memory_in_child(checker: Checker, path: Path | None) -> float:
    """The peak resident memory (MB) of a forked child that checks `path` (nothing when None): the child starts
    with this process's pages, so a child that checks nothing gives the baseline to subtract."""
    pid = os.fork()
    if pid == 0:  # the child: check, and leave without running the parent's clean-up
        code = 0
        try:
            if path is not None:
                checker.check_paths([path], cache=None, jobs=1)
        except BaseException:
            code = 1
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{path}: the check in a forked child failed")
    return usage.ru_maxrss / 1024


def check_in_subprocess(path: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MB) and exit status of the real command line on one file."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "mhalint", "check", "--no-cache", "--output-format", "concise",
                                str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=path.parent,
                               env=os.environ | {"NO_COLOR": "1", "PYTHONPATH": str(REPO)})
    _, status, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000,4000,8000", help="comma-separated numbers of sites")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of: {', '.join(SHAPES)}")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; the fastest counts")
    parser.add_argument("--max-exponent", type=float, default=1.2)
    options = parser.parse_args()
    sizes = sorted(int(size) for size in options.sizes.split(","))
    shapes = [shape.strip() for shape in options.shapes.split(",")]
    unknown = [shape for shape in shapes if shape not in SHAPES]
    if unknown or len(sizes) < 2:
        parser.error(f"unknown shape {unknown[0]!r}" if unknown else "give at least two sizes")
    checker = Checker(list(load_rules().values()), unused_noqa=True, budget=None)
    failures: list[str] = []
    exponents: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="mhalint-scaling-") as directory:
        # first, while this process is small: a child's ru_maxrss counts the image it was forked from
        sites = sizes[-2]
        path = Path(directory) / "subprocess.py"
        path.write_text(generated(shapes[0], sites))
        wall, rss, code = check_in_subprocess(path)
        command_line = (f"mhalint check --no-cache on the {shapes[0]} file of {sites} sites: {wall:.2f} s wall, "
                        f"{rss:.0f} MB peak RSS, exit {code}")
        if code not in (0, 1):
            failures.append(f"the command line exited {code}")
        warm_up = Path(directory) / "warm_up.py"  # libcst is imported on the first parse: not in a timing
        warm_up.write_text(generated("masks", 20))
        check_in_process(checker, warm_up, 1)
        # memory first, in children forked while this process is small: one forked after the timed checks would
        # start with their freed heap, and fill it without growing
        baseline = memory_in_child(checker, None)
        grown: dict[tuple[str, int], float] = {}
        for shape in shapes:
            for sites in sizes:
                path = Path(directory) / f"{shape.replace(' ', '_')}_{sites}.py"
                path.write_text(generated(shape, sites))
                grown[shape, sites] = max(memory_in_child(checker, path) - baseline, 0.1)
        say(f"{'shape':<12} {'sites':>6} {'lines':>7} {'wall s':>8} {'CPU s':>8} {'MB':>7} {'findings':>8}")
        for shape in shapes:
            walls, cpus, memory = [], [], []
            for sites in sizes:
                path = Path(directory) / f"{shape.replace(' ', '_')}_{sites}.py"
                wall, cpu, found = check_in_process(checker, path, options.repeat)
                walls.append(wall)
                cpus.append(cpu)
                memory.append(grown[shape, sites])
                lines = path.read_text().count("\n")
                say(f"{shape:<12} {sites:>6} {lines:>7} {wall:>8.2f} {cpu:>8.2f} {memory[-1]:>7.1f} {found:>8}")
                if found == 0:
                    failures.append(f"{shape} with {sites} sites gave no findings: it was not analysed")
                path.unlink()
            exponents[shape] = (exponent(sizes, walls), exponent(sizes, cpus), exponent(sizes, memory))
        say("")
        for shape, (wall_k, cpu_k, memory_k) in exponents.items():
            verdict = "ok" if max(cpu_k, memory_k) <= options.max_exponent else f"OVER {options.max_exponent}"
            say(f"fitted exponent {shape:<12} CPU {cpu_k:5.2f}, memory {memory_k:5.2f} ({verdict}), wall {wall_k:5.2f}")
            for what, k in (("CPU time", cpu_k), ("memory", memory_k)):
                if k > options.max_exponent:
                    failures.append(f"{shape}: {what} grows as N^{k:.2f}")
    say(f"\n{command_line}")
    for failure in failures:
        say(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
