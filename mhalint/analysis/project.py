"""The project: the files analyses may follow a class into, which of them import a class from another, and their
parsed contexts.

A run's project is the whole project of the files it checks (`project_files`: below the nearest pyproject.toml,
setup.cfg, setup.py or .git, found as discovery finds files), so that a run given only some files of it (pre-commit
passes the staged ones) sees the same callers as a run over all of them; only the files given are reported on.
The index is built on first need, in one pass over each file's bytes, which are not kept: a regular expression collects
the `from ... import Name` lines (relative imports resolved against the file's package; packages, src layouts and script
directories all give dotted names). A file that imports the class asked about is parsed with libcst for the readers to
follow its calls, when its text may call or use the class (`may_call`, `may_read`), once while it is asked about: the
trees are kept within a budget of lines, one an analysis still holds is reused, and the file's own check builds on it
(`tree`). Nothing is imported or executed. What the index keeps of each file can be remembered between runs
(`ImportMemory`, the findings cache), keyed by the file's size, modification time and module name, so that a one-file
run does not read the whole project again.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import weakref
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Callable, Iterable, Iterator, Mapping, Protocol

from mhalint.parse.source import decode, regular_only
from mhalint.run.budget import Limits

_MAX_CONTEXTS = 4  # libcst trees always kept per process, whatever their size
_MAX_LINES = 20_000  # more are kept while their sources hold no more lines than this (about 9 KB of memory a line)
_MAX_CHECKED_LINES = 3_000  # the trees of the files just checked, kept for the analyses of the next ones
_IMPORT_STEPS = 4  # how far may_name_attention follows imports
_BASE_STEPS = 8  # how far may_derive_attention follows bases (further: it may)
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")  # what makes a folder a project's root

Imports = tuple[tuple[str, str, str], ...]  # (class name, module resolved, local name) of a file's imports


class ImportMemory(Protocol):
    """What the index of an earlier run knew of a file (the findings cache keeps it)."""

    def recall_imports(self, path: str, status: os.stat_result, module: str) -> Imports | None: ...

    def keep_imports(self, path: str, status: os.stat_result, module: str, imports: Imports) -> None: ...


@dataclass(frozen=True)
class Importer:
    """A file that imports a class of another, and the name the class has there (`from .model import Encoder as
    Enc`: `Enc`)."""

    path: str
    local: str


class Project:
    def __init__(self, paths: Iterable[str], overlay: Mapping[str, bytes] | None = None, *,
                 more: Callable[[], Iterable[str]] | None = None, memory: ImportMemory | None = None):
        """`paths`: the files of the run; `more`: the rest of the project, found when first needed (a run whose
        files need no analysis never walks the project). `overlay`: the bytes of some files (by absolute path) to
        read instead of the disk's: the language server's open buffers, so that unsaved text is what the analyses
        follow. `memory`: what earlier runs' indexes kept of unchanged files."""
        self._given = list(dict.fromkeys(os.path.abspath(path) for path in paths if path.endswith(".py")))
        self._run = set(self._given)
        self._more = more
        self._paths: list[str] | None = None if more is not None else self._given
        self._memory = memory
        self._overlay = overlay if overlay is not None else {}
        self._contexts: dict[str, object] = {}  # the trees kept, least recently used first
        self._alive: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # every tree still held anywhere
        # path -> (text, tree, statement lines, body lines, line count), the latest last
        self._checked: dict[str, tuple] = {}
        self._resolved: dict[str, str | None | tuple[None, frozenset[str]]] = {}
        self._classes_imported: dict[str, dict[str, tuple[str | None, str]]] = {}
        self._entries: dict[str, tuple[tuple[str, str, str], ...]] = {}  # each file's imported classes, as read
        self._complete = False  # every file's entries are in, and the index was asked for
        self._index: dict[str, list[tuple[str, str, str]]] | None = None  # the entries by class name
        self.reads: set[str] = set()  # the files whose contexts were asked for, until the caller clears it
        self._attention: dict[str, bool] = {}  # names_attention's answers
        self._asking: set[tuple[str, str]] = set()  # torch_name's questions under way
        self._reaches: dict[str, bool] = {}  # may_name_attention's answers
        self._binds_torch: dict[tuple[str, str], bool] = {}  # _may_bind_torch's answers
        self._derives: dict[tuple[str, str], bool] = {}  # may_derive_attention's answers
        self._module_names: dict[str, str] = {}
        self._packages: dict[str, bool] = {}  # folder -> holds an __init__.py
        self._mentioned: dict[str, list[str]] = {}  # mentions': the first two files holding each word
        self._said: dict[tuple[str, str, bool], bool] = {}  # may_call's and may_read's answers
        self._to_check: set[str] = set()  # files this run will check itself: parsed whole when read for another

    @property
    def paths(self) -> list[str]:
        """Every file analyses may follow a class into: the run's, then the rest of the project."""
        if self._paths is None:
            more = (os.path.abspath(path) for path in self._more() if path.endswith(".py"))
            self._paths = list(dict.fromkeys([*self._given, *more]))
        return self._paths

    @paths.setter
    def paths(self, paths: list[str]) -> None:
        self._paths = paths

    @property
    def _imported(self) -> dict[str, list[tuple[str, str, str]]]:
        """Class name -> (importing file, module written, resolved against the file's package, local name) for
        every `from ... import Name` of the run: one pass over each file's bytes, which are not kept."""
        if not self._complete:
            for path in self.paths:
                if path not in self._entries:
                    self._entries[path] = self._read_imports(path)
            self._complete = True
            self._index = None
        if self._index is None:
            self._index = {}
            for path, entries in self._entries.items():
                for name, source, local in entries:
                    self._index.setdefault(name, []).append((path, source, local))
        return self._index

    def prepare(self) -> None:
        """Build the import index now: check_paths does before its workers fork, so that they inherit one index
        (their lookups leave its pages shared) instead of each building a copy."""
        self._imported

    def _read_imports(self, path: str) -> Imports:
        """A file's index entries: remembered from an earlier run while its size, modification time and module
        name are unchanged, else read (and remembered when the file did not change while it was read)."""
        if self._memory is None or path in self._overlay:
            return self._imports_of(path, self._bytes(path))
        module = self._module(path)
        try:
            remembered = self._memory.recall_imports(path, os.stat(path), module)
        except OSError:
            return ()
        if remembered is not None:
            return remembered
        raw, status = _read_with_status(path)
        imports = self._imports_of(path, raw)
        if status is not None:
            self._memory.keep_imports(path, status, module, imports)
        return imports

    def imports_in(self, path: str, raw: bytes) -> tuple | None:
        """What the index keeps of a file, from bytes the caller has read anyway (check_paths, before its
        workers fork), for `learnt`; None when the index reads that file itself or has no use for it."""
        path = os.path.abspath(path)
        return self._imports_of(path, raw) if self._learns(path) else None

    def learnt(self, path: str, imports: tuple, status: os.stat_result | None = None) -> None:
        """Keep `imports_in`'s answer (computed here or in a worker), so that the file is not read again for
        the index, instead of once more in each worker that asks. Names are interned again: a worker's come back
        as copies. `status`: the file's, when its bytes did not change while they were read (then remembered)."""
        path = os.path.abspath(path)
        if self._learns(path):
            self._entries[path] = entries = tuple(tuple(map(sys.intern, entry)) for entry in imports)
            if self._memory is not None and status is not None:
                self._memory.keep_imports(path, status, self._module(path), entries)

    def _learns(self, path: str) -> bool:
        """Whether the index takes a file's imports from its caller: not for an open buffer (read from the
        overlay), nor once the index is complete, nor for a file outside the run."""
        return path not in self._overlay and not self._complete and path in self._run

    def name_modules(self) -> None:
        """Work out each file's dotted module name now: before workers fork, so that they share them."""
        self._names

    def _imports_of(self, path: str, raw: bytes | None) -> tuple[tuple[str, str, str], ...]:
        """(class name, module written, resolved against the file's package, local name) of each class the file
        imports with `from ... import`."""
        if raw is None or b"import" not in raw:
            return ()
        found = []
        here = self._module(path).split(".")
        package = here if path.endswith("__init__.py") else here[:-1]
        for match in _from_imports(raw):
            names = [("*", "*")] if match[2].strip() == b"*" else _imported_names(match[2])
            if names:
                source = sys.intern(_absolute(match[1].decode("ascii", "replace"), package))
                found.extend((sys.intern(name), source, sys.intern(local)) for name, local in names)
        return tuple(found)  # the same few names and modules recur in every file: interned, they are kept once

    @cached_property
    def _names(self) -> dict[str, str]:
        """Each file's dotted module name."""
        return {path: self._module(path) for path in self.paths}

    def _module(self, path: str) -> str:
        if path not in self._module_names:
            self._module_names[path] = module_name(path, self._packages)
        return self._module_names[path]

    @cached_property
    def _modules(self) -> dict[str, list[tuple[str, str]]]:
        """The last part of each file's dotted module name -> (module name, path)."""
        modules: dict[str, list[tuple[str, str]]] = {}
        for path, module in self._names.items():
            modules.setdefault(module.rsplit(".", 1)[-1], []).append((module, path))
        return modules

    def changed(self, path: str) -> set[str]:
        """The file at `path` has new text (in a buffer or on disk), or was created or deleted: forget what was
        read of it. Returns the files whose importers it may have changed (those its imports named before or
        name now), whose analyses may now see another caller."""
        path = os.path.abspath(path)
        self._contexts.pop(path, None)
        self._alive.pop(path, None)
        self._checked.pop(path, None)
        self._attention.pop(path, None)
        self._reaches.clear()
        self._said.clear()
        self._mentioned.clear()  # read from every file's text, as the two below
        self._binds_torch.clear()
        self._derives.clear()
        exists = self._bytes(path) is not None
        if exists != (path in self.paths) and path.endswith(".py"):
            self.paths = [other for other in self.paths if other != path] + ([path] if exists else [])
            self._module_names.clear()  # an __init__.py made or removed renames the modules around it
            self._packages.clear()
            self.__dict__.pop("_names", None)
            self.__dict__.pop("_modules", None)
            self._resolved.clear()
            self._classes_imported.clear()
            self._contexts.clear()  # a module name may now resolve to another file
            self._alive.clear()
        if not self._complete:  # nothing has used the index yet: what was learnt of the file is just forgotten
            self._entries.pop(path, None)
            return set()
        before = self._entries.pop(path, ())
        after = self._imports_of(path, self._bytes(path)) if path in self.paths else ()
        if after:
            self._entries[path] = after
        if before == after:
            return set()
        self._index = None
        self._classes_imported.clear()
        return {target for _, source, _ in (*before, *after) if (target := self._resolve(source)) is not None}

    def importers(self, path: str, name: str) -> list[Importer]:
        """The other files that import `name` (a class, or a function) from the module at `path`."""
        target = os.path.abspath(path)
        return [Importer(other, local) for other, source, local in self._imported.get(name, ())
                if other != target and self._resolve(source, other) == target]

    def may_call(self, path: str, name: str) -> bool:
        """Whether a file's text may call `name` (the word, then an opening parenthesis): one that never does
        neither builds the class it imports under that name nor runs an instance built from it, so it is not
        parsed to look for either."""
        key = (path, name, True)
        if key not in self._said:
            raw = self._bytes(path) or b""
            self._said[key] = re.search(rb"\b%s[ \t\\\r\n]*\(" % name.encode(), raw) is not None
        return self._said[key]

    def may_read(self, path: str, name: str) -> bool:
        """Whether a file's text names `name` again beyond the import that brings it in and the bases of class
        headers (`class Local(Name)`, a subclass builds no instance of it): one that does not uses the class
        nowhere that may build one or hand it over, so it is not parsed to look."""
        key = (path, name, False)
        if key not in self._said:
            raw = _CLASS.sub(b"", self._bytes(path) or b"")
            self._said[key] = len(re.findall(rb"\b%s\b" % name.encode(), raw)) > 1
        return self._said[key]

    def mentions(self, word: str, home: str) -> bool:
        """Whether a file of the project other than `home` holds `word` as a whole word anywhere in its text (a
        call of an attribute by that name is then possible there; `attn` inside `self_attn` is another name).
        Memoised per word (the first two files that hold it): each question reads the whole project."""
        if word not in self._mentioned:
            needle = word.encode()
            whole = re.compile(rb"(?<![\w])" + re.escape(needle) + rb"(?![\w])")
            holding = (path for path in self.paths
                       if needle in (text := self._bytes(path) or b"") and whole.search(text) is not None)
            self._mentioned[word] = [path for path, _ in zip(holding, range(2))]
        return any(path != os.path.abspath(home) for path in self._mentioned[word])

    def imported_class(self, home: str, local: str) -> tuple[str, str] | None:
        """(the file that defines it, its name there) for a class that `home` imports as `local`, when exactly
        one file of the run can be that module; through the files that import it in turn to re-export it (a
        package's `__init__.py` with `from .layers import Block`)."""
        found, seen = None, {os.path.abspath(home)}
        while True:
            home = os.path.abspath(home)
            if home not in self._classes_imported:
                self._imported  # the entries of every file
                self._classes_imported[home] = {  # from this file's own entries, not a pass over every file's
                    written_local: (self._resolve(source, home), name)
                    for name, source, written_local in self._entries.get(home, ()) if _is_class_name(name)}
            defining, name = self._classes_imported[home].get(local, (None, ""))
            if defining is None or defining in seen:
                return found
            found, home, local = (defining, name), defining, name
            seen.add(defining)

    def imported_function(self, home: str, local: str) -> tuple[str, str] | None:
        """(the file that defines it, its name there) for a name `home` imports as `local` with `from ... import`
        from a module of the run (`from utils.data import load_dataset`); no re-export is followed."""
        home = os.path.abspath(home)
        self._imported  # every file's entries are read
        for name, source, written in self._entries.get(home, ()):
            if written == local and name != "*":
                found = self._resolve(source, home)
                return (found, name) if found is not None else None
        return None

    def reaching_attention(self, matched: Mapping[str, bytes], unmatched: set[str]) -> set[str]:
        """The files among `unmatched` (no trigger in their code) that name torch's attention classes only through
        a name another file of the run gives them: `from .layers import MHA` where layers.py has `MHA =
        nn.MultiheadAttention` or `class MHA(nn.MultiheadAttention)`, a star import of such a file, a package that
        re-exports it, a subclass of it. They must be analysed too (the prefilter alone would skip them)."""
        exports = {path: _exports(raw, set()) for path, raw in matched.items()}
        exports = {path: names for path, names in exports.items() if names}
        pulled: set[str] = set()
        work = list(exports)
        while work:
            target = work.pop()
            for importer, local in self._importers_of(target, exports[target]):
                if importer not in unmatched and importer not in pulled:
                    continue
                raw = self._bytes(importer)
                known = exports.get(importer, set()) | local
                names = _exports(raw, known) | known if raw is not None else known
                if importer not in pulled or names != exports.get(importer):
                    pulled.add(importer)
                    exports[importer] = names
                    work.append(importer)
        return pulled

    def _importers_of(self, target: str, names: set[str]) -> Iterator[tuple[str, set[str]]]:
        """(file, the local names it gets) for each file that imports one of `names` from `target`, or all of
        them with a star."""
        index = self._imported
        for name in (*names, "*"):
            for importer, source, local in index.get(name, ()):
                if importer != target and self._resolve(source) == target:
                    yield importer, set(names) if name == "*" else {local}

    def imports_project(self, path: str) -> bool:
        """Whether a file imports from another file of the run: its findings may depend on that file."""
        path = os.path.abspath(path)
        entries = self._entries.get(path)
        if entries is None:  # not learnt from the first pass (it came before any file matched): read here
            entries = self._entries[path] = self._imports_of(path, self._bytes(path))
        return any(self._resolve(source) is not None for name, source, _ in entries if _is_class_name(name))

    def torch_name(self, home: str, local: str, stars: list[str], limits: Limits) -> str | None:
        """The torch attention API a name of `home` stands for in the file it comes from: `from .layers import
        MHA` where layers.py has `MHA = nn.MultiheadAttention`, a package `__init__` that re-exports torch's class,
        or a name a star import (`stars`, the modules as written) brings in. Only files whose code names torch's
        attention classes are parsed for it (or that import the name from one)."""
        from mhalint import torchapi
        from mhalint.parse.lazy import cst

        home = os.path.abspath(home)
        found = self.imported_class(home, local)
        sources = [found] if found is not None else [(self.module_file(home, written), local) for written in stars]
        for path, name in sources:
            if path is None or path == home or (path, name) in self._asking or not self.may_name_attention(path) \
                    or not self._may_bind_torch(path, name):
                continue
            other = self.context(path, limits)
            if other is None or (found is None and not _exported(other, name)):
                continue
            self._asking.add((path, name))  # a cycle of imports finds nothing
            try:
                dotted = other.qualified_name(cst.Name(name))
            finally:
                self._asking.discard((path, name))
            if dotted in torchapi.CONSTRUCTORS or dotted in torchapi.CALLS:
                return dotted
        return None

    def _may_bind_torch(self, path: str, name: str) -> bool:
        """Whether `name` in `path` may stand for something of torch's: a name the file imports (a re-export), or
        assigns another name (`MHA = nn.MultiheadAttention`), or one a star import may bring in where the file
        does not bind it itself. A name it only defines with `class` or `def` is its own, and so is one it assigns
        a call or any other expression (`ALL_ATTENTION_FUNCTIONS = AttentionInterface()`): the file is not parsed
        to ask (a large file that imports an attention class and defines many others would be parsed for each)."""
        key = (path, name)
        if key not in self._binds_torch:
            self._imported  # the entries of every file
            locals_ = {local for _, _, local in self._entries.get(path, ())}
            written = name.encode()
            lines = _naming(self._bytes(path) or b"", written)
            self._binds_torch[key] = name in locals_ or _aliases(lines, written) or (
                "*" in locals_ and not _assigns(lines, written) and not _defines(lines, written))
        return self._binds_torch[key]

    def may_derive_attention(self, path: str, name: str, depth: int = 0) -> bool:
        """Whether the class `name` that `path` defines may derive from a torch attention class, read from the
        text of the class headers along its bases (this file's classes, the project's through the import index):
        only then is the file parsed to read the class. A name the file only imports (a package `__init__.py`
        re-exporting a mixin) is followed to the file that defines it. A base the text cannot follow (an alias, a
        star import, a dotted project module) may; a torch or outside base that is not attention may not. A
        transformers model derives from PreTrainedModel, whose file is thousands of lines: it was parsed to learn
        that, and PreTrainedModel's re-exported mixins made it parse it still."""
        key = (path, name)
        if key in self._derives:
            return self._derives[key]
        if depth > _BASE_STEPS:
            return True
        self._derives[key] = False  # a cycle of bases reaches nothing
        raw = self._bytes(path) or b""
        headers = re.findall(rb"^[ \t]*class[ \t]+%s\b[ \t]*(?:\(([^)]*)\))?" % re.escape(name.encode()), raw,
                             re.MULTILINE)
        found = any(self._base_may_derive(path, raw, base.split(b"[")[0].strip(), depth)
                    for bases in headers for base in bases.split(b",") if base.strip() and b"=" not in base) \
            if headers else self._base_may_derive(path, raw, name.encode(), depth)  # a re-export: followed
        self._derives[key] = found
        return found

    def _base_may_derive(self, path: str, raw: bytes, base: bytes, depth: int) -> bool:
        text = base.decode("ascii", "replace")
        if _ATTENTION_WORD.fullmatch(base.rsplit(b".", 1)[-1]):
            return True
        if "." in text:
            return text.split(".", 1)[0] not in ("nn", "torch")
        lines = _naming(raw, base)
        if re.search(rb"^[ \t]*class[ \t]+%s\b" % re.escape(base), lines, re.MULTILINE):
            return self.may_derive_attention(path, text, depth + 1)
        self._imported  # the entries of every file
        entries = self._entries.get(path, ())
        imported = [(written, name) for name, written, local in entries if local == text]
        if imported:  # torch's own class by another name, or a project class (an outside one is never read)
            return any(_ATTENTION_WORD.fullmatch(name.encode())
                       or (source := self._resolve(written, path)) is not None
                       and self.may_derive_attention(source, name, depth + 1) for written, name in imported)
        return _assigns(lines, base) or any(local == "*" for _, _, local in entries)

    def may_name_attention(self, path: str) -> bool:
        """Whether a file names torch's attention classes, or imports classes from a file of the run that may (a
        subclass of a subclass, a re-export of an alias), up to _IMPORT_STEPS files away: only such a file is
        parsed to see what a name of it stands for. Breadth-first, each file once: a package whose files import
        each other is walked in time linear in its imports."""
        if path not in self._reaches:
            self._imported  # the entries of every file
            level, seen, found = [path], {path}, False
            for _ in range(_IMPORT_STEPS + 1):
                if any(self.names_attention(each) or self._reaches.get(each) for each in level):
                    found = True
                    break
                level = [source for each in level for name, written, _ in self._entries.get(each, ())
                         if _is_class_name(name) and (source := self._resolve(written)) is not None
                         and source not in seen and not seen.add(source)]
            self._reaches[path] = found
        return self._reaches[path]

    def module_file(self, home: str, written: str) -> str | None:
        """The file of the run a module written in `home` (`.layers`, `pkg.layers`) is, if exactly one can be."""
        here = self._module(os.path.abspath(home)).split(".")
        package = here if home.endswith("__init__.py") else here[:-1]
        return self._resolve(_absolute(written, package))

    def names_attention(self, path: str) -> bool:
        """Whether a file's code may name torch's attention classes (the prefilter's triggers): only such a file
        can define a subclass of one, so only such a file is parsed to see whether a class it defines is one."""
        if path not in self._attention:
            raw = self._bytes(path)
            self._attention[path] = raw is not None and _attention_words().matches(raw)
        return self._attention[path]

    def _resolve(self, written: str, home: str | None = None) -> str | None:
        """The file a dotted module name refers to, when exactly one file of the run can be it; among several (a
        folder without `__init__.py` cuts the dotted names short: `modules` in each copy of `ops/modules/`), the one
        whose path spells the whole name from a folder that holds `home`, the importing file."""
        if written not in self._resolved:
            candidates = {path for module, path in self._modules.get(written.rsplit(".", 1)[-1], ())
                          if _same_module(written, module)}
            self._resolved[written] = candidates.pop() if len(candidates) == 1 else (None, frozenset(candidates))
        found = self._resolved[written]
        if not isinstance(found, tuple):
            return found
        if home is None:
            return None
        spelt, home = os.sep + written.replace(".", os.sep), os.path.abspath(home)
        near = [path for path in found[1] for suffix in (".py", os.sep + "__init__.py")
                if os.path.abspath(path).endswith(spelt + suffix)
                and home.startswith(os.path.abspath(path)[:-len(spelt + suffix)] + os.sep)]
        return near[0] if len(near) == 1 else None

    def context(self, path: str, limits: Limits):
        """The ModuleContext of another file of the project, or None when it cannot be read or parsed, or its
        tree would pass the memory budget. It is read under `limits`, the budget of the file being checked."""
        self.reads.add(path)
        context = self._contexts.pop(path) if path in self._contexts else self._alive.get(path, _UNREAD)
        if context is _UNREAD:
            context = _parse(path, self._bytes(path), limits, self, self._checked.pop(path, None),
                             whole=path in self._to_check)
            if context is not None:
                self._alive[path] = context
        self._contexts[path] = context  # the most recently used last
        self._keep_within_budget()

        if context is not None:
            context.limits = limits  # what the analyses do in it counts against the file being checked
        return context

    def will_check(self, paths: Iterable[str]) -> None:
        """The files the run is about to check. Read for another file's analysis first, such a file is parsed
        whole (its own check needs all of it); any other is parsed a function body at a time, as the analyses
        ask (mhalint.parse.lazy_bodies)."""
        self._to_check = {os.path.abspath(path) for path in paths}

    def forget_partial(self) -> None:
        """Drop the trees with bodies still unparsed (after a body libcst refused: they are parsed whole again)."""
        for path in [path for path, context in self._contexts.items() if context is not None and context.partial]:
            del self._contexts[path]
            self._alive.pop(path, None)

    def checked(self, path: str, text: str, module, statement_lines: list[int], bodies: dict[int, list[int]],
                shell=None) -> None:
        """A file the run has just checked, with its tree (a `shell` with bodies still pending, if it was parsed a
        function at a time): an analysis of a later file that reads this one builds its context on the tree instead
        of parsing the file again. The latest are kept, up to _MAX_CHECKED_LINES lines of source."""
        path = os.path.abspath(path)
        self._to_check.discard(path)  # read again for another file once its tree is gone: only what that one asks
        self._checked.pop(path, None)
        self._checked[path] = (text, module, statement_lines, bodies, text.count("\n"), shell)
        lines = sum(kept[4] for kept in self._checked.values())
        while lines > _MAX_CHECKED_LINES:
            lines -= self._checked.pop(next(iter(self._checked)))[4]

    def tree(self, path: str, text: str):
        """The libcst tree of `path` when the project holds one parsed from `text` (an analysis of another file
        read it first): the file's own check then builds on it instead of parsing the file again."""
        path = os.path.abspath(path)
        context = self._contexts.get(path) or self._alive.get(path)
        if context is None or context.source() != text:
            return None
        context.parse_all()  # the check walks all of it
        return context.module

    def _keep_within_budget(self) -> None:
        """Drop the least recently used trees beyond the budget: one analysis asks about a class's importers in
        turn, and a cache smaller than their number parsed each of them again at every question. A dropped tree
        that an analysis still holds stays in `_alive` and is handed out again, not parsed anew."""
        lines = sum(_lines(context) for context in self._contexts.values())
        while len(self._contexts) > _MAX_CONTEXTS and lines > _MAX_LINES:
            lines -= _lines(self._contexts.pop(next(iter(self._contexts))))

    def _bytes(self, path: str) -> bytes | None:
        return self._overlay[path] if path in self._overlay else _read(path)

    @staticmethod
    def display(path: str, home: str) -> str:
        """How the evidence of a finding in `home` names another file: relative to the current directory when
        both are inside it, as the finding's own path is; else relative to `home`'s directory."""
        relative = os.path.relpath(path)
        if not relative.startswith("..") and not os.path.relpath(home).startswith(".."):
            return relative
        return os.path.relpath(path, os.path.dirname(os.path.abspath(home)))


