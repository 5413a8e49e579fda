"""Soak test on real code: mhalint must check every file of large trees with zero internal errors.

Usage: python benchmarks/soak.py DIR [DIR ...] [--jobs N]

Prints, per tree and in total: files and lines seen, files parsed (containing a trigger word), findings per code,
every file that could not be checked (MHA900/MHA901) with the reason, and every internal error (MHA902) with its
traceback. Exits 1 when there was any internal error. Run it on the speed benchmark's corpus
(benchmarks/speed.py builds it) and on the extracted development corpus.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

from mhalint.configuration.discovery import discover
from mhalint.rule import load_rules
from mhalint.run.diagnostics import INTERNAL_ERROR, PARSE_ERROR, READ_ERROR
from mhalint.run.engine import SOURCES, Checker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=None)
    options = parser.parse_args(argv)
    checker = Checker(list(load_rules().values()))
    totals = collections.Counter()
    internal = 0
    for tree in options.trees:
        files = discover([tree], extensions=SOURCES, respect_gitignore=False).files
        lines = sum(_count_lines(path) for path in files)
        start = time.perf_counter()
        result = checker.check_paths([tree], jobs=options.jobs, respect_gitignore=False)
        elapsed = time.perf_counter() - start
        codes = collections.Counter(f.code for f in result.findings)
        totals.update({"trees": 1, "files": len(files), "lines": lines, **codes})
        internal += result.internal_errors
        print(f"{tree}: {len(files)} files, {lines:,} lines, checked in {elapsed:.1f} s; findings "
              + ", ".join(f"{code} {count}" for code, count in sorted(codes.items())))
        for finding in result.findings:
            if finding.code in (PARSE_ERROR, READ_ERROR):
                print(f"  could not check {finding.location}: {finding.message}")
        for text in result.tracebacks:
            print(f"  INTERNAL ERROR {text}")
    print(f"\nTotal: {totals['trees']} trees, {totals['files']} files, {totals['lines']:,} lines; "
          f"{totals[PARSE_ERROR]} unparsable, {totals[READ_ERROR]} unreadable, {internal} internal errors "
          f"({totals[INTERNAL_ERROR]} MHA902 reports).")
    return 1 if internal else 0


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
