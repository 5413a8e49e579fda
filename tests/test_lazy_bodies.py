"""Function bodies parsed on demand (mhalint.parse.lazy_bodies, mhalint.parse.pending_scopes): every reader sees what a whole
parse gives, and a question parses only the bodies that can change its answer."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import libcst
import pytest

from mhalint.analysis.calls import callers
from mhalint.analysis.containers import additions
from mhalint.analysis.project import Project
from mhalint.context import ModuleContext
from mhalint.parse import lazy_bodies
from mhalint.parse.lazy_bodies import LazyFunctionDef
from mhalint.parse.trusted_parse import BodyParseError
from mhalint.parse.walk import own_nodes, walk
from mhalint.rule import load_rules
from mhalint.run.budget import Limits
from mhalint.run.engine import Checker

REPOSITORY = Path(__file__).resolve().parents[1]
OWN_SOURCES = sorted(path for folder in ("mhalint", "tests", "benchmarks", "docs")
                     for path in (REPOSITORY / folder).rglob("*.py"))

# What a body may hold that a parse of it alone could get wrong: comments after it that a nested block owns,
# strings and continuation lines less indented than the body, tabs, CRLF newlines, decorators, a first block
# indented differently from the methods, docstrings, bodies that start on the header's line.
TRICKY = {
    "trailing comments": '''
class A:
    def f(self, x):
        if x:
            y = 1
            z = 2
            # owned by the `if` block
        # owned by the body
    # before the next method

    def g(self):
        return 1
''',
    "strings and continuations": '''
def f(x):
    text = """
