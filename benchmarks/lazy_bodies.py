"""Function bodies parsed on demand give the tree of a whole parse, on every file of a tree (issue 37).

For each Python file CPython parses: libcst's whole parse, then mhalint.parse.lazy_bodies' shell with every body read
afterwards; the two trees must generate the same code and be equal node for node (libcst's `deep_equals`). The
script prints the files that differ, and the seconds of the three kinds of parse (whole, shell, bodies alone),
measured in this run: the shell against the whole parse is what a run saves when no analysis reads a body.

Usage:
    python benchmarks/lazy_bodies.py [TREE]   (default /tmp/mhalint-speed-corpus/tree; build it with speed.py)

Exit status: 1 when a file's trees differ, else 0.
"""

from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

import libcst

from mhalint.parse import lazy_bodies
from mhalint.parse.trusted_parse import unvalidated_nodes

DEFAULT_TREE = Path("/tmp/mhalint-speed-corpus/tree")


def main() -> int:
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_TREE
    if not tree.is_dir():
        sys.exit(f"{tree}: no such directory (python benchmarks/speed.py builds the default corpus)")
    seconds = {"whole": 0.0, "shell": 0.0, "bodies": 0.0}
    files = differ = pending = 0
    for path in sorted(tree.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
            syntax = ast.parse(text)
            start = time.perf_counter()
            with unvalidated_nodes():
                whole = libcst.parse_module(text)
        except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, libcst.ParserSyntaxError):
            continue  # what mhalint reports as MHA900/MHA901 is not parsed at all
        middle = time.perf_counter()
        shell = lazy_bodies.parse(text, syntax)
        end = time.perf_counter()
        pending += len(shell.pending)
        shell.parse_all()
        seconds["whole"] += middle - start
        seconds["shell"] += end - middle
        seconds["bodies"] += time.perf_counter() - end
        files += 1
        if shell.module.code != text or not shell.module.deep_equals(whole):
            differ += 1
            print(f"differs: {path}")
    print(f"{files:,} files, {pending:,} bodies left out of the shells; trees that differ: {differ}")
    print(f"libcst seconds: whole parse {seconds['whole']:.1f}, shell {seconds['shell']:.1f} "
          f"({seconds['shell'] / max(seconds['whole'], 1e-9):.0%} of whole), every body alone {seconds['bodies']:.1f}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
