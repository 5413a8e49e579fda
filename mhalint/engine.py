"""Files to findings: discover, prefilter, parse, run every enabled rule in one traversal, suppress, sort.

The engine knows no rule: it gets rule classes from the caller (who loads them through entry points) and only
uses what the Rule base class declares.
"""

from __future__ import annotations

import ast
import contextlib
import re
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper

from mhalint import noqa
from mhalint.notebook import Notebook, NotebookError
from mhalint.context import ModuleContext
from mhalint.discovery import discover
from mhalint.finding import Finding, Severity
from mhalint.rule import Rule
from mhalint.source import decode

# Diagnostics of the engine itself, reported like findings so a run never stops at one bad file.
PARSE_ERROR = "MHA900"
READ_ERROR = "MHA901"
INTERNAL_ERROR = "MHA902"
ENGINE_CODES = {
    PARSE_ERROR: "could not parse this file",
    READ_ERROR: "could not read this file",
    INTERNAL_ERROR: "a rule failed on this file (internal error)",
}


SOURCES = (".py", ".pyi", ".ipynb")


@dataclass
class Result:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    internal_errors: int = 0
    tracebacks: list[str] = field(default_factory=list)


def trigger_pattern(rules: Iterable[type[Rule]]) -> re.Pattern[bytes]:
    """One compiled regex over bytes that matches any enabled rule's trigger word."""
    words = sorted({word for rule in rules for word in rule.triggers})
    return re.compile(b"|".join(re.escape(word.encode()) for word in words))


class Checker:
    """Runs a fixed set of rules over sources; reusable across files."""

    def __init__(self, rules: Sequence[type[Rule]]):
        self.rules = list(rules)
        self.triggers = trigger_pattern(self.rules)

    def check_paths(self, paths: Iterable[str | Path], **discovery) -> Result:
        """Check every file `discover(paths, **discovery)` finds (its keyword arguments: respect_gitignore,
        exclude, default_exclude, anchors)."""
        result = Result()
        found = discover(paths, extensions=SOURCES, **discovery)
        for path, reason in found.errors:
            result.findings.append(_engine_finding(str(path), READ_ERROR, reason))
        for path in found.files:
            self._check_file(str(path), result)
        result.findings.sort(key=Finding.sort_key)
        return result

    def _check_file(self, path: str, result: Result) -> None:
        try:
            source = Path(path).read_bytes()
        except OSError as error:
            result.findings.append(_engine_finding(path, READ_ERROR, error.strerror or str(error)))
            return
        result.files_checked += 1
        if path.endswith(".ipynb"):
            result.findings.extend(self._check_notebook(source, path, result))
        else:
            result.findings.extend(self.check_source(source, path, result))

    def _check_notebook(self, raw: bytes, path: str, result: Result) -> list[Finding]:
        try:
            notebook = Notebook.parse(raw)
        except NotebookError as error:
            return [_engine_finding(path, READ_ERROR, str(error))]
        return [notebook.locate(f) for f in self.check_source(notebook.source.encode(), path, result)]

    def check_source(self, source: bytes, path: str, result: Result | None = None) -> list[Finding]:
        """Findings for one file's bytes (noqa applied, sorted)."""
        if not self.rules or not self.triggers.search(source):
            return []
        return _on_deep_stack(self._check, source, path, result or Result())

    def _check(self, source: bytes, path: str, result: Result) -> list[Finding]:
        try:
            text, _ = decode(source)
        except (UnicodeDecodeError, LookupError, SyntaxError) as error:
            return [_engine_finding(path, READ_ERROR, f"cannot decode the source: {error}")]
        refusal = _python_refuses(text, path)
        if refusal is not None:
            return [refusal]
        findings: list[Finding] = []
        try:
            with _recursion_limit(_RECURSION_LIMIT):  # safe here: this thread has a large stack
                module = cst.parse_module(text)
                context = ModuleContext(module, path, MetadataWrapper(module, unsafe_skip_copy=True))
                walker = _Walker(context, [rule(context, findings.append) for rule in self.rules], path, result)
                module.visit(walker)
        except cst.ParserSyntaxError:
            return [_engine_finding(path, PARSE_ERROR, "Python accepts this file but libcst cannot parse it "
                                                       "(syntax newer than the installed libcst?); upgrade libcst")]
        except RecursionError:
            return [_engine_finding(path, PARSE_ERROR, "the code is nested too deeply to analyse")]
        findings.extend(walker.failures)
        kept = noqa.suppress(findings, text)
        return sorted(kept, key=Finding.sort_key)


