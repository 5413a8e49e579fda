"""The most that statement slicing could give a cold run, measured against ruff before building it (issue 18).

Issue 18 asks to parse with libcst only the top-level statements that hold a trigger match. No slicing that keeps
findings right parses less than that, so this measures the bound: a child mhalint whose engine sees each analysed
file with every top-level statement that is neither an import nor holds a trigger match blanked out (lines and
columns kept), and CPython's tree of the whole file trimmed to the statements kept, so that nothing is parsed twice
and the libcst parse, positions and analysis see only the trigger statements. The bound is unsound (a value bound
in a blanked statement, a caller, a subclass is not seen), so the findings it changes are printed too.

The floor goes further: the same child with no libcst parse and no analysis at all, each analysed file only
parsed by CPython (the tree the issue would read everything else from). What it leaves is what slicing cannot
reach: start-up, discovery, the first pass (read, prefilter, import index), CPython's parse, the engine's loop.

Measured, interleaved over `--rounds` rounds (the order rotates), wall time and CPU of each child, on
benchmarks/speed.py's corpus and its ruff (run speed.py once first to build them):
  ruff     the baseline, as speed.py runs it
  cold     `mhalint check --no-cache --exit-zero --output-format concise CORPUS`, as shipped
  bound    the same with the trigger-statement slicing above
  floor    the same with CPython's parse in place of the libcst parse and the analysis

Usage:
    python benchmarks/slice_bound.py [--rounds 3] [--corpus-dir /tmp/mhalint-speed-corpus] [--jobs N]
"""

from __future__ import annotations

import argparse
import ast
import bisect
import statistics
import sys
from pathlib import Path

from mhalint.parse.positions import first_lines
from mhalint.parse.source import decode, line_starts

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed  # noqa: E402  (a sibling script, not a package)

_CHILD = "--child"  # first argument of this script run as a patched mhalint, followed by "bound" or "floor"


def sliced(source: bytes, prefilter, trimmed: dict[str, ast.Module]) -> bytes:
    """`source` with the top-level statements that are neither imports nor hold a trigger match blanked out (each
    line's break kept; comments between statements, an encoding declaration among them, stay); `trimmed` gets
    CPython's tree of the whole file cut to the statements kept, under the sliced text."""
    try:
        text, encoding = decode(source)
        syntax = ast.parse(text)
    except (UnicodeDecodeError, LookupError, SyntaxError, ValueError, RecursionError, MemoryError):
        return source  # the engine reports it as it stands
    breaks = line_starts(source)
    matched = {bisect.bisect_right(breaks, match.start()) for match in prefilter.code_matches(source)}
    kept_lines: set[int] = set()
    dropped_lines: set[int] = set()
    for first, statement in zip(first_lines(syntax), syntax.body):
        span = range(first, statement.end_lineno + 1)
        keep = isinstance(statement, (ast.Import, ast.ImportFrom)) or not matched.isdisjoint(span)
        (kept_lines if keep else dropped_lines).update(span)
    syntax.body = [statement for statement in syntax.body if statement.lineno in kept_lines]
    blank = dropped_lines - kept_lines  # a line two statements share stays with the one kept
    starts = line_starts(text)
    lines = (text[start:end] for start, end in zip(starts, [*starts[1:], len(text)]))
    text = "".join(line[len(line.rstrip("\r\n")):] if number in blank else line
                   for number, line in enumerate(lines, 1))
    trimmed[text] = syntax
    return text.encode(encoding)


def run_patched_mhalint(variant: str, argv: list[str]) -> None:
    """mhalint's console entry (it exits) with the engine patched as `variant` says: this script's child. Its
    process pool forks, so the workers run the patched engine too."""
    from mhalint.cli import main as cli
    from mhalint.run import engine
    check_within, python_parse = engine.Checker._check_within, engine._python_parse
    trimmed: dict[str, ast.Module] = {}

    def check_sliced(self, source, *args, **kwargs):
        return check_within(self, sliced(source, self.prefilter, trimmed), *args, **kwargs)

    def parse_once(text, path, limits):
        syntax = trimmed.pop(text, None)
        return syntax if syntax is not None else python_parse(text, path, limits)

    def parse_only(self, source, path, result, limits, findings, reuse=None):
        text, _ = engine.decode(source)
        python_parse(text, path, limits)
        return []

    if variant == "bound":
        engine.Checker._check_within, engine._python_parse = check_sliced, parse_once
    else:
        engine.Checker._check_within = parse_only
    sys.argv = ["mhalint", *argv]
    cli.console()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds of every command [3]")
    parser.add_argument("--corpus-dir", type=Path, default=Path("/tmp/mhalint-speed-corpus"),
                        help="speed.py's corpus folder, with tree/ and ruff-venv/ [/tmp/mhalint-speed-corpus]")
    parser.add_argument("--jobs", type=int, default=None, help="passed to mhalint as --jobs [its default]")
    options = parser.parse_args(argv)
    tree, ruff = options.corpus_dir / "tree", options.corpus_dir / "ruff-venv" / "bin" / "ruff"
    if not tree.is_dir() or not ruff.exists():
        speed.fail(f"no corpus or ruff in {options.corpus_dir}: run benchmarks/speed.py first")
    tail = ["check", "--no-cache", "--exit-zero", "--output-format", "concise", str(tree)]
    tail += ["--jobs", str(options.jobs)] if options.jobs else []
    commands = [
        speed.Command("ruff", [str(ruff), "check", "--no-cache", "--isolated", "--select", "PLW1510",
                               "--exit-zero", str(tree)], (0,)),
        speed.Command("cold", [sys.executable, "-m", "mhalint", *tail], (0,)),
        speed.Command("bound", [sys.executable, __file__, _CHILD, "bound", *tail], (0,)),
        speed.Command("floor", [sys.executable, __file__, _CHILD, "floor", *tail], (0,)),
    ]
    for round_number in range(options.rounds):
        turn = round_number % len(commands)
        for command in commands[turn:] + commands[:turn]:
            command.runs.append(speed.execute(command, options.corpus_dir))
    if any(command.errors for command in commands):
        return 1
    ruff_wall = statistics.median(run.wall for run in commands[0].runs)
    speed.say(f"{'command':<8}{'median s':>10}{'cpu s':>8}{'x ruff':>8}   all runs (s)")
    for command in commands:
        walls = [run.wall for run in command.runs]
        speed.say(f"{command.name:<8}{statistics.median(walls):>10.2f}"
                  f"{statistics.median(run.cpu for run in command.runs):>8.2f}"
                  f"{statistics.median(walls) / ruff_wall:>8.2f}   {' '.join(f'{w:.2f}' for w in walls)}")
    cold, bound = (set(speed.findings_of(command.runs[-1].stdout)) for command in commands[1:3])
    speed.say(f"findings: cold {len(cold)}, bound {len(bound)}; only cold: {len(cold - bound)}, "
              f"only bound: {len(bound - cold)}")
    for line in sorted(cold ^ bound):
        speed.say(f"  {'cold ' if line in cold else 'bound'}  {line}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == [_CHILD] and sys.argv[2:3] in (["bound"], ["floor"]):
        run_patched_mhalint(sys.argv[2], sys.argv[3:])
    sys.exit(main())
