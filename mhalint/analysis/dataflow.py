"""Reaching definitions with control flow, one scope at a time: which bindings of a name a read can see.

The flow is computed once per scope, on first use, by one pass over the scope's statements (structured code needs
no control-flow graph): an assignment replaces what reaches after it; the branches of `if`, `match` and `try` merge
where they join; a loop body sees what reaches the loop and what its own last iteration left (iterated to a fixed
point), and `break`/`continue` join the loop's exit and head; `return` and `raise` end a path. A read inside a
function nested in the scope (a closure) may run after any statement, so it sees what reaches the scope's end.
"""

from __future__ import annotations

from functools import cached_property
from typing import Callable, Iterator, TypeVar

from mhalint.context import Binding, ModuleContext, Scope
from mhalint.parse.lazy import cst
from mhalint.parse.walk import walk

State = dict[str, frozenset[Binding]]  # name -> the bindings that may reach; a missing name has none
_MAX_ROUNDS = 10
T = TypeVar("T")


def reaching(ctx: ModuleContext, bindings: list[Binding], use: cst.CSTNode) -> list[Binding]:
    """The bindings of one name (`ctx.bindings(name, scope)`) that may reach `use`, in source order."""
    if len(bindings) <= 1:
        return list(bindings)
    first = bindings[0]
    seen = flow(ctx, first.scope).at(ctx, use).get(first.name, frozenset())
    if bindings is first.scope.bindings.get(first.name):  # all of them: what reaches, put in order (a name bound
        return sorted(seen, key=_source_order)           # N times is read N times: no pass over the N each time)
    return [binding for binding in bindings if binding in seen]


def _source_order(binding: Binding) -> int:
    return binding.order


def reaching_one(ctx: ModuleContext, bindings: list[Binding], use: cst.CSTNode) -> Binding | None:
    """The one binding that reaches `use`; None when none does or several may (which one is not known)."""
    found = reaching(ctx, bindings, use)
    return found[0] if len(found) == 1 else None


def follow(reached: list[Binding], active: set[int], read: Callable[[Binding], T]) -> list[T]:
    """`read(binding)` for each binding that may reach a read, except those already being read further up (a
    loop's `x = f(x)` reaching itself): the other bindings decide. `active` is the reader's own set."""
    found = []
    for binding in reached:
        if id(binding) in active:
            continue
        active.add(id(binding))
        try:
            found.append(read(binding))
        finally:
            active.discard(id(binding))
    return found


class Loops:
    """Following the bindings that may reach a read through loops, to a fixed point: `x = layer(x)` in a loop
    over a stack of layers (or several layers, `x = attn(x); x = ffn(x)`) reaches its own reads.

    A binding met again while it is being read (a cycle) adds nothing for now, nor does a binding that is
    unknown only because its reading met such a cycle still open further up: the others (the value before the
    loop) decide. When the binding whose reading met itself has a value, it is read again with that value
    assumed where it met itself; the answer holds only if that gives the same (`same`), else it is unknown. So a
    loop body that keeps the layout keeps the entry's, and one that changes it (a transpose each round) is
    unknown."""

    def __init__(self):
        self.active: dict[int, T | None] = {}  # the bindings being read -> the value assumed where met again
        self.met: dict[int, int] = {}  # a binding being read -> how often a reading met it again
        self.open = 0  # how often a reading met a binding still being read further up
        self.met_active = 0  # how often any reading met a binding being read (its answer depends on the loop)
        self.read: set[int] | None = None  # while a set: the bindings read since (an answer kept is valid only
        # where none of them is being read, since reading one then would meet it)

    def follow(self, reached: list[Binding], read: Callable[[Binding], T | None], same: Callable[[T, T], bool],
               mark: Callable[[], Callable[[], None]] = lambda: lambda: None) -> list[T | None]:
        """`read(binding)` of each binding; `mark()` gives what takes back what a reading recorded (the reader's
        notes on where it stopped), called for a reading that adds nothing."""
        found = []
        for binding in reached:
            key = id(binding)
            if key in self.active:
                self.met_active += 1
                if self.active[key] is not None:
                    found.append(self.active[key])
                else:
                    self.met[key] = self.met.get(key, 0) + 1
                    self.open += 1
                continue
            before, undo = self.open, mark()
            value = self._read(binding, read, same)
            if value is None and self.open > before:
                undo()  # unknown only through a cycle still open further up: the binding read there decides
                continue
            found.append(value)
        return found

    def _read(self, binding: Binding, read, same):
        key = id(binding)
        if self.read is not None:
            self.read.add(key)
        self.active[key] = None
        try:
            value = read(binding)
            met = self.met.pop(key, 0)
            self.open -= met  # its own cycle closes here
            if value is None or not met:
                return value
            self.active[key] = value  # met itself: read again with its value assumed there
            again = read(binding)
            return value if again is not None and same(value, again) else None
        finally:
            del self.active[key]