def _python_refuses(text: str, path: str) -> Finding | None:
    """CPython's own parser first: it words syntax errors well, and it refuses nesting that would overflow the
    native stack of libcst's parser (which would kill the whole run, not just this file)."""
    try:
        ast.parse(text, filename=path)
    except SyntaxError as error:
        message = f"syntax error: {error.msg}; fix the syntax so mhalint can check this file"
        return _engine_finding(path, PARSE_ERROR, message, error.lineno or 1, error.offset or 1)
    except (RecursionError, MemoryError):
        return _engine_finding(path, PARSE_ERROR, "the code is nested deeper than Python's parser accepts")
    except ValueError as error:  # null bytes: a binary file named .py
        return _engine_finding(path, READ_ERROR, f"not Python source ({error})")
    return None


@contextlib.contextmanager
def _recursion_limit(limit: int):
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


_STACK_BYTES = 256 * 2**20
_RECURSION_LIMIT = 20_000


def _on_deep_stack(function, *args):
    """Run `function` on a thread with a large stack: libcst's parser and visitors recurse once per nesting
    level, and deep but valid code must not overflow the main thread's stack (a crash, not an exception)."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # re-raised in the calling thread
            outcome["error"] = error

    previous = threading.stack_size(_STACK_BYTES)
    try:
        thread = threading.Thread(target=target, name="mhalint-check")
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class _Walker(cst.CSTVisitor):
    """One traversal for all rules: calls each rule's visit_<Node>/leave_<Node> and keeps the scope current.

    A rule that raises is switched off for the rest of the file and reported as an internal error, so one bug in
    one rule never stops the run.
    """

    def __init__(self, context: ModuleContext, rules: list[Rule], path: str, result: Result):
        self.context = context
        self.path = path
        self.result = result
        self.failures: list[Finding] = []
        self.visitors: dict[str, list] = {}
        self.leavers: dict[str, list] = {}
        for rule in rules:
            for attribute in dir(type(rule)):
                if attribute.startswith("visit_"):
                    self.visitors.setdefault(attribute[6:], []).append((rule, getattr(rule, attribute)))
                elif attribute.startswith("leave_"):
                    self.leavers.setdefault(attribute[6:], []).append((rule, getattr(rule, attribute)))
        self.disabled: set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        scope = self.context.scopes.get(node)
        if scope is not None:
            self.context.scope = scope
        self._dispatch(self.visitors.get(type(node).__name__), node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._dispatch(self.leavers.get(type(original_node).__name__), original_node)
        scope = self.context.scopes.get(original_node)
        if scope is not None and scope.parent is not None:
            self.context.scope = scope.parent

    def _dispatch(self, handlers, node: cst.CSTNode) -> None:
        if not handlers:
            return
        for rule, handler in handlers:
            if id(rule) in self.disabled:
                continue
            try:
                handler(node)
            except RecursionError:
                raise
            except Exception as error:  # contained: reported as MHA902 for this file and rule
                self.disabled.add(id(rule))
                self.result.internal_errors += 1
                self.result.tracebacks.append(f"{self.path}: {rule.code}\n{traceback.format_exc()}")
                line = _line_or_one(self.context, node)
                self.failures.append(Finding(
                    self.path, line, 1, INTERNAL_ERROR, name="internal-error", severity=Severity.ERROR,
                    message=f"internal error in rule {rule.code} ({type(error).__name__}: {error}); the rest of "
                            f"this file was not checked by {rule.code}. Run with --show-traceback and report it."))


def _line_or_one(context: ModuleContext, node: cst.CSTNode) -> int:
    try:
        return context.line(node)
    except Exception:  # positions themselves may be what failed
        return 1


def _engine_finding(path: str, code: str, reason: str, line: int = 1, column: int = 1) -> Finding:
    return Finding(path, line, column, code, message=f"{ENGINE_CODES[code]}: {reason}",
                   name=ENGINE_CODES[code], severity=Severity.ERROR)