_UNREAD = object()


def _lines(context) -> int:
    return context.source().count("\n") if context is not None else 0


def module_name(path: str, packages: dict[str, bool] | None = None) -> str:
    """`pkg.sub.model` for pkg/sub/model.py where pkg and sub hold an `__init__.py`; `model` for a script
    directory (its siblings import it by that name); a package's `__init__.py` is the package. `packages`: which
    folders are known to be packages (filled here: the files of a project share their folders)."""
    packages = {} if packages is None else packages
    folder, stem = os.path.split(path)
    parts = [] if stem == "__init__.py" else [stem[:-3]]
    while packages.get(folder) or (folder not in packages and packages.setdefault(
            folder, os.path.isfile(os.path.join(folder, "__init__.py")))):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    return ".".join(parts)


# `from .model import Encoder, Block as B` and `from pkg import (\n    Encoder,\n)`, on lines of their own.
_FROM_IMPORT = re.compile(rb"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n;]*)", re.MULTILINE)


def _from_imports(raw: bytes) -> Iterator[re.Match[bytes]]:
    """What `_FROM_IMPORT.finditer(raw)` finds, five times as fast: the pattern is tried only at the start of a
    line that holds `from` after nothing but blanks, not at every line start."""
    start = 0
    while (word := raw.find(b"from", start)) >= 0:
        line = raw.rfind(b"\n", 0, word) + 1
        match = _FROM_IMPORT.match(raw, line) if not raw[line:word].strip(b" \t") else None
        start = match.end() if match else word + 4
        if match:
            yield match


