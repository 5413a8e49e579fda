"""What a ModuleContext knows of a module whose function bodies are parsed on demand (mhalint.parse.lazy_bodies).

Each answer is the one a whole parse gives: a question about a pending function's names parses its body first,
one about a class's `self.x` parses the methods that mention `x`, and the calls named `f` are found after the
bodies that mention `f` are parsed. Each parsed body then joins the index in the place a walk of the whole
module would have given it, so that lists come out in source order.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Callable, Mapping

from mhalint.context import NO_TYPES, called_word, scoped_walk
from mhalint.parse.lazy import cst
from mhalint.parse.lazy_bodies import LazyFunctionDef
from mhalint.parse.walk import walk, walk_parsed

if TYPE_CHECKING:
    from mhalint.context import Scope
    from mhalint.parse.lazy_bodies import Shell

# imported only by a context with pending bodies, so libcst is loaded already
SCOPE_TYPES = frozenset((cst.Module, cst.ClassDef, cst.FunctionDef, LazyFunctionDef))  # nodes opening a scope


class _ParsedOnRead(dict):
    """A table that parsing a body adds to: a read of one key parses first the bodies that may add to it
    (`_want`), any read of the whole every such body (`_want_all`). Writes are dict's own (`setdefault`): the
    context's scope builder fills it as a body is parsed."""

    __slots__ = ()

    def _want(self, key) -> None:
        self._want_all()

    def _want_all(self) -> None:
        raise NotImplementedError

    def get(self, key, default=None):
        self._want(key)
        return dict.get(self, key, default)

    def __getitem__(self, key):
        self._want(key)
        return dict.__getitem__(self, key)

    def __contains__(self, key) -> bool:
        self._want(key)
        return dict.__contains__(self, key)

    def __iter__(self):
        self._want_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._want_all()
        return dict.__len__(self)

    def keys(self):
        self._want_all()
        return dict.keys(self)

    def values(self):
        self._want_all()
        return dict.values(self)

    def items(self):
        self._want_all()
        return dict.items(self)


class PendingBindings(_ParsedOnRead):
    """A pending function's bindings: its parameters, until something reads them, which parses its body (the
    context then gives the scope a plain dict of the same bindings)."""

    __slots__ = ("function",)

    def __init__(self, function: cst.FunctionDef):
        super().__init__()
        self.function = function

    def _want_all(self) -> None:
        self.function.body  # noqa: B018 -- reading it parses it


class PendingAttributes(_ParsedOnRead):
    """A class's `self.x` bindings while some of its methods are pending: asking for `x` parses the methods whose
    body has the word `x` first; asking for all of them parses every method. The bindings of each name stay in
    source order: the class body's own, then each method's in the order the methods are written."""

    __slots__ = ("shell", "methods", "order")

    def __init__(self, attributes: dict, shell: Shell, methods: list[Scope]):
        super().__init__(attributes)
        self.shell = shell
        self.methods = {method.node for method in methods}
        self.order = {method: index for index, method in enumerate(methods)}

    def _want(self, key) -> None:
        for function in self.shell.holding(key) if isinstance(key, str) else ():
            if function in self.methods:
                function.body  # noqa: B018 -- reading it parses it

    def _want_all(self) -> None:
        for function in self.shell.unparsed():
            if function in self.methods:
                function.body  # noqa: B018

    def settle(self) -> None:
        """After a method's body joined the class: its bindings were added last; put them in source order."""
        for bindings in dict.values(self):
            bindings.sort(key=lambda binding: self.order.get(binding.scope, -1))


class PartialIndex:
    """Parents, and calls by scope and by called name, of the parsed part of a module, in the order a walk of the
    whole module lists them: each call has a key, and a pending body's calls get the key of its place. `events`:
    the events of the first walk, as ModuleContext.walk_indexed describes them for `visited` and `left`."""

    def __init__(self, module: cst.Module, scopes: dict, root: Scope, check: Callable[[], None],
                 visited: Mapping[type, bool] = NO_TYPES, left: Mapping[type, bool] = NO_TYPES):
        self.scopes = scopes
        self.check = check
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.by_scope: dict[Scope, list] = {}
        self.by_name: dict[str, list] = {}
        self._assignments: list = []  # (key, (statement, scope)) for `=` and augmented assignments
        self.places: dict[cst.CSTNode, int] = {}  # pending function -> the key of its body's place
        self._count = 0
        self.events = self._index(module, root, None, None, self._walk_parsed, visited, left)

    def _walk_parsed(self, root: cst.CSTNode, enter: Callable, leave: Callable) -> None:
        walk_parsed(root, enter, leave, self._pending)

    def parsed(self, function: cst.FunctionDef) -> None:
        """A pending body has just been parsed: index it in its place."""
        place = self.places.pop(function, None)
        if place is not None:
            self._index(function.body, self.scopes[function], function, place, walk)

    def _pending(self, function: cst.CSTNode) -> None:
        self.places[function] = self._count
        self._count += 1

    def _index(self, root: cst.CSTNode, scope: Scope, parent: cst.CSTNode | None, place: int | None,
               walker: Callable, visited: Mapping[type, bool] = NO_TYPES,
               left: Mapping[type, bool] = NO_TYPES) -> list[tuple[bool, cst.CSTNode, Scope]]:
        """Index `root`'s nodes, which lie in `scope` under `parent`: in walk order (`place` None), or at the
        place of a body parsed later."""
        sequence = 0

        def indexed(node: cst.CSTNode, inner: Scope) -> None:
            nonlocal sequence
            if place is None:
                key, self._count = (self._count, 0), self._count + 1
            else:
                sequence += 1
                key = (place, sequence)
            self._add(node, inner, key)

        return scoped_walk(root, scope, self.scopes, SCOPE_TYPES, self.check, self.parents, indexed, walker, parent,
                           visited, left)

    def _add(self, node: cst.CSTNode, scope: Scope, key: tuple[int, int]) -> None:
        if type(node) in _ASSIGNMENTS:
            _insert(self._assignments, key, (node, scope))
            return
        name = called_word(node)
        _insert(self.by_scope.setdefault(scope, []), key, (node, scope))
        if name is not None:
            _insert(self.by_name.setdefault(name, []), key, (node, scope))

    def assignments(self) -> list:
        return [entry for _, entry in self._assignments]

    def calls_in(self, scope: Scope) -> list:
        return [entry for _, entry in self.by_scope.get(scope, ())]

    def calls_named(self, name: str) -> list:
        return [entry for _, entry in self.by_name.get(name, ())]

    def calls_named_any(self, names: set[str]) -> list:
        """The calls named by any of `names`, in source order."""
        return [entry for _, entry in sorted((found for name in names for found in self.by_name.get(name, ())),
                                             key=lambda found: found[0])]


_ASSIGNMENTS = (cst.Assign, cst.AugAssign)


def _insert(entries: list, key: tuple[int, int], entry) -> None:
    """Keep `entries` in key order: a parse in walk order appends; a body parsed later goes to its place."""
    if not entries or entries[-1][0] < key:
        entries.append((key, entry))
    else:
        bisect.insort(entries, (key, entry), key=lambda found: found[0])
