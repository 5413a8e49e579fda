"""What the engine does the same way for every rule, tested once over every loaded rule's own examples (their
`valid` and `invalid`, which test_rule_examples.py runs as they are) instead of once per rule file:

* `# noqa` on the reported line silences the rule (bare, `NOQA`, `noqa:CODE`, `noqa: OTHER, CODE`); another
  rule's code, a longer code, a plain comment, or a directive on any other line does not;
* every spelling facts 9.1 gives for the torch class or function the example uses (tests/aliases.py), and any
  local name for its imports (`import torch.nn as nn_alias`), gives the same findings;
* project code that only shares torch's names is not torch: the same example with its torch imports replaced by
  local classes, by an import from the project (`from .project import nn`), or with the torch class or function
  it calls replaced by a local one of the same name, gets no finding from the rule.

A plugin rule is covered as soon as it is installed (it is found through `load_rules()`).
"""

from __future__ import annotations

import functools
import io
import textwrap
import tokenize

import libcst as cst
import pytest
from aliases import spellings
from conftest import lint

from mhalint import torchapi
from mhalint.finding import Finding, Severity
from mhalint.rule import load_rules

RULES = load_rules()
CODES = sorted(RULES)

# The torch objects whose spellings the examples may use, by canonical name.
TARGETS = {torchapi.MHA, torchapi.TRANSFORMER, torchapi.ENCODER, torchapi.DECODER, torchapi.ENCODER_LAYER,
           torchapi.DECODER_LAYER, torchapi.SDPA, torchapi.MHA_FORWARD_FN}
FUNCTIONS = {torchapi.SDPA, torchapi.MHA_FORWARD_FN}


def function_spellings(name: str) -> list[tuple[str, str]]:
    """(import line, callee expression) for the ways torch.nn.functional's `name` can be reached (facts 9.1)."""
    forms = [
        ("import torch", f"torch.nn.functional.{name}"),
        ("import torch.nn.functional as F", f"F.{name}"),
        ("from torch.nn import functional as F", f"F.{name}"),
        (f"from torch.nn.functional import {name}", name),
        (f"from torch.nn.functional import {name} as Alias", "Alias"),
    ]
    if name == "scaled_dot_product_attention":
        forms += [
            ("import torch", f"torch._C._nn.{name}"),
            (f"from torch._C._nn import {name} as Alias", "Alias"),
            ("import torch", f"torch.ops.aten.{name}"),
        ]
    return forms


def spellings_of(canonical: str) -> list[tuple[str, str]]:
    short = canonical.rsplit(".", 1)[1]
    return function_spellings(short) if canonical in FUNCTIONS else spellings(short)


# ---- the examples --------------------------------------------------------------------------------------------------
def _examples(kind: str) -> list[tuple[str, str]]:
    """(code, source) of every rule's `kind` examples, dedented."""
    return [(code, textwrap.dedent(example.code)) for code in CODES for example in getattr(RULES[code], kind)]


INVALID = _examples("invalid")
VALID = _examples("valid")


def _ids(kind: str) -> list[str]:
    ids, seen = [], {}
    for code in CODES:
        for _ in getattr(RULES[code], kind):
            seen[code] = seen.get(code, -1) + 1
            ids.append(f"{code}-{kind}-{seen[code]}")
    return ids


@functools.lru_cache(maxsize=None)
def _found(source: str, code: str) -> tuple[Finding, ...]:
    findings = lint(source, select=code, min_severity="info")
    assert not [f for f in findings if f.code.startswith("MHA9")], (findings, source)
    return tuple(f for f in findings if f.code == code)


def found(source: str, code: str) -> list[Finding]:
    """The rule's findings on `source`; an engine diagnostic (MHA9xx: a crash, a parse error) fails the test."""
    return list(_found(source, code))


def signature(findings: list[Finding], shift: int = 0) -> list[tuple[int, int, object]]:
    return sorted((f.line - shift, f.column, f.severity) for f in findings)


