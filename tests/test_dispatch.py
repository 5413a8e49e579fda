"""The engine hands each rule the nodes of one walk: visit_<Node> on the way in and leave_<Node> on the way out,
in source order, with `self.scope` the innermost function, class or module around the node (a class's or
function's own scope at its own visit and leave)."""

from __future__ import annotations

from mhalint.parse.lazy import cst
from mhalint.rule import Rule
from mhalint.run.engine import Checker

SOURCE = '''\
import torch
top = torch.zeros(1)
class Block:
    size = len([])
    def forward(self, x):
        def inner(y):
            return y.sum()
        return inner(x)
after = str(top)
'''


def _events(source: str) -> list[tuple[str, str, str, str]]:
    seen: list[tuple[str, str, str, str]] = []

    class Recorder(Rule):
        code, name, summary, triggers = "XYZ301", "recorder", "records the dispatch", (r"\btorch\b",)

        def _record(self, event: str, node: cst.CSTNode) -> None:
            func = getattr(node, "func", None)
            label = node.name.value if hasattr(node, "name") else self.context.code(func)
            seen.append((event, type(node).__name__, label, self.scope.name or self.scope.kind))

        def visit_Call(self, node: cst.Call) -> None:
            self._record("visit", node)

        def leave_Call(self, node: cst.Call) -> None:
            self._record("leave", node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            self._record("visit", node)

        def leave_ClassDef(self, node: cst.ClassDef) -> None:
            self._record("leave", node)

    assert Checker([Recorder]).check_source(source.encode(), "x.py") == []
    return seen


# event, node type, the call or the definition, the scope's name (or kind)
EXPECTED = """\
visit Call torch.zeros module
leave Call torch.zeros module
visit Call len Block
leave Call len Block
visit FunctionDef forward forward
visit FunctionDef inner inner
visit Call y.sum inner
leave Call y.sum inner
visit Call inner forward
leave Call inner forward
leave ClassDef Block Block
visit Call str module
leave Call str module
"""


def test_rules_see_each_node_in_walk_order_with_its_scope():
    assert [" ".join(event) for event in _events(SOURCE)] == EXPECTED.splitlines()


def test_a_call_inside_a_call_is_entered_before_the_outer_one_is_left():
    events = _events("import torch\nout = torch.cat([torch.ones(2)])\n")
    assert [(event, label) for event, _, label, _ in events] == [
        ("visit", "torch.cat"), ("visit", "torch.ones"), ("leave", "torch.ones"), ("leave", "torch.cat")]
