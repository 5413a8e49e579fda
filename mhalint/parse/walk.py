"""A read-only traversal of a libcst tree, about five times faster than `node.visit(visitor)`.

libcst's visitor rebuilds every node it passes (`_visit_and_replace_children`), which a linter that only reads
does not need. This walk reads each node's dataclass fields directly, in declaration order (source order for
the nodes rules care about), and skips the whitespace, comma and bracket fields that hold no code.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from mhalint.parse.lazy import cst

_TRIVIA = {"lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "trailing_whitespace",
           "header", "footer", "colon", "first_colon", "second_colon", "dot", "equal", "lbracket", "rbracket",
           "lbrace", "rbrace", "asynchronous"}


class _CodeFields(dict):
    """node type -> the names of its fields that may hold code, in declaration order (filled as types are met: a
    dict lookup per node, not a call)."""

    def __missing__(self, node_type: type) -> tuple[str, ...]:
        self[node_type] = names = tuple(f.name for f in dataclasses.fields(node_type)
                                        if f.name not in _TRIVIA and not f.name.startswith("whitespace"))
        return names


_CODE_FIELDS = _CodeFields()


def walk(node: cst.CSTNode, enter: Callable[[cst.CSTNode], bool], leave: Callable[[cst.CSTNode], None]) -> None:
    """Call `enter` on each node (its children are skipped when it returns False), then `leave`. The function
    bodies under `node` not parsed yet (mhalint.parse.lazy_bodies) are parsed first: `enter` and `leave` see each node
    as it stays."""
    if _HOLDERS[type(node)]:
        _parse_pending(node)
    _walk(node, enter, leave, _CODE_FIELDS)


def walk_parsed(node: cst.CSTNode, enter: Callable[[cst.CSTNode], bool], leave: Callable[[cst.CSTNode], None],
                pending: Callable[[cst.CSTNode], None]) -> None:
    """`walk`, leaving out the function bodies not parsed yet: `pending(function)` is called where such a body
    would be walked (an index of what is parsed so far keeps its place)."""
    _walk(node, enter, leave, _PARSED_FIELDS, pending)


def _walk(node: cst.CSTNode, enter: Callable[[cst.CSTNode], bool], leave: Callable[[cst.CSTNode], None],
          fields: dict[type, tuple[str | None, ...]],
          pending: Callable[[cst.CSTNode], None] | None = None) -> None:
    if not enter(node):
        return
    for name in fields[type(node)]:
        if name is None:
            pending(node)
            continue
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            for item in value:
                if _IS_NODE[type(item)]:
                    _walk(item, enter, leave, fields, pending)
        elif _IS_NODE[value_type]:
            _walk(value, enter, leave, fields, pending)
    leave(node)


def _parse_pending(node: cst.CSTNode) -> None:
    """Parse the pending bodies in a module, a class (or its block) or a pending function itself: the only places
    they are."""
    kind = type(node)
    statements = node.body if kind is cst.Module or kind is cst.IndentedBlock else node.body.body \
        if kind is cst.ClassDef and type(node.body) is cst.IndentedBlock else (node,)
    for statement in statements:
        if type(statement) is cst.ClassDef and kind is cst.Module:
            _parse_pending(statement)
        elif getattr(type(statement), "body_pending", False):
            statement.body  # noqa: B018 -- reading it parses it


class _Holders(dict):
    """node type -> whether a pending body may lie in a node of it (filled as types are met)."""

    def __missing__(self, node_type: type) -> bool:
        self[node_type] = holds = node_type in (cst.Module, cst.ClassDef, cst.IndentedBlock) or getattr(
            node_type, "body_pending", False)
        return holds


_HOLDERS = _Holders()


class _ParsedFields(dict):
    """node type -> its code fields, with None in place of a body not parsed yet."""

    def __missing__(self, node_type: type) -> tuple[str | None, ...]:
        names: tuple[str | None, ...] = _CODE_FIELDS[node_type]
        if getattr(node_type, "body_pending", False):  # mhalint.parse.lazy_bodies.LazyFunctionDef
            names = tuple(None if name == "body" else name for name in names)
        self[node_type] = names
        return names


_PARSED_FIELDS = _ParsedFields()


class _NodeTypes(dict):
    """type -> whether it is a libcst node. `isinstance(value, cst.CSTNode)` goes through ABCMeta, which cost a
    fifth of a walk; a dict lookup on the value's type does not."""

    def __missing__(self, value_type: type) -> bool:
        self[value_type] = is_node = issubclass(value_type, cst.CSTNode)
        return is_node


_IS_NODE = _NodeTypes()


def own_nodes(root: cst.CSTNode, kinds: tuple[type, ...]) -> list[cst.CSTNode]:
    """The nodes of the given kinds (concrete node classes, compared by type: `isinstance` goes through ABCMeta)
    inside `root`, not looking into functions, classes or lambdas nested in it (what belongs to `root`'s own body)."""
    found: list[cst.CSTNode] = []
    nested = (cst.FunctionDef, cst.ClassDef, cst.Lambda)

    def enter(node: cst.CSTNode) -> bool:
        kind = type(node)
        if kind in kinds:
            found.append(node)
        return node is root or kind not in nested

    walk(root, enter, nothing)
    return found


def nothing(node: cst.CSTNode) -> None:
    """A `leave` (or `pending`) that does nothing, for a walk that only enters."""
    return None
