"""Per-module facts every rule shares, built once per file in one walk over the statements.

The walk records import aliases, the names each scope binds (module constants, function locals and parameters, `self.x =
...` attributes of a class) and the scope tree. It deliberately avoids libcst's QualifiedNameProvider and ScopeProvider,
which cost about ten times the parse (measured when the engine was designed): a small table of our own is enough for the
names attention code uses.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, TypeVar

from mhalint import torchapi
from mhalint.parse.comments import comments, statement_lines_around
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal
from mhalint.parse.source import line_starts
from mhalint.parse.walk import nothing, walk, walk_parsed
from mhalint.run.budget import Limits

if TYPE_CHECKING:
    from mhalint.analysis.project import Project
    from mhalint.parse.lazy_bodies import Shell
    from mhalint.parse.pending_scopes import PartialIndex
    from mhalint.parse.positions import Positions

T = TypeVar("T")
NO_TYPES: Mapping[type, bool] = defaultdict(bool)  # no node type watched


@dataclass(eq=False)
class Binding:
    """One place a name gets a value. `value` is None when the value cannot be expressed (e.g. `except E as e`)."""

    name: str
    value: cst.BaseExpression | None = field(repr=False)
    scope: Scope = field(repr=False)  # where `value` must be evaluated
    node: cst.CSTNode = field(repr=False)  # the statement or target that binds, for positions
    kind: str = "assign"  # assign | unpack | for | with | param | import | def
    index: int | None = None  # position in the target tuple, for `a, b = value`
    order: int = 0  # position among the bindings of `name` in `scope` (set by Scope.bind), for source order


@dataclass(eq=False)
class Scope:
    kind: str  # module | class | function
    node: cst.CSTNode = field(repr=False)
    parent: Scope | None = field(repr=False)
    name: str = ""
    bindings: dict[str, list[Binding]] = field(default_factory=dict, repr=False)
    params: dict[str, cst.Param] = field(default_factory=dict, repr=False)
    # class scopes only: `self.x = ...` in any method, and the methods themselves
    attributes: dict[str, list[Binding]] = field(default_factory=dict, repr=False)
    methods: dict[str, Scope] = field(default_factory=dict, repr=False)
    bases: tuple[cst.BaseExpression, ...] = field(default=(), repr=False)
    returns: list[cst.BaseExpression] | None = field(default=None, repr=False)  # function scopes: calls.returned's

    def bind(self, binding: Binding) -> None:
        bindings = self.bindings.setdefault(binding.name, [])
        binding.order = len(bindings)
        bindings.append(binding)

    @property
    def enclosing_class(self) -> Scope | None:
        """The class whose method this function is (directly), if any."""
        if self.kind == "function" and self.parent is not None and self.parent.kind == "class":
            return self.parent
        return None

    @cached_property
    def self_name(self) -> str | None:
        """The name of `self` (the first parameter) of the method this scope is, or is nested in (kept: every
        `self.x` read asks it)."""
        method: Scope | None = self
        while method is not None and method.enclosing_class is None:
            method = method.parent
        if method is None or not isinstance(method.node, cst.FunctionDef):
            return None
        params = method.node.params.params or method.node.params.posonly_params
        return params[0].name.value if params else None


class ModuleContext:
    """What a rule may ask about the module it is visiting."""

    def __init__(self, module: cst.Module, path: str, source: str | None = None,
                 statement_lines: list[int] | None = None, project: Project | None = None,
                 limits: Limits | None = None, generated: dict | None = None,
                 body_lines: dict[int, list[int]] | None = None, names: Project | None = None,
                 shell: Shell | None = None):
        """`source` is the text `module` was parsed from and `statement_lines` the first line of each top-level
        statement in CPython's tree of it (mhalint.parse.positions.first_lines), when the caller has them: they spare
        generating the module's code again for lines and positions. `project` holds the run's other files.
        `limits` is the file's budget: the analyses call `limits.check()` in their loops (mhalint.run.budget).
        `generated`: top-level statements' generated code kept from an earlier version of the text (Positions).
        `body_lines`: the first lines of the statements in classes' and functions' bodies, likewise
        (mhalint.parse.positions.body_lines): positions inside a method then generate the method, not its class.
        `shell`: `module` has function bodies still to parse (mhalint.parse.lazy_bodies); the context then asks for them
        only as its questions need them (mhalint.parse.pending_scopes)."""
        self.module = module
        self.project = project
        # where imported names are looked up (`_from_project`, base classes): the project, also for another file
        # of it that the analyses read (whose own analyses do not look further)
        self.names = names if names is not None else project
        self.limits = limits if limits is not None else Limits(None)
        self.read_project = False  # set by an analysis that looked into other files: the findings depend on them
        self.other_file = False  # read for another file's analysis (analysis/project.py): evidence names its path
        self.path = path
        self._source = source
        self._statement_lines = statement_lines
        self._body_lines = body_lines
        self._positions: Positions | None = None
        self.generated = generated
        self.imports: dict[str, str] = {}  # local name -> dotted name it refers to
        self.star_imports: list[str] = []
        self.project_stars: list[str] = []  # `from .layers import *`: modules that may be files of the run
        self.root = Scope("module", module, None)
        self.scopes: dict[cst.CSTNode, Scope] = {module: self.root}
        # the node types that open a scope: a walk asks `scopes` only of those (libcst's __hash__ is Python code)
        self.scope_types = frozenset((cst.Module, cst.ClassDef, cst.FunctionDef))
        self.classes: dict[str, Scope] = {}  # every class in the module, by name (last definition wins)
        self.functions: dict[str, Scope] = {}  # module-level functions by name
        self.scope = self.root  # the scope around the node the engine is visiting; moved by the engine
        self._calls: list[tuple[cst.Call, Scope]] | None = None
        self._assignments: list[tuple[cst.Assign | cst.AugAssign, Scope]] | None = None
        self.memo: dict[str, dict] = {}  # per-module caches of the analyses (e.g. callers of a function)
        self.pending_reads = 0  # reads of an answer still being computed (a cycle): see `settled`
        self._shell = shell if shell is not None and shell.unparsed() else None
        self._partial: PartialIndex | None = None  # the index of what is parsed so far, while bodies are pending
        # while bodies are pending: name -> the names bound to it (`B = Block`, `self.cls = Block`), kept to find
        # the calls that may go through an alias without parsing every body
        self.aliases: dict[str, set[str]] = {}
        if self._shell is not None:
            from mhalint.parse.pending_scopes import SCOPE_TYPES  # only a context with pending bodies loads it

            self.scope_types = SCOPE_TYPES
            self._shell.listeners.append(self._body_parsed)
        _ScopeBuilder(self).body(module.body, self.root)

    def release(self) -> None:
        """Drop what this context built: the scopes, which point at one another, and the analyses' memoised
        readers, which point back at the context. Those cycles would keep the file's whole tree alive until a
        pass of the cyclic collector walked it (8% of a cold run, benchmarks/profile.py); broken, the tree is
        freed as soon as the check lets go of it. The context answers nothing afterwards."""
        if self._shell is not None:
            self._shell.listeners.remove(self._body_parsed)
        for scope in self.scopes.values():
            scope.__dict__.clear()
        self.__dict__.clear()

    def settled(self, table: str, key, compute: Callable[[], T]) -> T:
        """`memo[table][key]`, computed once; except that an answer whose computation read an answer still being
        computed (a cycle: an analysis that meets its own question counts it in `pending_reads`) may be
        incomplete, so it is not kept but computed again each time it is asked."""
        memo = self.memo.setdefault(table, {})
        if key in memo:
            return memo[key]
        before = self.pending_reads
        value = compute()
        if self.pending_reads == before:
            memo[key] = value
        return value

    # ---- positions (resolved lazily: only files with something to report pay for them) ----
    def position(self, node: cst.CSTNode):
        return self._positions_of_module()[node]

    def _positions_of_module(self) -> Positions:
        if self._positions is None:
            from mhalint.parse.positions import Positions, statement_starts  # imported when first needed

            lines = self._statement_lines
            starts = statement_starts(self.module.body, lines) if lines is not None else None
            self._positions = Positions(self.module, self.source(), starts, self.parent, self.generated,
                                        self._body_lines)
        return self._positions

    def source(self) -> str:
        """The module's source text."""
        if self._source is None:
            self._source = self.module.code
        return self._source

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The node `node` sits in (built by `walk_indexed`, or for the whole module on first use)."""
        if "parents" not in self.memo:
            if self._shell is not None:
                self.memo["parents"] = self.parsed().parents
            else:
                self._index_tree()
        return self.memo["parents"].get(node)

    # ---- bodies parsed on demand (mhalint.parse.lazy_bodies, mhalint.parse.pending_scopes) ----
    @property
    def partial(self) -> bool:
        """Some function bodies are not parsed yet."""
        return self._shell is not None

    def parsed(self) -> PartialIndex:
        """The index of what is parsed so far (while bodies are pending): parents, calls by scope and by name,
        assignments, in source order; a question reads it after `parse_holding` has parsed the bodies it needs."""
        if self._partial is None:
            from mhalint.parse.pending_scopes import PartialIndex

            self._partial = PartialIndex(self.module, self.scopes, self.root, lambda: self.limits.check())
        return self._partial

    def _body_parsed(self, function: cst.FunctionDef) -> None:
        """A pending body has just been parsed: its names join its scope, its `self.x` its class, its nodes the
        index, as a whole parse would have had them."""
        scope = self.scopes.get(function)
        if scope is None:
            return
        _ScopeBuilder(self).suite(function.body, scope)
        scope.bindings = dict(dict.items(scope.bindings))  # all of them now: reads need no parse any more
        klass = scope.enclosing_class
        if klass is not None and hasattr(klass.attributes, "settle"):
            klass.attributes.settle()
        if self._partial is not None:
            self._partial.parsed(function)

    def parse_holding(self, word: str) -> None:
        """Parse the pending bodies that have `word` in them: those that may name what a question is about."""
        for function in self._shell.holding(word) if self._shell is not None else ():
            function.body  # noqa: B018 -- reading it parses it

    def calls_through_aliases(self, name: str) -> list[tuple[cst.Call, Scope]]:
        """While bodies are pending: the calls written with `name`, or with a name an alias chain binds to it, as
        the called name or attribute (`Block(...)`, `B(...)` after `B = Block`, `self.cls(...)` after
        `self.cls = Block`), in source order; the bodies that may hold such an alias or call are parsed first.
        Every call whose callee resolves to `name` through bindings (ModuleContext.qualified_name) is among them."""
        words, frontier = {name}, [name]
        while frontier:
            word = frontier.pop()
            self.parse_holding(word)
            for alias in self.aliases.get(word, ()):
                if alias not in words:
                    words.add(alias)
                    frontier.append(alias)
        return self.parsed().calls_named_any(words)

    def parse_all(self) -> None:
        """A question about the whole module: every body is parsed, and the context indexes it as it would a
        module parsed whole."""
        if self._shell is not None:
            self._shell.parse_all()
            self._shell.listeners.remove(self._body_parsed)
            self._shell = self._partial = None
            self.memo.pop("parents", None)

    def source_lines(self) -> list[str]:
        """The module's source split into lines, keeping each line's ending."""
        if "lines" not in self.memo:
            code = self.source()
            starts = line_starts(code)
            self.memo["lines"] = [code[a:b] for a, b in zip(starts, starts[1:] + [len(code)])]
        return self.memo["lines"]

    def line(self, node: cst.CSTNode) -> int:
        if isinstance(node, cst.FunctionDef | cst.ClassDef):  # its position would generate all its code
            line = self._positions_of_module().definition_line(node)
            if line is not None:
                return line
        return self.position(node).start.line

    def end_line(self, node: cst.CSTNode) -> int:
        """The line a node's code ends on. A class or function ends where its body's last statement does (unless
        comment lines close its block): the position of the whole definition would generate all its code."""
        while isinstance(node, cst.FunctionDef | cst.ClassDef) and isinstance(node.body, cst.IndentedBlock) \
                and not node.body.footer:
            node = node.body.body[-1]
        return self.position(node).end.line

    def code(self, node: cst.CSTNode) -> str:
        """The source text of an expression, on one line, for messages."""
        text = self._positions_of_module().text(node)  # sliced from the source: no code generation of its own
        if text is None:
            text = self.module.code_for_node(node)
        return " ".join(text.split())

    # ---- names ----
    def qualified_name(self, expr: cst.BaseExpression, scope: Scope | None = None) -> str | None:
        """The dotted name an expression refers to through the imports, canonicalised to torch's public name.

        A name the module itself defines (a project class called MultiheadAttention) is not torch's: it resolves to
        `<module>.Name`.
        """
        scope = scope or self.root
        memo = self.memo.get("qualified_name")
        if memo is None:
            memo = self.memo["qualified_name"] = {}
        key = (id(expr), id(scope))  # ids: asked of most calls by every rule, and a node's hash is Python code
        found = memo.get(key)
        if found is None:
            found = memo[key] = (torchapi.canonical(self._dotted(expr, scope, depth=0)), expr)  # the node kept: its id
        return found[0]

    def _dotted(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> str | None:
        if depth > 8:
            return None
        kind = type(expr)  # Attribute and Name are concrete: compared by type (libcst's isinstance is slower)
        if kind is cst.Attribute:
            base = self._dotted(expr.value, scope, depth + 1)
            if base is None and type(expr.value) is cst.Name and expr.value.value == scope.self_name:
                found = self.attribute_bindings(expr, scope)  # `attn_cls = nn.MultiheadAttention` in the class
                if found and len(found) == 1 and found[0].kind == "assign" \
                        and isinstance(found[0].value, (cst.Name, cst.Attribute)):
                    return self._dotted(found[0].value, found[0].scope, depth + 1)
            return f"{base}.{expr.attr.value}" if base else None
        if kind is not cst.Name:
            return None
        name = expr.value
        for binding in self._lookup(name, scope):
            if binding.kind == "import":
                dotted = self.imports.get(name)
                return dotted if dotted is not None and dotted.startswith("torch") else \
                    self._from_project(name) or dotted
            if binding.kind == "def":
                return f"<module>.{name}"
            value = binding.value
            if binding.kind == "unpack" and isinstance(value, cst.Tuple | cst.List) and binding.index is not None \
                    and binding.index < len(value.elements) and not any(
                        isinstance(e, cst.StarredElement) for e in value.elements):
                value = value.elements[binding.index].value  # `MHA, Layer = nn.MultiheadAttention, ...`
            elif binding.kind != "assign":
                return None
            if isinstance(value, (cst.Name, cst.Attribute)):
                # `MHA = nn.MultiheadAttention` at module level: an alias
                return self._dotted(value, binding.scope, depth + 1)
            return None
        if name in self.imports:
            return self.imports[name]
        for module in self.star_imports:
            candidate = torchapi.canonical(f"{module}.{name}")
            if candidate in torchapi.CALLS or candidate in torchapi.CONSTRUCTORS:
                return candidate
        return self._from_project(name) if self.project_stars else None

    def _from_project(self, name: str) -> str | None:
        """The torch name an imported name stands for in the file of the run it comes from (a re-export, an
        alias there, a star import of it); memoised. The findings then depend on that file (`read_project`)."""
        if self.names is None:
            return None
        memo = self.memo.setdefault("from_project", {})
        if name not in memo:
            memo[name] = self.names.torch_name(self.path, name, self.project_stars, self.limits)
        if memo[name] is not None:
            self.read_project = True
        return memo[name]

    def _lookup(self, name: str, scope: Scope) -> Iterator[Binding]:
        """The bindings of `name` in the innermost scope that binds it, the last one first."""
        return reversed(self.bindings(name, scope))

    def bindings(self, name: str, scope: Scope) -> list[Binding]:
        """The bindings of `name` in the innermost scope that binds it (class bodies are skipped, as in Python),
        in source order: that scope's own list, not a copy (a name bound N times is asked about N times), so
        not to be modified."""
        current: Scope | None = scope
        while current is not None:
            if current.kind != "class" or current is scope:
                found = current.bindings.get(name)
                if found is not None:
                    return found
            current = current.parent
        return []

    def comment(self, line: int) -> str | None:
        """The comment on a source line, if any. Only a line with a `#` is looked at, and only the top-level
        statement around it is tokenized (on first use), not the whole file."""
        lines = self.source_lines()
        if not 1 <= line <= len(lines) or "#" not in lines[line - 1]:
            return None
        first, last = 1, len(lines)
        if self._statement_lines:
            first, last = statement_lines_around(line, self._statement_lines, len(lines))
        table = self.memo.setdefault("comments", {})
        if first not in table:
            table[first] = {first + number - 1: text
                            for number, text in comments("".join(lines[first - 1:last])).items()}
        return table[first].get(line)

    def calls(self) -> list[tuple[cst.Call, Scope]]:
        """Every call in the module with the scope it is in (built by `walk_indexed`, or on first use)."""
        if self._calls is None:
            self.parse_all()
            self._index_tree()
        return self._calls

    def assignments(self) -> list[tuple[cst.Assign | cst.AugAssign, Scope]]:
        """Every `=` and augmented assignment statement with the scope it is in, in source order (built by
        `walk_indexed`, or on first use): an analysis that looks for some of them filters these instead of walking
        the module again."""
        if self._assignments is None:
            self.parse_all()
            self._index_tree()
        return self._assignments

    def _index_tree(self) -> None:
        self.walk_indexed(NO_TYPES, NO_TYPES)

    def walk_indexed(self, visited: Mapping[type, bool],
                     left: Mapping[type, bool]) -> list[tuple[bool, cst.CSTNode, Scope]]:
        """One walk over the module: each node's parent (`parent`), every call and assignment with its scope
        (`calls`, `assignments`), kept, and the events of the walk the engine hands to the rules, returned: in
        walk order, (True, node, scope) on entering a node whose type `visited` maps to True and (False, node,
        scope) on leaving one `left` does, `scope` the innermost around it (a class's or function's own). Most
        files' analyses need the index, and a walk over a model file's tree is tens of milliseconds: the rules
        do not walk it again."""
        if self._shell is not None:  # the parsed part only: the bodies still pending are not handed to the rules
            if self._partial is None:  # the index of the parsed part, built by the same walk
                from mhalint.parse.pending_scopes import PartialIndex

                self._partial = PartialIndex(self.module, self.scopes, self.root, lambda: self.limits.check(),
                                             visited, left)
                events, self._partial.events = self._partial.events, []
                return events
            def parsed_part(root: cst.CSTNode, enter: Callable, leave: Callable) -> None:
                walk_parsed(root, enter, leave, nothing)

            return scoped_walk(self.module, self.root, self.scopes, self.scope_types, self.limits.check, {},
                               lambda node, scope: None, parsed_part, visited=visited, left=left)
        parents: dict[cst.CSTNode, cst.CSTNode] = {}
        calls: list[tuple[cst.Call, Scope]] = []
        assignments: list[tuple[cst.Assign | cst.AugAssign, Scope]] = []
        call_type = cst.Call

        def indexed(node: cst.CSTNode, scope: Scope) -> None:
            (calls if type(node) is call_type else assignments).append((node, scope))

        events = scoped_walk(self.module, self.root, self.scopes, self.scope_types, self.limits.check, parents,
                             indexed, walk, visited=visited, left=left)
        self.memo["parents"] = parents
        self._calls = calls
        self._assignments = assignments
        return events

    def calls_in(self, scope: Scope) -> list[tuple[cst.Call, Scope]]:
        """The calls whose scope is `scope` (not those of functions nested in it), in source order."""
        if self._shell is not None:
            if isinstance(scope.node, cst.FunctionDef):
                scope.node.body  # noqa: B018 -- reading a pending body parses it
            return self.parsed().calls_in(scope)
        return self._call_index()[0].get(scope, [])

    def calls_named(self, name: str) -> list[tuple[cst.Call, Scope]]:
        """The calls written `name(...)` or `<anything>.name(...)`, in source order: every call that may run a
        function or method called `name` is among them."""
        if self._shell is not None:
            self.parse_holding(name)  # the only pending bodies that may hold such a call
            return self.parsed().calls_named(name)
        return self._call_index()[1].get(name, [])

    def _call_index(self) -> tuple[dict[Scope, list], dict[str, list]]:
        """`calls()` grouped by scope and by the called name, so that a question about one function costs its
        calls, not a pass over the module's (which made a file of N such questions quadratic)."""
        if "call_index" not in self.memo:
            by_scope: dict[Scope, list] = {}
            by_name: dict[str, list] = {}
            for call, scope in self.calls():
                by_scope.setdefault(scope, []).append((call, scope))
                name = called_word(call)
                if name is not None:
                    by_name.setdefault(name, []).append((call, scope))
            self.memo["call_index"] = (by_scope, by_name)
        return self.memo["call_index"]

    def attribute_bindings(self, expr: cst.BaseExpression, scope: Scope) -> list[Binding] | None:
        """The bindings of `self.x` (assignments in any method, register_buffer, the class body) when `expr` is
        `self.x` in a method (or a function nested in one); None for any other expression."""
        if not (type(expr) is cst.Attribute and type(expr.value) is cst.Name  # by type: faster than ABC isinstance
                and expr.value.value == scope.self_name):
            return None
        klass = self.class_of(scope)
        return self._attribute(klass, expr.attr.value, 0) if klass is not None else []

    def _attribute(self, klass: Scope, name: str, depth: int) -> list[Binding]:
        """A class's bindings of `self.name`, else those of the first base in this file that binds it (a method
        of a subclass reads what the base's `__init__` set)."""
        own = klass.attributes.get(name)
        if own or depth > 8:
            return own or []
        for base in klass.bases:
            qualified = self.qualified_name(base, klass.parent) or ""
            parent = self.classes.get(qualified[len("<module>."):]) if qualified.startswith("<module>.") else None
            found = self._attribute(parent, name, depth + 1) if parent is not None and parent is not klass else []
            if found:
                return found
        return []

    def scope_of(self, node: cst.CSTNode) -> Scope | None:
        return self.scopes.get(node)

    def class_of(self, scope: Scope | None) -> Scope | None:
        """The class a function scope belongs to, looking through nested functions."""
        while scope is not None:
            if scope.kind == "class":
                return scope
            scope = scope.parent
        return None


