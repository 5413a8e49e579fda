"""What hand-written attention would cost the prefilter: whole files against the functions that hold it (issue 36).

Hand-written attention has no torch name of its own to trigger on: it is `masked_fill`, `softmax`, a product and
a `view` that count the heads, words that appear all over a deep-learning code base. Before a rule for one of its
families is given a trigger, this measures what that trigger would add to a cold run, on benchmarks/speed.py's
corpus (run speed.py once to build it) or any tree:

  files      the files whose code (not comments or strings, as the prefilter reads it) holds every word of the
             candidate and that no enabled rule's trigger matches today: what a file-level trigger adds to the
             files libcst parses, with their lines and characters, and those characters against the characters
             of the files the triggers match today (what a cold run parses with libcst);
  functions  the innermost functions (methods included) of those files whose own code holds every word: what a
             function-level parse (issue 37's demand-driven parse) would add, with their lines and characters.

A candidate is a list of regular expressions that must all match (`--candidate 'masked_fill' 'softmax'`); with
none given, the script measures the families of issue 36 that have labels in benchmarks/handwritten-labels.jsonl.
Standard library and mhalint only; no file is executed.

Usage:
    python benchmarks/handwritten_triggers.py [TREE] [--candidate WORD ...]
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from pathlib import Path

from mhalint.rule import load_rules
from mhalint.run.prefilter import Prefilter

DEFAULT_TREE = Path("/tmp/mhalint-speed-corpus/tree")
PRODUCT = r"@|\bmatmul\b|\bbmm\b|\beinsum\b"
CANDIDATES = {  # the words a function of each family holds
    "masked_fill, causal_direction: masked_fill and softmax": ("masked_fill", r"\bsoftmax\b"),
    "softmax_axis: softmax and a product": (r"\bsoftmax\b", PRODUCT),
    "head_split: view/reshape, heads and a product": (r"\.(?:view|reshape)\(", "head", PRODUCT),
}


def holds_all(words: list[Prefilter], text: bytes) -> bool:
    return all(word.matches(text) for word in words)


def innermost_functions(source: bytes, words: list[Prefilter]) -> list[bytes]:
    """The text of each function whose own lines hold every word while no function nested in it does."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = source.splitlines(keepends=True)

    def text(node: ast.AST) -> bytes:
        return b"".join(lines[node.lineno - 1:node.end_lineno])

    def found(node: ast.AST) -> list[bytes]:
        inner = [piece for child in ast.iter_child_nodes(node) for piece in found(child)]
        if inner or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return inner
        own = text(node)
        return [own] if holds_all(words, own) else []

    return found(tree)


def measure(tree: Path, words: list[str], today: Prefilter) -> dict[str, int]:
    matchers = [Prefilter([word]) for word in words]
    counts = dict.fromkeys(("files", "lines", "chars", "today chars", "functions", "function lines",
                            "function chars"), 0)
    for folder, _, names in os.walk(tree):
        for name in names:
            if not name.endswith(".py"):
                continue
            raw = (Path(folder) / name).read_bytes()
            if today.matches(raw):
                counts["today chars"] += len(raw)
                continue
            if not holds_all(matchers, raw):
                continue
            counts["files"] += 1
            counts["lines"] += raw.count(b"\n")
            counts["chars"] += len(raw)
            for function in innermost_functions(raw, matchers):
                counts["functions"] += 1
                counts["function lines"] += function.count(b"\n")
                counts["function chars"] += len(function)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", nargs="?", type=Path, default=DEFAULT_TREE)
    parser.add_argument("--candidate", nargs="+", metavar="WORD", help="regular expressions that must all match")
    options = parser.parse_args(argv)
    if not options.tree.is_dir():
        print(f"{options.tree}: no such directory (python benchmarks/speed.py builds the default corpus)",
              file=sys.stderr)
        return 2
    today = Prefilter(pattern for rule in load_rules().values() for pattern in rule.triggers)
    candidates = {" and ".join(options.candidate): tuple(options.candidate)} if options.candidate else CANDIDATES
    print(f"{options.tree}: files no trigger matches today whose code holds every word, and their innermost "
          f"functions that do")
    print(f"{'candidate':<50} {'files':>6} {'lines':>8} {'chars':>11} {'x today':>8} {'functions':>9} "
          f"{'lines':>7} {'chars':>10} {'x today':>8}")
    for label, words in candidates.items():
        counts = measure(options.tree, list(words), today)
        share = counts["chars"] / max(counts["today chars"], 1)
        function_share = counts["function chars"] / max(counts["today chars"], 1)
        print(f"{label[:50]:<50} {counts['files']:>6,} {counts['lines']:>8,} {counts['chars']:>11,} {share:>8.2f} "
              f"{counts['functions']:>9,} {counts['function lines']:>7,} {counts['function chars']:>10,} "
              f"{function_share:>8.2f}")
    print("(x today: the characters against those of the files today's triggers match, which a cold run parses "
          "with libcst)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
