"""benchmarks/handwritten_triggers.py counts what it says: files no trigger matches today whose code (not comments
or strings) holds every word, and the innermost functions that hold them all."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mhalint.rule import load_rules
from mhalint.run.prefilter import Prefilter

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "handwritten_triggers.py"

HAND_WRITTEN = '''\
import torch


class Attention(torch.nn.Module):
    def forward(self, q, k, v, mask):
        scores = q @ k.transpose(-2, -1)

        def fill(s):
            return s.masked_fill(mask == 0, -1e9)

        return torch.softmax(fill(scores), dim=-1) @ v

    def other(self, x):
        return x.masked_fill(x > 0, 0)


def apart(x, mask):
    y = x.masked_fill(mask, float("-inf"))
    return y.softmax(-1)
'''

IN_PROSE = '''\
def f(x):
    # masked_fill then softmax, in a comment
    return "masked_fill softmax"
'''

MATCHED_TODAY = '''\
from torch import nn


def g(x, mask):
    attn = nn.MultiheadAttention(8, 2)
    return x.masked_fill(mask, -1e9).softmax(-1)
'''


def _script():
    spec = importlib.util.spec_from_file_location("handwritten_triggers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _today() -> Prefilter:
    return Prefilter(pattern for rule in load_rules().values() for pattern in rule.triggers)


def test_files_and_innermost_functions_are_counted(tmp_path):
    for name, text in (("hand.py", HAND_WRITTEN), ("prose.py", IN_PROSE), ("mha.py", MATCHED_TODAY)):
        (tmp_path / name).write_text(text)
    counts = _script().measure(tmp_path, ["masked_fill", r"\bsoftmax\b"], _today())
    assert counts["files"] == 1  # not the one in prose, not the one today's triggers match
    assert counts["lines"] == HAND_WRITTEN.count("\n")
    assert counts["today chars"] == len(MATCHED_TODAY.encode())
    # `forward` (its nested `fill` holds masked_fill alone, so forward is the innermost holding both) and `apart`;
    # `other` has no softmax
    assert counts["functions"] == 2
    assert counts["function lines"] == 7 + 3


def test_the_innermost_function_is_counted_once(tmp_path):
    nested = "def outer(x, m):\n    def inner(y):\n        return y.masked_fill(m, 0).softmax(-1)\n    return inner(x)\n"
    (tmp_path / "nested.py").write_text(nested)
    counts = _script().measure(tmp_path, ["masked_fill", r"\bsoftmax\b"], _today())
    assert (counts["files"], counts["functions"], counts["function lines"]) == (1, 1, 2)


def test_the_script_prints_one_row_per_candidate(tmp_path, capsys):
    (tmp_path / "hand.py").write_text(HAND_WRITTEN)
    assert _script().main([str(tmp_path), "--candidate", "masked_fill", r"\bsoftmax\b"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("masked_fill and")]
    assert len(rows) == 1 and rows[0].split()[3] == "1"  # the label's three words, then the file count


def test_a_missing_tree_is_refused(tmp_path, capsys):
    assert _script().main([str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