_CHECK_EVERY = 64  # nodes walked between two looks at the budget: well under a millisecond


def scoped_walk(root: cst.CSTNode, scope: Scope, scopes: Mapping[cst.CSTNode, Scope], scope_types: frozenset,
                check: Callable[[], None], parents: dict[cst.CSTNode, cst.CSTNode],
                indexed: Callable[[cst.CSTNode, Scope], None], walker: Callable, parent: cst.CSTNode | None = None,
                visited: Mapping[type, bool] = NO_TYPES,
                left: Mapping[type, bool] = NO_TYPES) -> list[tuple[bool, cst.CSTNode, Scope]]:
    """Walk `root`, whose nodes lie in `scope` (under `parent`), with `walker` (mhalint.parse.walk's `walk` or
    `walk_parsed`): each node's parent goes into `parents`, each call and assignment to `indexed` with the innermost
    scope around it (`scopes` maps the nodes of `scope_types` that open one), and the events `walk_indexed` describes
    are returned. The one indexing walk of a module, whole or parsed a body at a time (mhalint.parse.pending_scopes)."""
    events: list[tuple[bool, cst.CSTNode, Scope]] = []
    path: list[cst.CSTNode] = [parent] if parent is not None else []
    stack = [scope]
    call_type, assignment_types = cst.Call, (cst.Assign, cst.AugAssign)
    until_check = 1

    def enter(node: cst.CSTNode) -> bool:
        nonlocal until_check
        until_check -= 1
        if not until_check:  # the file's time and memory budget (mhalint.run.budget): cooperative, in this thread
            until_check = _CHECK_EVERY
            check()
        if path:
            parents[node] = path[-1]
        path.append(node)
        node_type = type(node)
        if node_type in scope_types:
            inner = scopes.get(node)
            if inner is not None:
                stack.append(inner)
        elif node_type is call_type or node_type in assignment_types:
            indexed(node, stack[-1])
        if visited[node_type]:
            events.append((True, node, stack[-1]))
        return True

    def leave(node: cst.CSTNode) -> None:
        path.pop()
        node_type = type(node)
        if left[node_type]:
            events.append((False, node, stack[-1]))
        if node_type in scope_types and node in scopes and len(stack) > 1:
            stack.pop()

    walker(root, enter, leave)
    return events