_COMMENT = re.compile(rb"#[^\n]*")


def _imported_names(written: bytes) -> list[tuple[str, str]]:
    """(name, local name) of the names an import lists: classes (capitalised, what most questions are about) and
    functions (a factory that builds a project class, `build_transformer`)."""
    text = _COMMENT.sub(b"", written).strip(b"() \t\r\n\\").decode("ascii", "replace")
    found = []
    for part in text.split(","):
        words = part.split()
        if words and words[0].isidentifier():
            local = words[2] if len(words) == 3 and words[1] == "as" else words[0]
            found.append((words[0], local))
    return found


def _is_class_name(name: str) -> bool:
    """Capitalised (or the star): the index's entries that name a class, which most of its questions are about."""
    return name[:1].isupper() or name == "*"


def _absolute(written: str, package: list[str]) -> str:
    """A relative module (`..layers`) as a dotted name from the file's package; an absolute one as written."""
    level = len(written) - len(written.lstrip("."))
    if not level:
        return written
    if level > len(package) + 1:
        return ""
    rest = written[level:]
    return ".".join([*package[:len(package) - level + 1], *([rest] if rest else [])])


def _same_module(written: str, module: str) -> bool:
    """`pkg.model` names `pkg.model`; in a src layout or a script directory the run may see a shorter or longer
    dotted name for the same file, so a match of the trailing parts counts."""
    if not written or not module:
        return False
    a, b = written.split("."), module.split(".")
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    return longer[len(longer) - len(shorter):] == shorter


