"""Files to findings: discover, prefilter, parse, run every enabled rule in one traversal, suppress, sort.

The engine knows no rule: it gets rule classes from the caller (who loads them through entry points) and only
uses what the Rule base class declares.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from mhalint.analysis.project import Project, project_files
from mhalint.configuration.discovery import discover
from mhalint.configuration.schema import pool_size
from mhalint.context import ModuleContext
from mhalint.finding import Finding
from mhalint.parse.lazy import cst
from mhalint.parse.source import decode
from mhalint.parse.trusted_parse import BodyParseError, unvalidated_nodes
from mhalint.rule import Rule, runtime_only
from mhalint.run import collector, deep_stack, noqa
from mhalint.run.budget import FileBudget, Limits, TooComplex
from mhalint.run.diagnostics import (
    INTERNAL_ERROR,
    PARSE_ERROR,
    READ_ERROR,
    TOO_COMPLEX,
    engine_finding,
    internal_error,
)
from mhalint.run.dispatch import RuleDispatch
from mhalint.run.parallel import PARALLEL_FROM, run_in_workers
from mhalint.run.prefilter import Prefilter
from mhalint.run.scan import Scanned, scan

if TYPE_CHECKING:
    from mhalint.parse.incremental import Reparser  # imports libcst, which a run without a trigger never loads
    from mhalint.run.cache import Cache
    from mhalint.run.matched_functions import MatchedFunctions

SOURCES = (".py", ".pyi", ".ipynb")


@dataclass
class Result:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    files_unparsed: int = 0  # of those, checked without a parse: nothing in their code names what a rule acts on
    internal_errors: int = 0
    tracebacks: list[str] = field(default_factory=list)
    read_project: bool = False  # the analysis of the (one) file read other files of the project


class Checker:
    """Runs a fixed set of rules over sources; reusable across files."""

    def __init__(self, rules: Sequence[type[Rule]], *, unused_noqa: bool = False,
                 budget: FileBudget | None = FileBudget(), parse_all: bool = False, ignore_noqa: bool = False):
        """`unused_noqa`: also report the `# noqa` directives that suppress nothing (MHA904), as `mhalint check`
        asks; flake8 has its own view of noqa comments and is not asked. `budget`: the time and memory each file
        may take (MHA903 past it); None for no limit. `parse_all`: check_paths also parses, with CPython's
        parser, the files whose code names nothing a rule acts on, and reports their syntax errors (as ruff does;
        off by default: it is most of the files, and most of the time). `ignore_noqa`: `# noqa` directives
        suppress nothing (ruff's --ignore-noqa), and none is reported unused."""
        self.rules = [rule for rule in rules if not runtime_only(rule)]  # only the runtime guard reports those
        self.unused_noqa = unused_noqa
        self.budget = budget
        self.parse_all = parse_all
        self.ignore_noqa = ignore_noqa
        self.prefilter = Prefilter(pattern for rule in self.rules for pattern in rule.triggers)
        # such files of check_paths' run (absolute paths); None outside one, where a file is such a file when the
        # other rules' triggers do not match it
        self.by_function: set[str] | None = None
        self.skip_passed_values = not any(rule.acts_on_passed_values for rule in self.rules)
        # The files analyses may follow a class into: check_paths sets its run's project (mhalint.analysis.project);
        # a long-lived caller (the language server, the flake8 plugin) sets its own.
        self.project: Project | None = None

    def check_paths(self, paths: Iterable[str | Path], *, cache: Cache | None = None, jobs: int | None = None,
                    on_file: Callable[[str, list[Finding]], None] | None = None,
                    progress: Callable[[int, int, list[Finding]], None] | None = None, **discovery) -> Result:
        """Check every file `discover(paths, **discovery)` finds (its keyword arguments: respect_gitignore,
        exclude, default_exclude, anchors). Unchanged files come from `cache`; files that need parsing are
        spread over `jobs` processes (default: the usable CPUs; never more than those, nor than the files) when
        there are enough of them.

        `on_file(path, findings)` is called once for each file (and each path discovery could not read), in the
        order of `Result.findings` (sorted by path), as soon as that file and every file before it are done,
        cached or checked: a caller can print findings while later files are still being checked. `findings`
        are that file's part of `Result.findings`, the same objects (noqa applied, sorted), and may be empty.

        `progress(done, total, findings)` is called as each file is done, in any order: how many of the `total`
        are done, and that file's findings (a progress line counts them).

        The cache index is written only once every file is done: an interrupted run leaves the previous one."""
        result = Result()
        paths = list(paths)
        found = discover(paths, extensions=SOURCES, **discovery)
        files = list(map(str, found.files))
        # The analyses see the files' whole project (only the files given are reported on), walked when first
        # needed; what its index read is remembered in the cache.
        walked = [str(path) for path in paths if os.path.isdir(path)]
        folders = sorted({os.path.dirname(os.path.abspath(path)) for path in files})  # a root per folder, not file
        project = Project(files, more=lambda: project_files(folders, walked, **discovery), memory=cache)
        fingerprint = functools.cache(lambda: _project_fingerprint(project.paths))

        def deliver(path: str, findings: list[Finding]) -> None:
            findings.sort(key=Finding.sort_key)
            result.findings.extend(findings)
            if on_file is not None:
                on_file(path, findings)

        unreadable: dict[str, list[Finding]] = {}
        for path, reason in found.errors:
            unreadable.setdefault(str(path), []).append(engine_finding(str(path), READ_ERROR, reason))
        in_order = _InPathOrder([*files, *unreadable], deliver)
        total = len(set(files).union(unreadable))
        finished = 0

        def done(path: str, findings: list[Finding]) -> None:
            nonlocal finished
            findings = unreadable.pop(path, []) + findings
            finished += 1
            if progress is not None:
                progress(finished, total, findings)
            in_order.done(path, findings)

        for path in set(unreadable).difference(files):
            done(path, [])
        parse: list[tuple[str, bytes, os.stat_result | None]] = []
        unmatched: dict[str, Scanned] = {}  # no trigger in their code: no findings, unless another file's name
        unread = []
        for path in files:
            cached = cache.lookup(path, fingerprint) if cache is not None else None
            if cached is None:
                unread.append(path)
            else:
                result.files_checked += 1
                result.files_unparsed += not cache.parsed(path)
                done(path, cached)
        scanning = scan(unread, self.prefilter, project, cache.digest if cache is not None else None, jobs,
                        self._syntax if self.parse_all else None)
        with contextlib.closing(scanning):  # an exception here (an interrupt) stops its workers at once
            for path, scanned in scanning:
                if isinstance(scanned, str):
                    done(path, [engine_finding(path, READ_ERROR, scanned)])
                    continue
                if scanned.imports is not None:  # a file is to be analysed, so the index will be asked for
                    project.learnt(path, scanned.imports, scanned.stat)
                cached = None
                if cache is not None and scanned.stat is not None:
                    cached = cache.lookup_content(path, scanned.digest, scanned.stat, fingerprint)
                result.files_checked += 1
                if cached is not None:
                    result.files_unparsed += not cache.parsed(path)
                    done(path, cached)
                elif scanned.matched:
                    parse.append((path, scanned.raw, scanned.stat))
                else:
                    unmatched[path] = scanned
        self._pull_in(project, parse, unmatched)
        by_function = self._by_function(project, parse)
        for path, scanned in unmatched.items():
            findings = scanned.syntax or []
            result.files_unparsed += scanned.syntax is None
            if cache is not None and scanned.stat is not None and \
                    not any(f.code in (READ_ERROR, TOO_COMPLEX) for f in findings):  # a raised limit applies
                cache.store(path, scanned.digest, scanned.stat, findings,
                            fingerprint() if project.imports_project(path) else "", parsed=scanned.syntax is not None)
            done(path, findings)

        failures_by_index: dict[int, list[str]] = {}  # tracebacks in the files' order, not in the workers'

        def checked(index: int, outcome: tuple[list[Finding], list[str], bool]) -> None:
            path, raw, stat = parse[index]
            findings, failures, read_project = outcome
            result.internal_errors += len(failures)
            failures_by_index[index] = failures
            if cache is not None and stat is not None and not failures and \
                    not any(f.code in (READ_ERROR, TOO_COMPLEX) for f in findings):  # a raised limit applies
                cache.store(path, cache.digest(raw), stat, findings, fingerprint() if read_project else "")
            done(path, findings)

        self.project, self.by_function = project, by_function
        project.will_check(path for path, _, _ in parse)
        try:
            with collector.batch():
                self._run(parse, jobs, checked)
        finally:
            self.project = self.by_function = None
        for index in sorted(failures_by_index):
            result.tracebacks.extend(failures_by_index[index])
        if cache is not None:
            cache.save()
        result.findings.sort(key=Finding.sort_key)
        return result

    @staticmethod
    def _pull_in(project: Project, parse: list, unmatched: dict) -> None:
        """Move from `unmatched` to `parse` the files that reach torch's attention classes only through a name
        another file of the run exports (`from .layers import MHA`, a subclass, a star import): the prefilter
        sees no trigger in them, yet they may build one. Only a run with a matched file can have such a name."""
        if not parse or not unmatched:
            return
        from mhalint.run.scan import read

        given = {os.path.abspath(path): path for path in unmatched}
        matched = {os.path.abspath(path): raw for path, raw, _ in parse if path.endswith(".py")}
        for path in sorted(given[found] for found in project.reaching_attention(matched, set(given)) if found in given):
            try:
                raw, stat = read(path)
            except OSError:
                continue  # gone since the scan: it is reported as checked, without findings
            del unmatched[path]
            parse.append((path, raw, stat))

    # The triggers of the rules that act only in the functions they match (Rule.matched_functions_only), and of the
    # others: a file only the first match is parsed a function at a time (mhalint.run.matched_functions). Built when
    # first asked: a run whose files match no trigger never compiles them.
    @functools.cached_property
    def function_prefilter(self) -> Prefilter:
        return Prefilter(pattern for rule in self.rules if rule.matched_functions_only for pattern in rule.triggers)

    @functools.cached_property
    def file_prefilter(self) -> Prefilter:
        return Prefilter(pattern for rule in self.rules if not rule.matched_functions_only for pattern in rule.triggers)

    def _by_function(self, project: Project, parse: list) -> set[str]:
        """The files of `parse` to parse a function at a time: those that only the triggers of rules acting where
        they match match, unless they reach torch's attention classes through another file's names (the other
        rules act on those files too: `_pull_in`)."""
        if self.function_prefilter.regex is None:
            return set()
        matched = {os.path.abspath(path): raw for path, raw, _ in parse if path.endswith(".py")}
        candidates = {path for path, raw in matched.items()  # the first test finds most files out by a word
                      if self.function_prefilter.matches(raw) and not self.file_prefilter.matches(raw)}
        if not candidates or self.file_prefilter.regex is None:
            return candidates
        return candidates - project.reaching_attention(matched, candidates)

    def _run(self, files: list[tuple[str, bytes, os.stat_result | None]], jobs: int | None,
             checked: Callable[[int, tuple[list[Finding], list[str], bool]], None]) -> None:
        """`checked(index, (findings, tracebacks of internal errors, read_project))` for each file as it is
        done; in worker processes when it pays."""
        size = pool_size(jobs, len(files))
        if size >= 2 and len(files) >= PARALLEL_FROM:
            from mhalint.run.workers import can_fork  # only a run with enough files to spread loads multiprocessing

            if can_fork():
                run_in_workers(self, files, size, checked)
                return
        for index, (path, raw, _) in enumerate(files):
            checked(index, self._check_one(path, raw))

    def _syntax(self, raw: bytes, path: str) -> list[Finding]:
        """`parse_all`: what CPython's parser says of a file no rule acts on (nothing, or the engine finding a
        parsed file with that error gets). Run where the file is read, a scan worker too."""
        try:
            found = _read_syntax(raw, path, Limits(self.budget))
        except TooComplex as reason:
            return [_too_complex(path, reason)]
        return [found] if isinstance(found, Finding) else []

    def _function_only(self, path: str, source: bytes) -> bool:
        """Whether only the rules that act where their triggers match are run on this file: their triggers match
        it, the other rules' do not, and (in check_paths) it reaches no attention class through another file's
        names. The other rules then never see it, as they never see a file none of the triggers match."""
        if self.function_prefilter.regex is None:
            return False
        if self.by_function is not None:
            return os.path.abspath(path) in self.by_function
        return not self.file_prefilter.matches(source)

    def _instances(self, context: ModuleContext, findings: list[Finding], path: str, result: Result,
                   function_only: bool, matched: MatchedFunctions | None) -> list[Rule]:
        """One instance of each rule run on this file; a rule that fails to set up is an internal error."""
        instances = []
        for rule in self.rules:
            if (function_only and not rule.matched_functions_only) or (matched is None and rule.matched_functions_only):
                continue  # a rule that acts where its triggers match, in a file they do not match, has nothing to do
            try:
                instances.append(rule(context, findings.append))
            except Exception as error:  # contained like an error in a visitor
                findings.append(internal_error(path, 1, rule.code, error, result))
        return instances

    def _check_one(self, path: str, raw: bytes) -> tuple[list[Finding], list[str], bool]:
        """A file check_paths has read: a .py file whose bytes the prefilter has already matched, or a notebook.
        Its findings, the tracebacks of internal errors, and whether the analysis read other files."""
        result = Result()
        if path.endswith(".ipynb"):
            findings = self._check_notebook(raw, path, result)
        else:
            findings = self._check_matched(raw, path, result)
        return findings, result.tracebacks, result.read_project

    def _check_notebook(self, raw: bytes, path: str, result: Result) -> list[Finding]:
        from mhalint.parse.notebook import Notebook, NotebookError  # only for notebooks: it loads the fixer

        try:
            notebook = Notebook.parse(raw)
        except NotebookError as error:
            return [engine_finding(path, READ_ERROR, str(error))]
        return [notebook.locate(f) for f in self.check_source(notebook.source.encode(), path, result)]

    def check_source(self, source: bytes, path: str, result: Result | None = None, *,
                     cancel: threading.Event | None = None, reuse: Reparser | None = None) -> list[Finding]:
        """Findings for one file's bytes (noqa applied, sorted). A caller on another thread that sets `cancel`
        stops the check within milliseconds: it raises `mhalint.run.budget.Cancelled`. `reuse` keeps the tree of one
        document from version to version (mhalint.parse.incremental), for a caller that checks it again after each
        edit."""
        if not self.prefilter.matches(source):
            return []
        return self._check_matched(source, path, result or Result(), cancel, reuse)

    def _check_matched(self, source: bytes, path: str, result: Result, cancel: threading.Event | None = None,
                       reuse: Reparser | None = None) -> list[Finding]:
        with collector.paused():
            return deep_stack.run(self._check, source, path, result, cancel, reuse)

    def _check(self, source: bytes, path: str, result: Result, cancel: threading.Event | None,
               reuse: Reparser | None) -> list[Finding]:
        """The file's findings, or MHA903 (and the internal errors met until then) past the file's budget."""
        findings: list[Finding] = []  # the rules' findings, and internal errors, as they come
        errors, tracebacks = result.internal_errors, len(result.tracebacks)
        try:
            return self._check_within(source, path, result, Limits(self.budget, cancel), findings, reuse)
        except BodyParseError:  # a function body of another file that libcst refuses: parse files whole from now
            from mhalint.parse.lazy_bodies import parse_whole_from_now

            parse_whole_from_now()
            if self.project is not None:
                self.project.forget_partial()
            result.internal_errors = errors
            del result.tracebacks[tracebacks:]
            return self._check(source, path, result, cancel, reuse)
        except TooComplex as reason:
            return [_too_complex(path, reason), *(finding for finding in findings if finding.code == INTERNAL_ERROR)]

    def _check_within(self, source: bytes, path: str, result: Result, limits: Limits,
                      findings: list[Finding], reuse: Reparser | None = None) -> list[Finding]:
        read = _read_syntax(source, path, limits)
        if isinstance(read, Finding):
            return [read]
        text, syntax = read
        del read  # the tree goes with `syntax`, below
        encoded = text.encode("utf-8", "surrogatepass")  # what CPython's columns count (and the prefilter reads)
        if self.skip_passed_values and self.prefilter.only_passed_as_values(encoded, syntax):
            return []  # e.g. torch's 27,820-line OpInfo table, which passes sdpa to a wrapper: 0.8 GB with libcst
        with limits.excluded():  # loading libcst is the process's time, not this file's
            from mhalint.parse import lazy_bodies  # imports libcst, which is needed from here on anyway
            from mhalint.parse.positions import body_lines, first_lines
            from mhalint.run.matched_functions import MatchedFunctions

        statement_lines, bodies = first_lines(syntax), body_lines(syntax)
        matched = MatchedFunctions.of(self.function_prefilter, text, encoded, syntax)  # None: no such rule or match
        del encoded
        function_only = self._function_only(path, source)
        del syntax  # not two trees of a large file in memory at once
        limits.check_tree(text, "libcst")
        try:
            with _recursion_limit(_RECURSION_LIMIT):  # safe here: this thread has a large stack
                with unvalidated_nodes():
                    kept = self.project.tree(path, text) if self.project is not None and reuse is None else None
                    shell = None
                    if reuse is not None:
                        module = reuse.parse(text, statement_lines)
                    elif kept is not None:
                        module = kept
                    elif function_only and matched is not None:
                        shell = lazy_bodies.parse(text, None, bodies=matched.bodies)
                        module = shell.module
                        matched.parse_matched(module)
                    else:
                        module = cst.parse_module(text)
                limits.check()
                context = ModuleContext(module, path, text, statement_lines, self.project, limits,
                                        reuse.generated if reuse is not None else None, bodies, shell=shell)
                rules = RuleDispatch(context, self._instances(context, findings, path, result, function_only, matched),
                                     path, result, findings,
                                     matched.left_out(module) if matched is not None else frozenset())
                rules.run(context.walk_indexed(rules.visited, rules.left))
                result.read_project = context.read_project
                context.release()
                if self.project is not None and reuse is None:  # for the analyses of the files after it
                    self.project.checked(path, text, module, statement_lines, bodies, shell)
        except cst.ParserSyntaxError:
            return [engine_finding(path, PARSE_ERROR, "Python accepts this file but libcst, the parser mhalint "
                                                       "uses, cannot parse it (syntax newer than the installed "
                                                       "libcst, or a mix of tabs and spaces libcst does not "
                                                       "support); upgrading libcst or re-indenting with spaces "
                                                       "lets mhalint check it")]
        except RecursionError:
            return [engine_finding(path, PARSE_ERROR, "the code is nested too deeply to analyse")]
        if self.ignore_noqa:
            return sorted(findings, key=Finding.sort_key)
        kept = noqa.suppress(findings, text, path=path,
                             enabled={rule.code for rule in self.rules} if self.unused_noqa else None,
                             statement_lines=statement_lines)
        return sorted(kept, key=Finding.sort_key)


class _InPathOrder:
    """Each file's findings handed on in path order, the order of the run's result, as soon as that file and
    every file before it are done: files finish in any order (cached ones first, parsed ones as the workers
    return them), and a caller that prints file by file must still print in a stable order."""

    def __init__(self, paths: Iterable[str], deliver: Callable[[str, list[Finding]], None]):
        self._order = sorted(set(paths))
        self._next = 0
        self._done: dict[str, list[Finding]] = {}
        self._deliver = deliver

    def done(self, path: str, findings: list[Finding]) -> None:
        self._done[path] = findings
        while self._next < len(self._order) and self._order[self._next] in self._done:
            path = self._order[self._next]
            self._next += 1
            self._deliver(path, self._done.pop(path))


def _project_fingerprint(files: list[str]) -> str:
    from mhalint.run.cache import project_fingerprint  # only a run with a cache loads it

    return project_fingerprint(files)


def _read_syntax(source: bytes, path: str, limits: Limits) -> tuple[str, ast.Module] | Finding:
    """A file's text, decoded as Python decodes it, and CPython's tree of it; or the engine finding that says why
    there is none (MHA901 undecodable, MHA900 a syntax error). TooComplex past the file's memory budget."""
    try:
        text, _ = decode(source)
    except (UnicodeDecodeError, LookupError, SyntaxError) as error:
        return engine_finding(path, READ_ERROR, f"cannot decode the source: {error}")
    syntax = _python_parse(text, path, limits)
    return syntax if isinstance(syntax, Finding) else (text, syntax)


def _too_complex(path: str, reason: TooComplex) -> Finding:
    return engine_finding(path, TOO_COMPLEX, f"{reason}; exclude the file or raise the limit")


def _python_parse(text: str, path: str, limits: Limits) -> ast.Module | Finding:
    """CPython's own parser first: it words syntax errors well, and it refuses nesting that would overflow the
    native stack of libcst's parser (which would kill the whole run, not just this file). Its tree gives the
    lines of the top-level statements (mhalint.parse.positions). Raises TooComplex when its tree would pass the
    file's memory budget."""
    if "\0" in text:  # a binary file named .py; Python refuses it (a SyntaxError, a ValueError before 3.11.4)
        return engine_finding(path, READ_ERROR, "not Python source: null bytes")
    limits.check_tree(text, "ast")
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as error:
        message = f"syntax error: {error.msg}; fix the syntax so mhalint can check this file"
        return engine_finding(path, PARSE_ERROR, message, error.lineno or 1, error.offset or 1)
    except (RecursionError, MemoryError):
        return engine_finding(path, PARSE_ERROR, "the code is nested deeper than Python's parser accepts")


@contextlib.contextmanager
def _recursion_limit(limit: int):
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


_RECURSION_LIMIT = 20_000


