"""Branch conditions: under which tests a node runs, and whether two such conditions can hold together.

A condition is a set of facts that hold together, read from the code around a node within its function: the
tests of the `if`/`elif`/`else` and conditional expressions it sits in, an earlier `if T: return` in its block
(the rest runs only where T fails), and a dict of classes picked by a key. A fact is about a *subject*, the value a
test reads, named so that `self.kind` in `forward` and the `kind` parameter of `__init__` that `self.kind = kind`
stores are one subject. Two conditions exclude each other only when a test of the same subject is written both
ways (`kind == "a"` against `kind != "a"` or `kind == "mha"`, `use_mha` against `not use_mha`); anything else may
hold together. Used to pair a call with the classes a name may hold where it runs (`calls.module_calls`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mhalint.context import ModuleContext, Scope
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal

VALUE, TRUTH, CLASS = "value", "truth", "class"
_LITERAL_NAMES = {"True": True, "False": False, "None": None}
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Fact:
    """`subject` is one of `values` (VALUE), truthy (TRUTH) or an instance of one of the classes `values` names
    (CLASS, qualified names), or, with `holds` False, not."""

    subject: tuple
    kind: str
    values: frozenset = frozenset()
    holds: bool = True

    def negated(self) -> Fact:
        return Fact(self.subject, self.kind, self.values, not self.holds)


Condition = frozenset  # of Fact, all holding together; empty: always


def excludes(first: Condition, second: Condition) -> bool:
    """Can the two conditions never hold together (a test of one subject written both ways)?"""
    return any(_contradict(a, b) for a in first for b in second if a.subject == b.subject)


def _contradict(a: Fact, b: Fact) -> bool:
    if a.kind == b.kind == VALUE:
        if a.holds and b.holds:
            return not a.values & b.values
        if a.holds != b.holds:
            held, failed = (a, b) if a.holds else (b, a)
            return held.values <= failed.values
        return False
    if a.kind == b.kind == TRUTH:
        return a.holds != b.holds
    if {a.kind, b.kind} == {VALUE, TRUTH}:
        value, truth = (a, b) if a.kind == VALUE else (b, a)
        truthy = truth.holds
        return value.holds and all(bool(v) != truthy for v in value.values)
    return False


def class_facts(condition: Condition, subject: tuple) -> list[Fact]:
    """The isinstance tests the condition makes of `subject`."""
    return [fact for fact in condition if fact.kind == CLASS and fact.subject == subject]


def guards(ctx: ModuleContext, node: cst.CSTNode, scope: Scope) -> Condition:
    """The facts that hold wherever `node` runs, from the tests around it up to its function (or module)."""
    memo = ctx.memo.setdefault("guards", {})
    if node not in memo:
        memo[node] = frozenset(_guards(ctx, node, scope))
    return memo[node]


def method_guards(ctx: ModuleContext, method: Scope) -> Condition:
    """The facts that hold wherever a method runs that only its own class calls, as `self.name(...)`, and that no
    other file of the project names: those every such call runs under (`if self.multiscale: return
    self.forward_multi(x)` makes `self.multiscale` hold in `forward_multi`). Empty for `forward` and `__init__`
    (their callers are the instances' and constructions'), and where a call is not that."""
    memo = ctx.memo.setdefault("method_guards", {})
    if method not in memo:
        memo[method] = frozenset()  # a method that calls itself: that call adds nothing
        memo[method] = _method_guards(ctx, method)
    return memo[method]


def _method_guards(ctx: ModuleContext, method: Scope) -> Condition:
    klass = method.enclosing_class
    if klass is None or not isinstance(method.node, cst.FunctionDef) or method.name in ("__init__", "forward"):
        return frozenset()
    calls = ctx.calls_named(method.name)
    if not calls or not all(isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
                            and call.func.value.value == scope.self_name and ctx.class_of(scope) is klass
                            for call, scope in calls):
        return frozenset()
    held = frozenset.intersection(*(guards(ctx, call, scope) | method_guards(ctx, scope) for call, scope in calls))
    if not held or ctx.names is None or ctx.names.mentions(method.name, ctx.path):  # the project's files' text
        return frozenset()
    return held


def _guards(ctx: ModuleContext, node: cst.CSTNode, scope: Scope) -> list[Fact]:
    found: list[Fact] = []
    child, parent = node, ctx.parent(node)
    while parent is not None and not isinstance(child, cst.FunctionDef | cst.ClassDef | cst.Lambda):
        if isinstance(parent, cst.If | cst.IfExp) and child is not parent.test:
            found += facts(ctx, parent.test, scope, holds=child is parent.body)
        elif isinstance(parent, cst.IndentedBlock | cst.Module):
            found += _after_exits(ctx, parent, scope).get(id(child), ())
        child, parent = parent, ctx.parent(parent)
    return found


def _after_exits(ctx: ModuleContext, block: cst.IndentedBlock | cst.Module, scope: Scope) -> dict[int, list[Fact]]:
    """`if T: return ...` earlier in the block: the statements after it run only where T fails. For each
    statement of the block (by id), the facts of the exiting tests before it: read once per block (a question per
    statement read all those before it, which made a module of N statements quadratic)."""
    memo = ctx.memo.setdefault("after_exits", {})
    key = (block, scope)
    if key not in memo:
        table, found = {}, []
        for statement in block.body:
            table[id(statement)] = found
            if isinstance(statement, cst.If) and _exits(statement.body):
                found = found + facts(ctx, statement.test, scope, holds=False)
        memo[key] = table
    return memo[key]


def _exits(suite: cst.BaseSuite) -> bool:
    statements = suite.body
    last = statements[-1] if statements else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, cst.Return | cst.Raise | cst.Continue | cst.Break)


def facts(ctx: ModuleContext, test: cst.BaseExpression, scope: Scope, holds: bool = True) -> list[Fact]:
    """What a test says where it holds (`holds`) or fails; only what can be said for certain (an `or` that holds
    says nothing about either side)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return facts(ctx, test.expression, scope, not holds)
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And) == holds:  # `a and b` holds, `a or b` fails: both sides do
            return facts(ctx, test.left, scope, holds) + facts(ctx, test.right, scope, holds)
        return []
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        return _comparison(ctx, test.left, test.comparisons[0], scope, holds)
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance" \
            and len(test.args) == 2 and not ctx.bindings("isinstance", scope):
        return _isinstance(ctx, test.args[0].value, test.args[1].value, scope, holds)
    if isinstance(test, cst.Name | cst.Attribute):
        return [Fact(subject(ctx, test, scope), TRUTH, holds=holds)]
    return []