_ATTENTION_WORD = re.compile(rb"MultiheadAttention|Transformer(?:Encoder|Decoder)?(?:Layer)?")
_CLASS = re.compile(rb"class[ \t]+(\w+)[ \t]*\(([^)]*)\)")
_ALIAS = re.compile(rb"(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*([\w.]+)[ \t]*(?:#[^\n]*)?$")
_AS = re.compile(rb"\b(\w+)[ \t]+as[ \t]+(\w+)")


def _exports(raw: bytes, known: set[str]) -> set[str]:
    """The module-level names a file's bytes make stand for torch's attention classes, or for the `known` names
    (those it imports from a file that exports one): a subclass, an alias, an import from torch under another
    name. A bare word counts only where the file imports it from torch (fairseq's own `TransformerDecoder` is
    not). Read from the bytes, as the prefilter reads them, only on the lines that hold one of the words."""
    bare = {name.encode() for name in known}
    for match in _from_imports(raw):
        if match[1].startswith(b"torch"):
            words = ["MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
                     "TransformerEncoderLayer", "TransformerDecoderLayer"] if match[2].strip() == b"*" else \
                [word for word, _ in _imported_names(match[2])]
            bare.update(word.encode() for word in words if _ATTENTION_WORD.fullmatch(word.encode()))
    found: set[str] = set()
    while True:
        new = set()
        for line in _lines_with(raw, (b"MultiheadAttention", b"Transformer", *bare)):
            header, alias = _CLASS.match(line), _ALIAS.match(line)
            if header is not None and any(_stands_for(base.strip(), bare) for base in header[2].split(b",")):
                new.add(header[1].decode())
            elif alias is not None and _stands_for(alias[2], bare):
                new.add(alias[1].decode())
            elif line.lstrip().startswith(b"from torch"):
                new.update(m[2].decode() for m in _AS.finditer(line) if _ATTENTION_WORD.fullmatch(m[1]))
        if new <= found:
            return found
        found |= new
        bare |= {name.encode() for name in new}