def other_code(code: str) -> str:
    """Another loaded rule's code (the next one)."""
    return CODES[(CODES.index(code) + 1) % len(CODES)]


# ---- source rewriting ----------------------------------------------------------------------------------------------
def _comment_columns(source: str) -> dict[int, int]:
    """Line -> the column where that line's comment starts."""
    return {token.start[0]: token.start[1] for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT}


def with_comment(source: str, lines: set[int], comment: str) -> str:
    """`source` with `comment` ending each of `lines` (in place of the comment already there)."""
    columns = _comment_columns(source)
    out = []
    for number, line in enumerate(source.splitlines(keepends=True), 1):
        if number in lines:
            body = line.rstrip("\r\n")
            ending = line[len(body):]
            body = body[:columns[number]].rstrip() if number in columns else body.rstrip()
            line = f"{body}  {comment}{ending}"
        out.append(line)
    rewritten = "".join(out)
    compile(rewritten, "rewritten.py", "exec")  # the comment went where a comment may go
    return rewritten


def _dotted(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


def _is_torch_import(statement: cst.CSTNode) -> bool:
    if isinstance(statement, cst.Import):
        return any((_dotted(alias.name) or "").split(".")[0] == "torch" for alias in statement.names)
    if isinstance(statement, cst.ImportFrom):
        return not statement.relative and (_dotted(statement.module) or "").split(".")[0] == "torch"
    return False


def _bindings(statement: cst.Import | cst.ImportFrom) -> dict[str, str]:
    """Local name -> the torch name it is bound to, for one import statement."""
    names = {}
    for alias in statement.names:
        dotted = _dotted(alias.name)
        if isinstance(statement, cst.Import):
            if alias.asname is not None:
                names[alias.asname.name.value] = dotted
            else:  # `import torch.nn.functional` binds torch
                names[dotted.split(".")[0]] = dotted.split(".")[0]
        else:
            local = alias.asname.name.value if alias.asname is not None else dotted
            names[local] = f"{_dotted(statement.module)}.{dotted}"
    return names


def torch_imports(source: str) -> list[tuple[int, dict[str, str]]]:
    """(line, bindings) of each module-level torch import statement."""
    module = cst.parse_module(source)
    result, line = [], 1 + len(module.header)
    for statement in module.body:
        line += len(statement.leading_lines)
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if _is_torch_import(small):
                    result.append((line, _bindings(small)))
        line += len(module.code_for_node(statement).splitlines()) - len(statement.leading_lines)
    return result


class _Definitions(cst.CSTVisitor):
    """The Name nodes that are not references: attribute names, keywords, parameter and definition names."""

    def __init__(self):
        self.ids: set[int] = set()

    def visit_Attribute(self, node):
        self.ids.add(id(node.attr))

    def visit_Arg(self, node):
        if node.keyword is not None:
            self.ids.add(id(node.keyword))

    def visit_Param(self, node):
        self.ids.add(id(node.name))

    def visit_FunctionDef(self, node):
        self.ids.add(id(node.name))

    def visit_ClassDef(self, node):
        self.ids.add(id(node.name))

    def visit_Import(self, node):
        return False

    def visit_ImportFrom(self, node):
        return False


class _References(cst.CSTTransformer):
    """Rewrites the expressions that name a torch object through the module-level torch imports.

    `choose(canonical) -> replacement or None` decides for the objects in TARGETS (the whole chain, as
    `nn.MultiheadAttention` or `MultiheadAttention`); `rename(name) -> new or None` renames the other references
    to an imported name (`nn` in `nn.Module`)."""

    def __init__(self, bindings: dict[str, str], skip: set[int], choose=None, rename=None):
        super().__init__()
        self.bindings, self.skip, self.choose, self.rename = bindings, skip, choose, rename
        self.replaced = 0

    def visit_Import(self, node):
        return False

    def visit_ImportFrom(self, node):
        return False

    def _target(self, node) -> str | None:
        dotted = _dotted(node)
        if dotted is None:
            return None
        root, _, rest = dotted.partition(".")
        if root not in self.bindings:
            return None
        canonical = torchapi.canonical(self.bindings[root] + (f".{rest}" if rest else ""))
        return canonical if canonical in TARGETS else None

    def _chosen(self, node):
        canonical = self._target(node)
        if self.choose is None or canonical is None:
            return None
        new = self.choose(canonical)
        if new is not None:
            self.replaced += 1
        return new

    def visit_Attribute(self, node):
        return False  # the chain is handled whole in leave_Attribute

    def leave_Attribute(self, original, updated):
        new = self._chosen(original)
        if new is not None:
            return new
        return updated.with_changes(value=original.value.visit(self))

    def leave_Name(self, original, updated):
        if id(original) in self.skip:
            return updated
        new = self._chosen(original)
        if new is not None:
            return new
        if self.rename is not None and original.value in self.bindings:
            self.replaced += 1
            return updated.with_changes(value=self.rename(original.value))
        return updated


def replace_references(source: str, choose=None, rename=None) -> tuple[str, int]:
    module = cst.parse_module(source)
    bindings = {name: target for _, names in torch_imports(source) for name, target in names.items()}
    definitions = _Definitions()
    module.visit(definitions)
    transformer = _References(bindings, definitions.ids, choose, rename)
    return module.visit(transformer).code, transformer.replaced


@functools.lru_cache(maxsize=None)
def targets_used(source: str) -> frozenset[str]:
    used: set[str] = set()
    replace_references(source, choose=lambda canonical: used.add(canonical))
    return frozenset(used)


def respelled(source: str, canonical: str, imp: str, callee: str) -> str:
    """`source` with every reference to `canonical` spelled `callee`, and `imp` as a new first line."""
    expression = cst.parse_expression(callee)
    code, count = replace_references(source, choose=lambda c: expression if c == canonical else None)
    assert count, (canonical, source)
    return f"{imp}\n{code}"


class _Renamer(cst.CSTTransformer):
    """Every torch import binds `<name>_alias` instead of `<name>`."""

    def leave_Import(self, original, updated):
        if not _is_torch_import(original):
            return updated
        names = []
        for alias in updated.names:
            dotted = _dotted(alias.name)
            if alias.asname is not None:
                local = alias.asname.name.value
            else:
                local = dotted = dotted.split(".")[0]  # `import torch.nn`: binds torch
            names.append(cst.ImportAlias(name=cst.parse_expression(dotted),
                                         asname=cst.AsName(name=cst.Name(f"{local}_alias"))))
        return updated.with_changes(names=names)

    def leave_ImportFrom(self, original, updated):
        if not _is_torch_import(original):
            return updated
        names = [alias.with_changes(asname=cst.AsName(name=cst.Name(
            f"{alias.asname.name.value if alias.asname else alias.name.value}_alias"))) for alias in updated.names]
        return updated.with_changes(names=names)


def renamed(source: str) -> str:
    """`source` with every local name of its torch imports renamed `<name>_alias`."""
    code, _ = replace_references(source, rename=lambda name: f"{name}_alias")
    return cst.parse_module(code).visit(_Renamer()).code


def without_torch_imports(source: str, replacement) -> str:
    """`source` with each module-level torch import statement replaced by `replacement(bound names)` (lines)."""
    lines = source.splitlines(keepends=True)
    for line, names in reversed(torch_imports(source)):
        lines[line - 1] = "".join(text + "\n" for text in replacement(list(names)))
    return "".join(lines)


def local_stand_ins(names: list[str]) -> list[str]:
    return [f"class {name}:  # a project namespace that shares torch's name\n    pass" for name in names]


def project_import(names: list[str]) -> list[str]:
    return [f"from .project import {', '.join(names)}"]


def local_definition(canonical: str) -> str:
    """A project class (a torch.nn.Module, as DETR's and fairseq's are) or function named like the torch one."""
    short = canonical.rsplit(".", 1)[1]
    if canonical in FUNCTIONS:
        return f"def {short}(*args, **kwargs):\n    return args[0]\n"
    return (f"class {short}(_project_torch.nn.Module):\n    def __init__(self, *args, **kwargs):\n"
            f"        super().__init__()\n    def forward(self, *args, **kwargs):\n        return args[0]\n")


# ---- noqa ----------------------------------------------------------------------------------------------------------
SILENCING = ["# noqa", "# NOQA", "# noqa: {code}", "# noqa:{code}", "# noqa: {other}, {code}", "# noqa: {other},{code}"]
NOT_SILENCING = ["# noqa: {other}", "# noqa: {code}1", "# a comment, no directive"]


def _noqa_params():
    """Every directive on each rule's first invalid example; `noqa: CODE` and `noqa: OTHER` on the others."""
    params = []
    for (code, source), example_id in zip(INVALID, _ids("invalid")):
        first = example_id.endswith("-0")
        silencing = SILENCING if first else ["# noqa: {code}"]
        not_silencing = NOT_SILENCING if first else ["# noqa: {other}"]
        params.append(pytest.param(code, source, silencing, not_silencing, id=example_id))
    return params


@pytest.mark.parametrize(("code", "source", "silencing", "not_silencing"), _noqa_params())
def test_noqa_on_the_reported_line_silences_only_that_line(code, source, silencing, not_silencing):
    before = found(source, code)
    assert before, source
    line = before[0].line
    rest = signature([f for f in before if f.line != line])
    for directive in silencing:
        comment = directive.format(code=code, other=other_code(code))
        assert signature(found(with_comment(source, {line}, comment), code)) == rest, comment
    for directive in not_silencing:
        comment = directive.format(code=code, other=other_code(code))
        assert signature(found(with_comment(source, {line}, comment), code)) == signature(before), comment


@pytest.mark.parametrize(("code", "source"), INVALID, ids=_ids("invalid"))
def test_noqa_on_any_other_line_does_not_silence(code, source):
    """Not on the lines that build a mask or a module, nor on a multi-line call's other lines."""
    before = found(source, code)
    flagged = {f.line for f in before}
    others = {number for number in range(1, len(source.splitlines()) + 1) if number not in flagged}
    if not others:
        pytest.skip("every line is reported")
    assert signature(found(with_comment(source, others, "# noqa"), code)) == signature(before)


# ---- aliases -------------------------------------------------------------------------------------------------------
def _spelling_params(examples, ids):
    """Every spelling of each torch object a rule's examples use, in the first example that uses it."""
    params, done = [], set()
    for (code, source), example_id in zip(examples, ids):
        for canonical in sorted(targets_used(source)):
            if (code, canonical) in done:
                continue
            done.add((code, canonical))
            for imp, callee in spellings_of(canonical):
                params.append(pytest.param(code, source, canonical, imp, callee, id=f"{example_id}-{imp}-{callee}"))
    return params


@pytest.mark.parametrize(("code", "source", "canonical", "imp", "callee"), _spelling_params(INVALID, _ids("invalid")))
def test_every_spelling_of_the_torch_object_is_flagged_alike(code, source, canonical, imp, callee):
    assert signature(found(respelled(source, canonical, imp, callee), code), shift=1) == signature(
        found(source, code))


@pytest.mark.parametrize(("code", "source", "canonical", "imp", "callee"), _spelling_params(VALID, _ids("valid")))
def test_every_spelling_of_the_torch_object_stays_clean(code, source, canonical, imp, callee):
    assert found(respelled(source, canonical, imp, callee), code) == []


def _with_torch_imports(examples, ids):
    return [pytest.param(code, source, id=example_id) for (code, source), example_id in zip(examples, ids)
            if torch_imports(source)]


@pytest.mark.parametrize(("code", "source"), _with_torch_imports(INVALID, _ids("invalid")))
def test_any_local_name_of_the_imports_is_flagged_alike(code, source):
    assert signature(found(renamed(source), code)) == signature(found(source, code))


@pytest.mark.parametrize(("code", "source"), _with_torch_imports(VALID, _ids("valid")))
def test_any_local_name_of_the_imports_stays_clean(code, source):
    assert found(renamed(source), code) == []


# ---- project code named like torch's -------------------------------------------------------------------------------
# MHA006 warns on purpose (never an error) about a class named like torch's MultiheadAttention that comes from
# another module, which may be a copy of torch's with its layout (test_mha006.py); a local one is followed into.
WARNS_ON_IMPORTED_COPIES = {"MHA006"}
# MHA016 reads a tensor's view or reshape, whoever's attention function comes after it: a project object named like
# torch's changes nothing there, so its findings stay what they are with torch's.
READS_TENSOR_METHODS = {"MHA016"}


def _not_torch(findings: list[Finding], code: str, source: str) -> bool:
    """No finding where the names are the project's; for READS_TENSOR_METHODS, the same findings as with torch's."""
    if code in READS_TENSOR_METHODS:
        return sorted((f.severity, f.message) for f in findings) == \
            sorted((f.severity, f.message) for f in found(source, code))
    return findings == []


@pytest.mark.parametrize(("code", "source"), _with_torch_imports(INVALID, _ids("invalid")))
def test_local_classes_named_like_torchs_modules_are_not_torch(code, source):
    assert _not_torch(found(without_torch_imports(source, local_stand_ins), code), code, source)


@pytest.mark.parametrize(("code", "source"), _with_torch_imports(INVALID, _ids("invalid")))
def test_project_modules_named_like_torchs_are_not_torch(code, source):
    findings = found(without_torch_imports(source, project_import), code)
    if code in WARNS_ON_IMPORTED_COPIES:
        assert all(f.severity < Severity.ERROR for f in findings), findings
    else:
        assert _not_torch(findings, code, source), findings


class _DropTargetImports(cst.CSTTransformer):
    """Removes the `from torch... import X` names that bind a torch object of TARGETS."""

    def leave_ImportFrom(self, original, updated):
        if not _is_torch_import(original):
            return updated
        module = _dotted(original.module)
        kept = [alias for alias in updated.names
                if torchapi.canonical(f"{module}.{_dotted(alias.name)}") not in TARGETS]
        if len(kept) == len(updated.names):
            return updated
        if not kept:
            return cst.Pass()
        return updated.with_changes(names=[alias.with_changes(comma=cst.MaybeSentinel.DEFAULT) for alias in kept])


def with_project_names(source: str, where: str) -> str:
    """`source` with every torch class or function of TARGETS it uses replaced by the project's one of the same
    name: defined in the file (`where="local"`) or imported from a project module (`where="imported"`)."""
    used = sorted(targets_used(source))
    rewritten, count = replace_references(source, choose=lambda canonical: cst.Name(canonical.rsplit(".", 1)[1]))
    assert count
    rewritten = cst.parse_module(rewritten).visit(_DropTargetImports()).code
    if where == "local":
        header = "import torch as _project_torch\n" + "".join(local_definition(canonical) for canonical in used)
    else:
        header = f"from .layers import {', '.join(canonical.rsplit('.', 1)[1] for canonical in used)}\n"
    decoy = header + rewritten
    assert not targets_used(decoy), decoy
    return decoy


DECOY_PARAMS = [param for param in _with_torch_imports(INVALID, _ids("invalid")) if targets_used(param.values[1])]


@pytest.mark.parametrize(("code", "source"), DECOY_PARAMS)
def test_project_classes_and_functions_of_the_same_names_are_not_torch(code, source):
    assert _not_torch(found(with_project_names(source, "local"), code), code, source)


@pytest.mark.parametrize(("code", "source"), DECOY_PARAMS)
def test_imported_project_classes_and_functions_of_the_same_names_are_not_torch(code, source):
    findings = found(with_project_names(source, "imported"), code)
    if code in WARNS_ON_IMPORTED_COPIES:
        assert all(f.severity < Severity.ERROR for f in findings), findings
    else:
        assert _not_torch(findings, code, source), findings
