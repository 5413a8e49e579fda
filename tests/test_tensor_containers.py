"""Tensors in containers (issue 35 item 7): a list appended to and then indexed, stacked or concatenated, a dict's
entries and a returned tuple's elements keep the roles of the tensors put in them.

MHA001 end to end both ways (batch-first data is an error naming the shape unpacking, the sequence-first twin is
info, elements that disagree stay a warning that names both), and the shape reader on `torch.stack`'s new axis.
"""

from __future__ import annotations

import textwrap

import pytest
from test_analysis_tensors import B, E, S, U, roles
from test_mha001_layout import assert_batch_first_error, assert_sequence_first_info, assert_unknown_warning

CODE = "MHA001"


def model(run: str, unpack: str = "B, T, C = x.shape", helpers: str = "") -> str:
    """A model with a stack of encoder layers and one attention; forward unpacks its input, then runs `run`."""
    return f"""\
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, d=64, h=8, n=4):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])
        self.attn = nn.MultiheadAttention(d, h)
{textwrap.indent(textwrap.dedent(helpers), "    ")}
    def forward(self, x):
        {unpack}
{textwrap.indent(textwrap.dedent(run), " " * 8)}
        return self.attn(y, y, y)[0]
"""


APPENDED = "outs = []\nfor layer in self.layers:\n    x = layer(x)\n    outs.append(x)\n"
RUNS = {
    "last-output": APPENDED + "y = outs[-1]",
    "first-output": APPENDED + "y = outs[0]",
    "concatenated": APPENDED + "y = torch.cat(outs, dim=-1)",
    "extended": "outs = [x]\nouts.extend([self.layers[0](x), x * 2])\ny = outs[-1]",
    "added": "outs = [x]\nouts += [self.layers[0](x)]\ny = outs[1]",
    "dict-entry": "feats = {}\nfeats['tokens'] = x\nfeats['other'] = x.transpose(0, 1)\ny = feats['tokens']",
    "dict-literal": "feats = {'tokens': x, 'other': x.transpose(0, 1)}\ny = feats['tokens']",
    "returned-tuple": "y, mask = self.prepare(x)",
}
PREPARE = "def prepare(self, x):\n    return x * 2, None\n"


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
def test_a_tensor_kept_in_a_container_keeps_its_layout(lint, run):
    (error,) = lint(model(run, helpers=PREPARE), CODE, "info")
    assert_batch_first_error(error, "B, T, C = x.shape")
    (info,) = lint(model(run, unpack="T, B, C = x.shape", helpers=PREPARE), CODE, "info")
    assert_sequence_first_info(info, "T, B, C = x.shape")


def test_a_dict_entry_is_read_under_its_own_key(lint):
    """The entry stored under the key read decides, not the other entries."""
    run = "feats = {}\nfeats['tokens'] = x\nfeats['other'] = x.transpose(0, 1)\ny = feats['other']"
    (info,) = lint(model(run), CODE, "info")
    assert_sequence_first_info(info, "B, T, C = x.shape", "x.transpose(0, 1)")


def test_a_list_of_tensors_in_both_layouts_is_unknown_and_says_so(lint):
    run = "outs = [x]\nouts.append(x.transpose(0, 1))\ny = outs[-1]"
    (finding,) = lint(model(run), CODE, "info")
    assert_unknown_warning(finding, "disagree on the data's layout")


def test_a_list_filled_by_code_that_cannot_be_read_is_unknown(lint):
    run = "outs = [x]\nouts.extend(self.more(x))\ny = outs[-1]"
    (finding,) = lint(model(run, helpers="def more(self, x):\n    return list(x.unbind(0))\n"), CODE, "info")
    assert_unknown_warning(finding)


def test_stacking_a_list_adds_an_axis_whose_role_is_unknown():
    source = """
        def f(x):
            B, T, C = x.shape
            outs = []
            for _ in range(3):
                outs.append(x)
            sink(torch.stack(outs, dim={dim}))
    """
    assert roles(source.format(dim=0)) == (U, B, S, E)
    assert roles(source.format(dim=1)) == (B, U, S, E)
    assert roles(source.replace("outs.append(x)", "outs.append(x.transpose(0, 1))").format(dim=0)) == (U, S, B, E)
    assert roles(source.replace("outs = []", "outs = [x.transpose(0, 1)]").format(dim=0)) is None


def test_the_index_walk_keeps_every_assignment_with_its_scope_for_the_container_stores():
    """`c += v` and `c[k] = v` (what a container's additions are read from) come from the module's one index
    walk, each with the scope it is in; an annotated assignment, a plain target and a lambda's body are no store."""
    from mhalint.analysis.containers import _stores
    from mhalint.context import ModuleContext
    from mhalint.parse.lazy import cst

    source = textwrap.dedent("""\
        c = []
        c += [1]
        n: int = 0

        class Block:
            def forward(self, x):
                d = {}
                d["k"] = x
                f = lambda y: y
                self.parts[0] = x
                return d
        """)
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    assert [(ctx.code(node).split(" ")[0], scope.kind) for node, scope in ctx.assignments()] == [
        ("c", "module"), ("c", "module"), ("d", "function"), ("d[\"k\"]", "function"), ("f", "function"),
        ("self.parts[0]", "function")]
    assert [ctx.line(node) for node, _ in _stores(ctx.assignments())] == [2, 8, 10]