def _stands_for(expr: bytes, bare: set[bytes]) -> bool:
    """`nn.MultiheadAttention` (a module's attribute), or a bare name the file got from torch or an exporter."""
    module, _, last = expr.rpartition(b".")
    return bool(_ATTENTION_WORD.fullmatch(last)) if module else expr in bare


def _lines_with(raw: bytes, literals) -> list[bytes]:
    """The lines that hold one of the literal words, found with `bytes.find` (a regex over every byte of the
    matched files cost half the prefilter's time)."""
    spans = set()
    for literal in literals:
        found = raw.find(literal)
        while found >= 0:
            start = raw.rfind(b"\n", 0, found) + 1
            end = raw.find(b"\n", found)
            end = len(raw) if end < 0 else end
            spans.add((start, end))
            found = raw.find(literal, end)
    return [raw[start:end] for start, end in sorted(spans)]


def _exported(ctx, name: str) -> bool:
    """Whether `from module import *` brings in a module-level name: listed in a literal `__all__`, or, without
    one, any name not starting with an underscore."""
    listed = ctx.root.bindings.get("__all__")
    if not listed:
        return not name.startswith("_") and name in ctx.root.bindings
    value = listed[-1].value
    from mhalint.parse.lazy import cst
    from mhalint.parse.literals import literal

    return isinstance(value, cst.List | cst.Tuple) and any(
        isinstance(element.value, cst.SimpleString) and literal(element.value) == name
        for element in value.elements)


