"""benchmarks/slice_bound.py measures what it says: the engine it runs sees only the trigger statements and the
imports, at their own lines and columns, and CPython's tree of the file cut to the same statements."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import libcst as cst

from mhalint.run.prefilter import Prefilter
from mhalint.torchapi import trigger

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "slice_bound.py"

SOURCE = '''\
"""A module."""
import torch
from torch import nn

HEADS = 5


def helper(x):
    return x + 1


@torch.no_grad()
def build():
    return nn.MultiheadAttention(40, HEADS)
x = 1; y = nn.MultiheadAttention(8, 2)
'''


def _slice_bound():
    spec = importlib.util.spec_from_file_location("slice_bound", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_imports_and_trigger_statements_are_left_at_their_lines_and_columns():
    trimmed: dict[str, ast.Module] = {}
    result = _slice_bound().sliced(SOURCE.encode(), Prefilter([trigger("MultiheadAttention")]), trimmed)
    text = result.decode()
    before, after = SOURCE.split("\n"), text.split("\n")
    assert len(after) == len(before)
    kept = {number for number, line in enumerate(after, 1) if line}
    assert kept == {2, 3, 12, 13, 14, 15}  # the imports, the decorated function, the line of two statements
    assert all(after[number - 1] == before[number - 1] for number in kept)
    syntax = trimmed[text]
    assert [statement.lineno for statement in syntax.body] == [2, 3, 13, 15, 15]
    assert ast.dump(syntax) == ast.dump(ast.parse(text))  # the trimmed tree is the sliced text's own tree
    module = cst.MetadataWrapper(cst.parse_module(text))
    positions = module.resolve(cst.metadata.PositionProvider)
    calls = [positions[node].start for node in positions if isinstance(node, cst.Call)
             and cst.ensure_type(node.func, cst.Attribute).attr.value == "MultiheadAttention"]
    assert [(p.line, p.column) for p in calls] == [(14, 11), (15, 11)]


def test_line_breaks_and_the_encoding_are_kept():
    lines = ["# -*- coding: latin-1 -*-\r\n", "import torch\r\n", "NAME = 'caf\xe9'\r\n",
             "m = torch.nn.MultiheadAttention(8, 2)\r\n"]
    trimmed: dict[str, ast.Module] = {}
    result = _slice_bound().sliced("".join(lines).encode("latin-1"), Prefilter([trigger("MultiheadAttention")]),
                                   trimmed)
    assert result.decode("latin-1") == "".join([lines[0], lines[1], "\r\n", lines[3]])
    assert [statement.lineno for statement in trimmed.popitem()[1].body] == [2, 4]


def test_a_file_that_does_not_parse_is_left_as_it_is():
    trimmed: dict[str, ast.Module] = {}
    broken = b"import torch\nnn.MultiheadAttention(\n"
    assert _slice_bound().sliced(broken, Prefilter([trigger("MultiheadAttention")]), trimmed) == broken
    assert trimmed == {}


def _check(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_the_children_run_mhalint_on_sliced_sources_and_on_none(tmp_path: Path):
    """A constant bound outside the trigger statements is unseen by the bound (the odd head count of the MHA004
    example is known only from `N_HEADS = 5`), and the floor analyses nothing, while the shipped engine reports
    it: the patches are in place."""
    example = tmp_path / "odd_heads.py"
    example.write_text((ROOT / "examples" / "mha004_odd_num_heads_bad.py").read_text())
    tail = ["check", "--no-cache", "--exit-zero", "--select", "MHA004", "--output-format", "concise", str(example)]
    shipped = _check([sys.executable, "-m", "mhalint", *tail])
    bound, floor = (_check([sys.executable, str(SCRIPT), "--child", variant, *tail]) for variant in ("bound", "floor"))
    for run in (shipped, bound, floor):
        assert run.returncode == 0 and "1 file checked" in run.stdout, (run.stdout, run.stderr)
    assert "MHA004" in shipped.stdout
    assert "MHA004" not in bound.stdout and "MHA004" not in floor.stdout