def uses(ctx: ModuleContext, binding: Binding) -> list[cst.Name]:
    """The reads that may see `binding`'s value, in source order: following a value forward. The reads of a name
    are matched with its bindings once per scope (not once per binding: a name bound N times)."""
    memo = ctx.memo.setdefault("uses", {})
    key = (binding.scope, binding.name)
    if key not in memo:
        bindings = ctx.bindings(binding.name, binding.scope)
        by_binding: dict[Binding, list[cst.Name]] = {}
        for load in loads(ctx, binding.scope).get(binding.name, []):
            for reached in reaching(ctx, bindings, load):
                by_binding.setdefault(reached, []).append(load)
        memo[key] = by_binding
    return list(memo[key].get(binding, ()))


def loads(ctx: ModuleContext, scope: Scope) -> dict[str, list[cst.Name]]:
    """The names a scope reads, in source order: its own body's, and the names its nested functions and lambdas
    read without binding them (a closure's read). Targets, parameters, attribute names and keywords are not reads."""
    memo = ctx.memo.setdefault("loads", {})
    if scope in memo:
        return memo[scope]
    found: dict[str, list[cst.Name]] = {}
    shadowing: list[set[str]] = []  # the names each nested function or lambda around the read binds
    # concrete node classes, compared by type: faster than isinstance, which goes through libcst's ABCMeta
    nested, name = (cst.FunctionDef, cst.Lambda, cst.ClassDef), cst.Name

    def enter(node: cst.CSTNode) -> bool:
        kind = type(node)
        if kind is name:
            if not is_store(ctx, node) and not any(node.value in names for names in shadowing):
                found.setdefault(node.value, []).append(node)
        elif kind in nested and node is not scope.node:
            shadowing.append(_bound_in(ctx, node))
        return True

    def leave(node: cst.CSTNode) -> None:
        if type(node) in nested and node is not scope.node:
            shadowing.pop()

    walk(scope.node, enter, leave)
    memo[scope] = found
    return found


def _bound_in(ctx: ModuleContext, node: cst.FunctionDef | cst.Lambda | cst.ClassDef) -> set[str]:
    """The names a nested function, class or lambda binds itself (a lambda is no scope of ModuleContext's)."""
    if isinstance(node, cst.Lambda):
        return {param.name.value for param in node.params.params}
    inner = ctx.scope_of(node)
    return set(inner.bindings) if inner is not None else set()


def is_store(ctx: ModuleContext, node: cst.CSTNode) -> bool:
    """Is this name or attribute being bound (an assignment target, a parameter, a keyword's name) rather than
    read?"""
    parent = ctx.parent(node)
    kind = type(parent)  # the node classes below are concrete: compared by type (libcst's isinstance is slower)
    if kind is cst.Attribute:
        return parent.attr is node
    if kind is cst.Arg:
        return parent.keyword is node
    if kind in (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName):
        return True
    current = node
    while kind in (cst.Tuple, cst.List, cst.Element, cst.StarredElement):
        current, parent = parent, ctx.parent(parent)
        kind = type(parent)
    return kind is cst.AssignTarget or kind is cst.AugAssign or (
        kind in (cst.AnnAssign, cst.For, cst.CompFor) and parent.target is current)