@cache
def _attention_words():
    from mhalint import torchapi
    from mhalint.run.prefilter import Prefilter

    return Prefilter(torchapi.MODULE_TRIGGERS)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb", opener=regular_only) as handle:  # a FIFO named .py must not block the analysis
            return handle.read()
    except OSError:
        return None


def _read_with_status(path: str) -> tuple[bytes | None, os.stat_result | None]:
    """The file's bytes, and its status when it did not change while they were read (else None)."""
    from mhalint.run.scan import read

    try:
        return read(path)
    except OSError:
        return None, None


def _naming(raw: bytes, name: bytes) -> bytes:
    """The lines of a file that hold `name`, joined: what the line-anchored questions below read, found once per
    name instead of each question's regex reading every byte of a large file."""
    return b"\n".join(_lines_with(raw, (name,)))


def _assigns(lines: bytes, name: bytes) -> bool:
    """Whether a statement assigns `name` (`MHA = ...`, `A, MHA = ...`, `MHA: type = ...`), in `_naming`'s lines."""
    return re.search(rb"^[ \t]*(?:[\w.]+[ \t]*,[ \t]*)*%s[ \t]*(?:,[ \t]*[\w.]+[ \t]*)*(?::[^=\n]*)?=(?!=)"
                     % re.escape(name), lines, re.MULTILINE) is not None


