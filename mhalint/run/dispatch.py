"""The rules over one walk of a module: each rule's visit_<Node> and leave_<Node>, in walk order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mhalint.context import ModuleContext, Scope
from mhalint.finding import Finding
from mhalint.parse.lazy import cst
from mhalint.rule import Rule
from mhalint.run.diagnostics import internal_error, line_or_one

if TYPE_CHECKING:
    from mhalint.run.engine import Result


class RuleDispatch:
    """Hands the rules the nodes of one walk (ModuleContext.walk_indexed, which indexes the tree on the way):
    each rule's visit_<Node> and leave_<Node> called in walk order, with the scope current.

    A rule that raises is switched off for the rest of the file and reported as an internal error, so one bug in
    one rule never stops the run.

    A rule that acts only in the functions its triggers match (Rule.matched_functions_only) is not handed the
    nodes of the functions in `left_out` (ids of FunctionDef nodes: the bodies that hold no match of such a rule),
    nor of anything nested in them, whether or not their bodies were parsed: it sees the same nodes in a file
    parsed whole as in one whose other bodies were never parsed (mhalint.run.engine).
    """

    def __init__(self, context: ModuleContext, rules: list[Rule], path: str, result: Result,
                 failures: list[Finding], left_out: frozenset[int] = frozenset()):
        """A rule's failure (MHA902) goes to `failures`, at once: it is kept even if the walk is cut short."""
        self.context = context
        self.left_out = left_out
        self._outside: dict[int, bool] = {}  # id(scope) -> whether the scope lies outside the left-out functions
        self.path = path
        self.result = result
        self.failures = failures
        self.visitors: dict[str, list] = {}
        self.leavers: dict[str, list] = {}
        for rule in rules:
            for attribute in dir(type(rule)):
                if attribute.startswith("visit_"):
                    self.visitors.setdefault(attribute[6:], []).append((rule, getattr(rule, attribute)))
                elif attribute.startswith("leave_"):
                    self.leavers.setdefault(attribute[6:], []).append((rule, getattr(rule, attribute)))
        self.visited = _TypesNamed(self.visitors)  # the node types some rule has a handler for
        self.left = _TypesNamed(self.leavers)
        self.disabled: set[int] = set()

    def run(self, events: list[tuple[bool, cst.CSTNode, Scope]]) -> None:
        context, check = self.context, self.context.limits.check
        for entering, node, scope in events:
            check()
            context.scope = scope
            handlers = (self.visitors if entering else self.leavers)[type(node).__name__]
            for rule, handler in handlers:
                if id(rule) in self.disabled or rule.matched_functions_only and self.left_out and \
                        not self._outside_left_out(scope):
                    continue
                try:
                    handler(node)
                except Exception as error:  # contained, even a RecursionError: CPython already refused deep code
                    self.disabled.add(id(rule))
                    self.failures.append(internal_error(self.path, line_or_one(context, node), rule.code, error,
                                                         self.result))

    def _outside_left_out(self, scope: Scope) -> bool:
        found = self._outside.get(id(scope))
        if found is None:
            found = self._outside[id(scope)] = id(scope.node) not in self.left_out and (
                scope.parent is None or self._outside_left_out(scope.parent))
        return found


class _TypesNamed(dict):
    """node type -> whether its name is a key of `handlers`, filled as types are met (the walk asks per node)."""

    def __init__(self, handlers: dict[str, list]):
        super().__init__()
        self.names = frozenset(handlers)

    def __missing__(self, node_type: type) -> bool:
        self[node_type] = named = node_type.__name__ in self.names
        return named