def attribute_reads(ctx: ModuleContext, klass: Scope, attribute: str) -> Iterator[tuple[cst.Attribute, Scope]]:
    """Each read of `self.<attribute>` in a method of `klass` (not a store), with the method: where a value a
    method stored there may be used."""
    for method in klass.methods.values():
        self_name = method.self_name
        for use in loads(ctx, method).get(self_name, []) if self_name else []:
            read = ctx.parent(use)
            if isinstance(read, cst.Attribute) and read.value is use and read.attr.value == attribute \
                    and not is_store(ctx, read):
                yield read, method


def apart(ctx: ModuleContext, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """Are the two nodes in different branches of one `if` (`if x.dim() == 4: B, C, H, W = x.shape` and the
    `else:` that reads `x`): no run reaches both."""
    branch, node = {}, first
    while node is not None:
        parent = ctx.parent(node)
        if isinstance(parent, cst.If):
            branch[id(parent)] = node
        node = parent
    node = second
    while node is not None:
        parent = ctx.parent(node)
        if isinstance(parent, cst.If) and id(parent) in branch and parent.test is not node:
            return branch[id(parent)] is not node and branch[id(parent)] is not parent.test
        node = parent
    return False


def flow(ctx: ModuleContext, scope: Scope) -> Flow:
    memo = ctx.memo.setdefault("flow", {})
    if scope not in memo:
        memo[scope] = Flow(ctx, scope)
    return memo[scope]


class Flow:
    """The state before each statement of one scope, and at its end."""

    def __init__(self, ctx: ModuleContext, scope: Scope):
        self._limits = ctx.limits
        self.before: dict[cst.CSTNode, State | None] = {}
        self._by_node: dict[int, list[Binding]] = {}
        for bindings in scope.bindings.values():
            for binding in bindings:
                self._by_node.setdefault(id(binding.node), []).append(binding)
        self._breaks: list[list[State | None]] = []
        self._continues: list[list[State | None]] = []
        start: State = {}
        for binding in (b for bindings in scope.bindings.values() for b in bindings if b.kind == "param"):
            start[binding.name] = start.get(binding.name, frozenset()) | {binding}
        node = scope.node
        self.start = start
        self.end = self._run(node.body, start) if isinstance(node, cst.Module) else self._suite(node.body, start)

    @cached_property
    def _every(self) -> State:
        """What may hold anywhere in the scope: a closure's read when every path ends in a return."""
        return _merge(self.start, self.end, *self.before.values())

    def at(self, ctx: ModuleContext, use: cst.CSTNode) -> State:
        """What reaches `use`: the state before its statement, or at the scope's end for a closure's read."""
        node: cst.CSTNode | None = use
        while node is not None:
            if node is not use and isinstance(node, cst.FunctionDef | cst.Lambda):
                break
            if node in self.before:
                return self.before[node] or {}
            node = ctx.parent(node)
        return self.end if self.end is not None else self._every

    # ---- statements ----
    def _run(self, statements, state: State | None) -> State | None:
        for statement in statements:
            state = self._statement(statement, state)
        return state

    def _statement(self, node: cst.CSTNode, state: State | None) -> State | None:
        self._limits.check()
        self.before[node] = state
        if state is None:
            return None  # unreachable: after a return, raise, break or continue
        if isinstance(node, cst.SimpleStatementLine):
            return self._small(node.body, state)
        if isinstance(node, cst.If):
            return self._if(node, state)
        if isinstance(node, cst.For | cst.While):
            return self._loop(node, state)
        if isinstance(node, cst.Try | cst.TryStar):
            return self._try(node, state)
        if isinstance(node, cst.With):
            return self._suite(node.body, self._bind(node, state))
        if isinstance(node, cst.Match):
            ends = [self._suite(case.body, state) for case in node.cases]
            return _merge(state, *ends)
        return self._bind(node, state)  # def, class: the name is bound

    def _small(self, statements, state: State) -> State | None:
        for small in statements:
            self.before[small] = state
            if isinstance(small, cst.Return | cst.Raise):
                return None
            if isinstance(small, cst.Break | cst.Continue):
                targets = self._breaks if isinstance(small, cst.Break) else self._continues
                if targets:
                    targets[-1].append(state)
                return None
            state = self._bind(small, state)
        return state

    def _suite(self, suite: cst.BaseSuite, state: State | None) -> State | None:
        if isinstance(suite, cst.SimpleStatementSuite):
            return self._small(suite.body, state) if state is not None else None
        return self._run(suite.body, state)

    def _if(self, node: cst.If, state: State) -> State | None:
        """`if x is not None:` leaves x None on the other path, and `if x is None:` on this one: there no binding
        of x holds a value, so none reaches from there (`mask = f(mask)` under the test is all that reaches)."""
        none, when = _none_test(node.test)
        taken = self._suite(node.body, _without(state, none) if when else state)
        otherwise = _without(state, none) if none and not when else state
        if isinstance(node.orelse, cst.If):
            self.before[node.orelse] = otherwise
            other = self._if(node.orelse, otherwise)
        elif isinstance(node.orelse, cst.Else):
            other = self._suite(node.orelse.body, otherwise)
        else:
            other = otherwise
        return _merge(taken, other)

    def _loop(self, node: cst.For | cst.While, state: State) -> State | None:
        entry: State | None = state
        exits: list[State | None] = []
        for _ in range(_MAX_ROUNDS):
            self._breaks.append([])
            self._continues.append([])
            head = self._bind(node, entry) if isinstance(node, cst.For) else entry
            end = self._suite(node.body, head)
            exits, continues = self._breaks.pop(), self._continues.pop()
            widened = _merge(state, end, *continues)
            if widened == entry:
                break
            entry = widened
        after = self._suite(node.orelse.body, entry) if node.orelse is not None else entry
        return _merge(after, *exits)

    def _try(self, node, state: State) -> State | None:
        end = self._suite(node.body, state)
        inside = [self.before[statement] for statement in node.body.body]
        raised = _merge(state, end, *inside)
        handled = [self._suite(handler.body, raised) for handler in node.handlers]
        normal = self._suite(node.orelse.body, end) if node.orelse is not None else end
        after = _merge(normal, *handled)
        return self._suite(node.finalbody.body, after) if node.finalbody is not None else after

    def _bind(self, node: cst.CSTNode, state: State | None) -> State | None:
        """After `node` runs, each name it binds holds its bindings there (an unpacking binds several names)."""
        bound = self._by_node.get(id(node))
        if not bound or state is None:
            return state
        changed = dict(state)
        for name in {binding.name for binding in bound}:
            changed[name] = frozenset(binding for binding in bound if binding.name == name)
        return changed


def _none_test(test: cst.BaseExpression) -> tuple[str | None, bool]:
    """(x, True) for `x is None`, (x, False) for `x is not None`; (None, False) for any other test."""
    if (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].comparator, cst.Name)
            and test.comparisons[0].comparator.value == "None"):
        operator = test.comparisons[0].operator
        if isinstance(operator, cst.Is):
            return test.left.value, True
        if isinstance(operator, cst.IsNot):
            return test.left.value, False
    return None, False


def _without(state: State, name: str | None) -> State:
    """The state on a path where `name` is None: none of its bindings holds a value there."""
    if name is None or name not in state:
        return state
    changed = dict(state)
    changed[name] = frozenset()
    return changed


def _merge(*states: State | None) -> State | None:
    """Where paths join, a name may hold what any of them left; unreachable paths (None) add nothing."""
    live = [state for state in states if state is not None]
    if not live:
        return None
    if all(state is live[0] for state in live):
        return live[0]
    merged: State = {}
    for state in live:
        for name, bindings in state.items():
            merged[name] = merged.get(name, frozenset()) | bindings
    return merged