def _comparison(ctx, left, comparison: cst.ComparisonTarget, scope: Scope, holds: bool) -> list[Fact]:
    operator, right = comparison.operator, comparison.comparator
    if isinstance(operator, cst.In | cst.NotIn):
        values = _constants(right.elements) if isinstance(right, cst.Tuple | cst.List | cst.Set) else None
        if values is None:
            return []
        return [Fact(subject(ctx, left, scope), VALUE, values, holds == isinstance(operator, cst.In))]
    if not isinstance(operator, cst.Equal | cst.NotEqual | cst.Is | cst.IsNot):
        return []
    for side, other in ((left, right), (right, left)):
        value = _constant(other)
        if value is not _UNKNOWN:
            positive = isinstance(operator, cst.Equal | cst.Is)
            return [Fact(subject(ctx, side, scope), VALUE, frozenset({value}), holds == positive)]
    return []


def _isinstance(ctx, value, classes, scope: Scope, holds: bool) -> list[Fact]:
    elements = [e.value for e in classes.elements] if isinstance(classes, cst.Tuple) else [classes]
    names = [ctx.qualified_name(e, scope) for e in elements]
    if any(name is None for name in names):
        return []
    return [Fact(subject(ctx, value, scope), CLASS, frozenset(names), holds)]


_UNKNOWN = object()


def _constant(expr: cst.BaseExpression):
    """A literal's value (a string, a number, True/False/None), else _UNKNOWN."""
    if isinstance(expr, cst.SimpleString | cst.Integer | cst.Float):
        return literal(expr)
    if isinstance(expr, cst.Name) and expr.value in _LITERAL_NAMES:
        return _LITERAL_NAMES[expr.value]
    return _UNKNOWN


def _constants(elements) -> frozenset | None:
    values = [_constant(e.value) for e in elements]
    return None if any(v is _UNKNOWN for v in values) else frozenset(values)


def key_fact(ctx: ModuleContext, key: cst.BaseExpression, chosen: cst.BaseExpression, scope: Scope) -> Fact | None:
    """`{"a": A, ...}[kind]`: the entry under `chosen` is picked where `kind` == that key."""
    value = _constant(chosen)
    return None if value is _UNKNOWN else Fact(subject(ctx, key, scope), VALUE, frozenset({value}))


def subject(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> tuple:
    """What a test reads, followed through single plain assignments (`self.kind = kind` stores the parameter
    `kind`), so that tests written in different methods of a class compare."""
    if depth < _MAX_DEPTH:
        if isinstance(expr, cst.Name):
            bindings = ctx.bindings(expr.value, scope)
            if len(bindings) == 1:
                binding = bindings[0]
                if binding.kind == "param":
                    return ("param", binding)
                if binding.kind == "assign" and isinstance(binding.value, cst.Name | cst.Attribute):
                    return subject(ctx, binding.value, binding.scope, depth + 1)
        attributes = ctx.attribute_bindings(expr, scope)
        if attributes is not None:
            if len(attributes) == 1 and isinstance(attributes[0].value, cst.Name | cst.Attribute):
                return subject(ctx, attributes[0].value, attributes[0].scope, depth + 1)
            return ("attribute", ctx.class_of(scope), expr.attr.value)
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, scope)
        return ("name", bindings[0].scope if bindings else None, expr.value)
    text = _text(expr)
    return ("code", ctx.class_of(scope), text) if text is not None else ("node", expr)


def _text(expr: cst.BaseExpression) -> str | None:
    """`self.cfg.kind` as a dotted name, without generating code (that would ask for positions); None for any
    other expression (its subject is then itself, which matches no other)."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = _text(expr.value)
        return f"{base}.{expr.attr.value}" if base is not None else None
    return None