no indentation here
  nor here"""
    total = (x +
  1)
    return text, \\
        total
''',
    "tabs": "def f(x):\n\ty = x\n\tz = y\n\tw = z\n\treturn w\n",
    "crlf": "class A:\r\n    def f(self):\r\n        a = 1\r\n        b = 2\r\n        c = 3\r\n        return a\r\n",
    "two-space first block": '''
class Small:
  """Two spaces."""

class Big:
    def f(self):
        """Doc."""
        a = 1
        b = 2
        return a + b
''',
    "decorators and async": '''
import functools

class A:
    @property
    def x(self):
        value = 1
        value += 1
        value *= 2
        return value

    @x.setter
    def x(self, value):
        self._x = value
        self.y = value
        self.z = value
        self.w = value

@functools.cache
async def run(a):
    b = await a
    c = b
    d = c
    return d
''',
    "header-line bodies": "def f(x): return x\nclass A:\n    def g(self): return 1\n    def h(self,\n          y): z = y; return z\n",
    "no trailing newline": "def f(x):\n    a = x\n    b = a\n    c = b\n    return c",
}


def _sources():
    yield from ((name, text) for name, text in TRICKY.items())
    yield from ((str(path.relative_to(REPOSITORY)), path.read_text()) for path in OWN_SOURCES)


@pytest.mark.parametrize("name, text", list(_sources()), ids=lambda value: value if len(value) < 80 else "")
def test_every_body_read_gives_the_tree_of_a_whole_parse(name: str, text: str):
    shell = lazy_bodies.parse(text, ast.parse(text))
    shell.parse_all()
    assert shell.module.code == text
    assert shell.module.deep_equals(libcst.parse_module(text))


def test_the_shell_leaves_out_long_bodies_only():
    shell = lazy_bodies.parse(TRICKY["decorators and async"], ast.parse(TRICKY["decorators and async"]))
    assert [function.name.value for function in shell.unparsed()] == ["x", "x", "run"]
    header_only = lazy_bodies.parse(TRICKY["header-line bodies"], ast.parse(TRICKY["header-line bodies"]))
    assert header_only.unparsed() == []


def test_a_body_is_parsed_when_read_and_only_that_body():
    text = TRICKY["decorators and async"]
    shell = lazy_bodies.parse(text, ast.parse(text))
    first = shell.unparsed()[0]
    assert type(first) is LazyFunctionDef
    assert isinstance(first.body, libcst.IndentedBlock)
    assert type(first) is libcst.FunctionDef
    assert len(shell.unparsed()) == 2


def test_a_walk_sees_each_node_as_it_stays():
    """A pending body under the walked node is parsed before the walk: enter and leave see the same types."""
    text = TRICKY["trailing comments"]
    shell = lazy_bodies.parse(text, ast.parse(text))
    entered, left = [], []
    walk(shell.module, lambda node: entered.append(type(node)) or True, lambda node: left.append(type(node)))
    assert sorted(map(str, entered)) == sorted(map(str, left))
    assert LazyFunctionDef not in entered and shell.unparsed() == []


def test_a_walk_from_a_class_block_sees_its_methods_as_a_whole_parse_does():
    """A pending method directly under the walked node (a class's block) is parsed before the walk: a walk that
    stops at nested functions stops at it, as at any method."""
    text = "class A:\n    def f(self):\n        def g():\n            return 1\n        a = 1\n        return a\n"
    shell = lazy_bodies.parse(text, ast.parse(text))
    assert shell.unparsed()
    lazily = own_nodes(shell.module.body[0].body, (libcst.FunctionDef,))
    assert [function.name.value for function in lazily] == ["f"]


def test_full_parse_mode_leaves_nothing_out(monkeypatch):
    monkeypatch.setenv("MHALINT_FULL_PARSE", "1")
    text = TRICKY["decorators and async"]
    assert lazy_bodies.parse(text, ast.parse(text)).unparsed() == []


PROJECT_FILE = '''
import torch.nn as nn


class Block(nn.Module):
    scale = 2

    def __init__(self, dim, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads)
        self.norm = nn.LayerNorm(dim)
        self.heads = heads

    def forward(self, x):
        y = self.norm(x)
        y = self.attn(y, y, y)[0]
        z = helper(y)
        return z

    def extra(self):
        self.other = 1
        a = 1
        b = 2
        return a + b


def helper(t):
    u = t * 2
    v = u + 1
    w = Block(4, 2)
    return v
'''


def _context(tmp_path: Path, text: str) -> tuple[ModuleContext, lazy_bodies.Shell]:
    path = tmp_path / "layers.py"
    path.write_text(text)
    context = Project([str(path)]).context(str(path), Limits(None))
    return context, context._shell


def test_a_question_parses_only_the_bodies_that_may_answer_it(tmp_path: Path):
    context, shell = _context(tmp_path, PROJECT_FILE)
    names = lambda: sorted(function.name.value for function in shell.unparsed())  # noqa: E731
    assert names() == ["__init__", "extra", "forward", "helper"]
    assert [context.code(call) for call, _ in context.calls_named("Block")] == ["Block(4, 2)"]
    assert names() == ["__init__", "extra", "forward"]
    block = context.classes["Block"]
    assert [binding.scope.name for binding in block.attributes.get("heads")] == ["__init__"]
    assert names() == ["extra", "forward"]  # `self.attn` would parse `forward` too: it holds the word
    assert context.line(context.calls_named("helper")[0][0]) == 17
    assert names() == ["extra"]


def test_a_whole_module_question_parses_every_body(tmp_path: Path):
    context, shell = _context(tmp_path, PROJECT_FILE)
    assert len(context.calls()) == 8
    assert shell.unparsed() == [] and not context.partial


def _answers(context: ModuleContext, text: str) -> dict:
    """What the analyses ask a context, as text, the keyed questions first (while most bodies are pending): a
    class's constructions and what is added to its attributes; calls by name and by scope, each scope's
    bindings, each class's attributes, in order."""
    answers = {}
    for klass in list(context.classes.values()):
        init = klass.methods.get("__init__")
        if init is not None:
            answers[f"constructions of {klass.name}"] = [context.code(site.call) for site in callers(context, init)]
            answers[f"additions to {klass.name}"] = {
                name: [context.code(added.value) for added in additions(
                    context, libcst.parse_expression(f"{init.self_name}.{name}"), init)]
                for name in sorted({node.attr for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Attribute)})}
    words = sorted({name.id for name in ast.walk(ast.parse(text)) if isinstance(name, ast.Name)}
                   | {node.attr for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Attribute)})
    answers |= {f"calls named {word}": [context.code(call) for call, _ in context.calls_named(word)]
                for word in words}
    for node, scope in list(context.scopes.items()):
        label = f"{scope.kind} {scope.name} line {context.line(node) if scope.parent else 0}"
        answers[f"calls in {label}"] = [context.code(call) for call, _ in context.calls_in(scope)]
        answers[f"bindings of {label}"] = {name: [(binding.kind, binding.value and context.code(binding.value))
                                                  for binding in bindings]
                                           for name, bindings in scope.bindings.items()}
        if scope.kind == "class":
            answers[f"attributes of {label}"] = {
                name: [(binding.scope.name, binding.value and context.code(binding.value)) for binding in bindings]
                for name, bindings in scope.attributes.items()}
    return answers