def _aliases(lines: bytes, name: bytes) -> bool:
    """Whether a statement may make `name` another name for something (what `qualified_name` follows), in
    `_naming`'s lines: `MHA = nn.MultiheadAttention`, `MHA: type = (...`, a value continued on the next line, or a
    tuple's element (`A, MHA = ...`). Not `MHA = build()` nor `MHA = a if c else b`."""
    escaped = re.escape(name)
    alias = rb"^[ \t]*%s[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*(?:[(\\]|[A-Za-z_][\w.]*[ \t]*(?:#[^\n]*)?\\?$)" % escaped
    unpacked = rb"^[ \t]*(?:[\w.]+[ \t]*,[ \t]*)+%s\b|^[ \t]*%s[ \t]*," % (escaped, escaped)
    return re.search(alias, lines, re.MULTILINE) is not None or (
        re.search(unpacked, lines, re.MULTILINE) is not None and _assigns(lines, name))


def _defines(lines: bytes, name: bytes) -> bool:
    """Whether a top-level `class` or `def` statement (at the start of a line) binds `name`, in `_naming`'s lines:
    then a star import never decides what the name stands for in the module."""
    return re.search(rb"^(?:class|def|async[ \t]+def)[ \t]+%s\b" % re.escape(name), lines, re.MULTILINE) is not None