def called_word(call: cst.Call) -> str | None:
    """The name a call is written with: `f` in `f(...)` and in `<anything>.f(...)` (what `calls_named` keys)."""
    func = call.func
    kind = type(func)  # Name and Attribute are concrete: compared by type (libcst's isinstance is slower)
    return func.value if kind is cst.Name else func.attr.value if kind is cst.Attribute else None


def _alias_words(value: cst.BaseExpression, index: int | None) -> set[str]:
    """The names an assigned value may be an alias of, as qualified names follow them: a name, `self.x`, or the
    element of a tuple the target unpacks (any element when that is not known)."""
    if isinstance(value, cst.Name):
        return {value.value}
    if isinstance(value, cst.Attribute):
        return {value.attr.value}
    if isinstance(value, cst.Tuple | cst.List):
        elements = [element.value for element in value.elements]
        chosen = elements[index:index + 1] if index is not None and index < len(elements) else elements
        return {word for element in chosen for word in _alias_words(element, None)}
    return set()


class _ScopeBuilder:
    """Walks statements (not expressions) once and fills a ModuleContext."""

    def __init__(self, ctx: ModuleContext):
        self.ctx = ctx

    def body(self, statements, scope: Scope) -> None:
        for statement in statements:
            self.statement(statement, scope)

    # Node types are compared with `type(...) is`: the statements and targets named here have no subclasses but
    # LazyFunctionDef, and libcst's isinstance goes through ABCMeta's Python-level check whenever it is False.
    def statement(self, node: cst.CSTNode, scope: Scope) -> None:
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            for small in node.body:
                self.small_statement(small, scope)
        elif kind is cst.ClassDef:
            self.klass(node, scope)
        elif kind is cst.FunctionDef or getattr(kind, "body_pending", False):
            self.function(node, scope)
        else:
            self.compound(node, scope)

    def compound(self, node: cst.CSTNode, scope: Scope) -> None:
        """if/for/while/with/try/match: their bodies belong to the enclosing scope."""
        kind = type(node)
        if kind is cst.For:
            self.target(node.target, node.iter, scope, node, kind="for")
        elif kind is cst.With:
            for item in node.items:
                if item.asname is not None:
                    self.target(item.asname.name, item.item, scope, node, kind="with")
        suites, clauses = (cst.IndentedBlock, cst.SimpleStatementSuite), (
            cst.Else, cst.Finally, cst.If, cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase)
        for child in node.children:
            kind = type(child)
            if kind in suites:
                self.suite(child, scope)
            elif kind in clauses:
                self.compound(child, scope)

    def suite(self, suite: cst.BaseSuite, scope: Scope) -> None:
        if type(suite) is cst.SimpleStatementSuite:
            for small in suite.body:
                self.small_statement(small, scope)
        else:
            self.body(suite.body, scope)

    def small_statement(self, node: cst.BaseSmallStatement, scope: Scope) -> None:
        kind = type(node)
        if kind is cst.Assign:
            for target in node.targets:
                self.target(target.target, node.value, scope, node)
        elif kind is cst.AnnAssign and node.value is not None:
            self.target(node.target, node.value, scope, node)
        elif kind is cst.AugAssign:
            self.target(node.target, None, scope, node, kind="augmented")
        elif kind is cst.Import:
            for alias in node.names:
                dotted = self.ctx.module.code_for_node(alias.name)
                if alias.asname is not None:
                    local = alias.asname.name.value
                    self.ctx.imports[local] = dotted
                else:
                    local = dotted.split(".")[0]
                    self.ctx.imports[local] = local
                scope.bind(Binding(local, None, scope, node, kind="import"))
        elif kind is cst.ImportFrom:
            self.import_from(node, scope)
        elif kind is cst.Expr and type(node.value) is cst.Call:
            self.register_buffer(node.value, scope)

    def import_from(self, node: cst.ImportFrom, scope: Scope) -> None:
        written = "." * len(node.relative) + (self.ctx.module.code_for_node(node.module) if node.module else "")
        if isinstance(node.names, cst.ImportStar):
            (self.ctx.star_imports if written.startswith("torch") else self.ctx.project_stars).append(written)
            return
        for alias in node.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else self.ctx.module.code_for_node(alias.name)
            local = alias.asname.name.value if alias.asname is not None else name
            if not node.relative:  # a relative import is the project's own code: the project index reads it
                self.ctx.imports[local] = f"{written}.{name}"
            scope.bind(Binding(local, None, scope, node, kind="import"))

    def register_buffer(self, call: cst.Call, scope: Scope) -> None:
        """`self.register_buffer("mask", value)` binds the attribute `self.mask` like an assignment does."""
        func = call.func
        if (isinstance(func, cst.Attribute) and func.attr.value == "register_buffer"
                and isinstance(func.value, cst.Name) and func.value.value == scope.self_name
                and len(call.args) >= 2 and isinstance(call.args[0].value, cst.SimpleString)):
            klass = scope.enclosing_class
            name = literal(call.args[0].value)
            if klass is not None and isinstance(name, str):
                klass.attributes.setdefault(name, []).append(Binding(name, call.args[1].value, scope, call))

    def target(self, target: cst.BaseExpression, value, scope: Scope, node, kind: str = "assign",
               index: int | None = None) -> None:
        target_type = type(target)
        if self.ctx._shell is not None and value is not None and target_type in (cst.Name, cst.Attribute):
            bound = target.value if target_type is cst.Name else target.attr.value
            for word in _alias_words(value, index):
                self.ctx.aliases.setdefault(word, set()).add(bound)
        if target_type is cst.Name:
            scope.bind(Binding(target.value, value, scope, node, kind=kind if index is None else "unpack",
                               index=index))
        elif target_type is cst.Tuple or target_type is cst.List:
            for position, element in enumerate(target.elements):
                inner = element.value
                if type(element) is cst.StarredElement:
                    self.target(inner, None, scope, node, kind="unpack")
                else:
                    self.target(inner, value, scope, node, kind=kind, index=position)
        elif target_type is cst.Attribute and type(target.value) is cst.Name:
            klass = scope.enclosing_class
            if klass is not None and target.value.value == scope.self_name:
                attribute = target.attr.value
                klass.attributes.setdefault(attribute, []).append(
                    Binding(attribute, value, scope, node, kind=kind if index is None else "unpack", index=index))

    def function(self, node: cst.FunctionDef, scope: Scope) -> None:
        scope.bind(Binding(node.name.value, None, scope, node, kind="def"))
        inner = Scope("function", node, scope, name=node.name.value)
        pending = self.ctx._shell is not None and getattr(type(node), "body_pending", False)
        if pending:
            from mhalint.parse.pending_scopes import PendingBindings

            inner.bindings = PendingBindings(node)  # read, they parse the body (ModuleContext._body_parsed)
        self.ctx.scopes[node] = inner
        if scope.kind == "class":
            scope.methods[node.name.value] = inner
        elif scope.kind == "module":
            self.ctx.functions[node.name.value] = inner
        parameters = node.params
        for param in (*parameters.posonly_params, *parameters.params, *parameters.kwonly_params):
            inner.params[param.name.value] = param
            inner.bind(Binding(param.name.value, param.default, inner, param, kind="param"))
        for star in (parameters.star_arg, parameters.star_kwarg):
            if isinstance(star, cst.Param):
                inner.bind(Binding(star.name.value, None, inner, star, kind="param"))
        if not pending:
            self.suite(node.body, inner)

    def klass(self, node: cst.ClassDef, scope: Scope) -> None:
        scope.bind(Binding(node.name.value, None, scope, node, kind="def"))
        inner = Scope("class", node, scope, name=node.name.value, bases=tuple(arg.value for arg in node.bases))
        self.ctx.scopes[node] = inner
        self.ctx.classes[node.name.value] = inner
        self.suite(node.body, inner)
        # class-body assignments (`num_heads = 8`) are attributes too: `self.num_heads` reads them
        for name, bindings in inner.bindings.items():
            if name not in inner.methods:
                inner.attributes.setdefault(name, [])[:0] = bindings
        if self.ctx._shell is not None and isinstance(node.body, cst.IndentedBlock):
            methods = [self.ctx.scopes[statement] for statement in node.body.body
                       if isinstance(statement, cst.FunctionDef)]
            if any(getattr(type(method.node), "body_pending", False) for method in methods):
                from mhalint.parse.pending_scopes import PendingAttributes

                inner.attributes = PendingAttributes(inner.attributes, self.ctx._shell, methods)