MODEL = '''
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads)
        self.layers = nn.ModuleList()
        self.extra = []

    def grow(self, count):
        for _ in range(count):
            self.layers.append(nn.Linear(4, 4))
        self.extra += [nn.ReLU()]
        self.table = {}
        self.table["k"] = nn.Identity()


Alias = Block


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.kind = Alias
        self.blocks = [Alias(4, 2) for _ in range(2)]

    def build(self):
        made = self.kind(4, 2)
        other = Block(8, 2)
        another = Alias(8, 4)
        return made, other, another


def make():
    first = Block(4, 2)
    second = Alias(4, 2)
    third = Model()
    return first, second, third
'''


@pytest.mark.parametrize("name, text", [
    ("model", MODEL), *((path.name, path.read_text()) for path in (
        REPOSITORY / "mhalint" / "context.py", REPOSITORY / "mhalint" / "analysis" / "calls.py",
        REPOSITORY / "mhalint" / "rules" / "batch_first_default.py"))], ids=lambda value: value if len(value) < 40 else "")
def test_a_context_answers_as_over_a_whole_parse(tmp_path: Path, monkeypatch, name: str, text: str):
    lazy, shell = _context(tmp_path, text)
    assert shell is not None and shell.unparsed()
    answers = _answers(lazy, text)
    monkeypatch.setenv("MHALINT_FULL_PARSE", "1")
    whole, none = _context(tmp_path, text)
    assert none is None
    assert answers == _answers(whole, text)


def test_a_body_libcst_refuses_starts_the_check_again_with_whole_parses(tmp_path: Path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "layers.py").write_text(PROJECT_FILE)
    layers = tmp_path / "layers.py"  # checked alone: what Block gets is read in train.py, a body at a time
    (tmp_path / "train.py").write_text(textwrap.dedent('''
        import torch
        from layers import Block


        def run(tokens):
            x = torch.randn(2, 5, 4)  # (batch, seq, dim)
            model = Block(4, 2)
            y = model(x)
            return y
    '''))
    rules = list(load_rules().values())
    monkeypatch.setenv("MHALINT_FULL_PARSE", "1")
    expected = Checker(rules).check_paths([layers], jobs=1).findings
    monkeypatch.delenv("MHALINT_FULL_PARSE")
    monkeypatch.setattr(lazy_bodies, "_WHOLE_ONLY", False)

    def refuse(pending):
        raise BodyParseError("refused")

    monkeypatch.setattr(lazy_bodies.Pending, "parse", refuse)
    result = Checker(rules).check_paths([layers], jobs=1)
    assert lazy_bodies._WHOLE_ONLY
    assert result.findings == expected and expected and result.internal_errors == 0


def test_a_pending_class_keeps_its_attributes_in_source_order(tmp_path: Path):
    text = textwrap.dedent('''
        class A:
            x = 0

            def first(self):
                self.x = 1
                a = 1
                b = 2
                return a

            def second(self):
                self.x = 2
                a = 1
                b = 2
                return a
    ''')
    context, shell = _context(tmp_path, text)
    shell.unparsed()[1].body  # the second method first
    assert [binding.scope.name for binding in context.classes["A"].attributes["x"]] == ["A", "first", "second"]


def test_a_tree_dropped_with_bodies_unread_is_freed(tmp_path: Path):
    """The bodies still to parse belong to the tree: a context dropped before reading them leaves nothing alive
    (a long-lived caller, the language server, reads many files)."""
    import gc
    import weakref

    context, shell = _context(tmp_path, PROJECT_FILE)
    assert shell.unparsed()
    gone = weakref.ref(context)
    del context, shell
    gc.collect()
    assert gone() is None