def project_root(path: str, known: dict[str, str | None] | None = None) -> str | None:
    """The nearest folder at or above `path` (a file's folder, or a folder) holding a pyproject.toml, setup.cfg,
    setup.py or .git; None when there is none. The search stops below the user's home folder and the filesystem's
    root: a `.git` of dotfiles in the home folder would otherwise make every file under it one project, walked
    on each run. `known`: answers for folders already asked about."""
    known = {} if known is None else known
    folder = os.path.abspath(path)
    if not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    ceilings = _ceilings()
    passed = []
    while folder not in known:
        passed.append(folder)
        if folder in ceilings:
            known[folder] = None
            break
        if any(os.path.lexists(os.path.join(folder, marker)) for marker in ROOT_MARKERS):
            known[folder] = folder
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            known[folder] = None
            break
        folder = parent
    root = known[folder]
    known.update(dict.fromkeys(passed, root))
    return root


def _ceilings() -> set[str]:
    """The folders never taken for a project's root: the home folder (`HOME`) and the filesystem's root."""
    home = os.path.expanduser("~")
    found = {os.path.abspath(os.sep)}
    if home != "~":
        found.add(os.path.abspath(home))
    return found


def project_files(paths: Iterable[str], walked: Iterable[str] = (), **discovery) -> list[str]:
    """The Python files of the projects of `paths` (files or folders): all those below each one's root, found as
    `discover` finds them (its keyword arguments: the configuration's excludes, .gitignore); a path with no root
    brings only itself. `walked`: folders the run has walked already (a run over the whole project), whose files
    it has: a root inside one is not walked again."""
    from mhalint.configuration.discovery import discover

    known: dict[str, str | None] = {}
    done = [os.path.join(os.path.abspath(folder), "") for folder in walked]
    roots = sorted({root for path in paths if (root := project_root(str(path), known)) is not None
                    and not any(os.path.join(root, "").startswith(folder) for folder in done)})
    discovery.pop("force_exclude", None)  # the project's own files are walked, never named
    return [str(path) for path in discover(roots, extensions=(".py",), **discovery).files] if roots else []


def _parse(path: str, raw: bytes | None, limits: Limits, project: Project, checked: tuple | None = None,
           whole: bool = False):
    """Another file's context, parsed as the file being checked is: CPython's parser first (it refuses nesting
    that would overflow libcst's native stack, and its statement lines spare positions a pass over the whole
    module), then libcst's without its node checks, leaving the function bodies that nothing asks about unparsed
    (mhalint.parse.lazy_bodies) unless it is to be parsed `whole`; or built on the tree of its own check earlier in the
    run (`checked`), when its text is the same."""
    from mhalint.context import ModuleContext
    from mhalint.parse import lazy_bodies
    from mhalint.parse.lazy import cst
    from mhalint.parse.positions import body_lines, first_lines

    if raw is None:
        return None
    try:
        text, _ = decode(raw)
        shell = None
        if checked is not None and checked[0] == text:
            module, statement_lines, bodies, _, shell = checked[1:6]
        else:
            if "\0" in text or not limits.allows_tree(text, "libcst"):
                return None
            syntax = ast.parse(text, filename=path)
            statement_lines, bodies = first_lines(syntax), body_lines(syntax)
            shell = lazy_bodies.parse(text, syntax, whole)
            del syntax
            module = shell.module
        context = ModuleContext(module, path, text, statement_lines, names=project, body_lines=bodies,
                                shell=shell)  # names only
        context.other_file = True
        return context
    except (UnicodeDecodeError, LookupError, SyntaxError, cst.ParserSyntaxError, RecursionError, MemoryError,
            ValueError):
        return None
