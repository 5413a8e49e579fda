"""The project: the files of one run, which of them import a class from another, and their parsed contexts.

Cheap where it is asked often: a file is only read when its bytes mention the name asked about, and only those
are parsed, with CPython's `ast`, to resolve their imports (relative imports, packages, src layouts, plain
script directories); a file that imports the class is then parsed with libcst once per process, for the readers
to follow calls there. Nothing is imported or executed.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from functools import cached_property

from mhalint.source import decode

_MAX_CONTEXTS = 32  # libcst trees kept per process


@dataclass(frozen=True)
class Importer:
    """A file that imports a class of another, and the name the class has there (`from .model import Encoder as
    Enc`: `Enc`)."""

    path: str
    local: str


class Project:
    def __init__(self, paths: list[str]):
        self.paths = [os.path.abspath(path) for path in paths if path.endswith(".py")]
        self._contexts: dict[str, object] = {}
        self._texts: dict[str, bytes | None] = {}
        self._importers: dict[tuple[str, str], list[Importer]] = {}
        self._from_imports: dict[str, list[tuple[str, list[tuple[str, str]]]]] = {}
        self._resolved: dict[str, str | None] = {}

    @cached_property
    def _modules(self) -> dict[str, str]:
        """Dotted module name -> path, for every file of the run."""
        return {module_name(path): path for path in self.paths}

    def importers(self, path: str, name: str) -> list[Importer]:
        """The other files that import class (or function) `name` from the module at `path`. Only files whose
        bytes show `import ... name` are parsed (with `ast`), each once."""
        target = os.path.abspath(path)
        key = (target, name)
        if key not in self._importers:
            imports = re.compile(rb"\bimport\b[^;#\n]*?(?:\([^)]*?)?\b" + re.escape(name.encode()) + rb"\b")
            found = []
            for other in self.paths:
                raw = self._text(other) if other != target else None
                if raw is None or name.encode() not in raw or not imports.search(raw):
                    continue
                local = _imported_as(self._imports(other, raw), name, lambda written: self._resolve(written) == target)
                if local is not None:
                    found.append(Importer(other, local))
            self._importers[key] = found
        return self._importers[key]

    def _imports(self, path: str, raw: bytes) -> list[tuple[str, list[tuple[str, str]]]]:
        """(the module written, resolved against the file's package, [(name, local name)]) for each
        `from ... import` of a file."""
        if path not in self._from_imports:
            self._from_imports[path] = _from_imports(raw, path)
        return self._from_imports[path]

    def _resolve(self, written: str) -> str | None:
        """The file a dotted module name refers to, when exactly one file of the run can be it."""
        if written not in self._resolved:
            candidates = {path for module, path in self._modules.items() if _same_module(written, module)}
            self._resolved[written] = candidates.pop() if len(candidates) == 1 else None
        return self._resolved[written]

    def context(self, path: str):
        """The ModuleContext of another file of the project, or None when it cannot be read or parsed."""
        if path not in self._contexts:
            if len(self._contexts) >= _MAX_CONTEXTS:
                self._contexts.pop(next(iter(self._contexts)))
            self._contexts[path] = _parse(path, self._text(path))
        return self._contexts[path]

    @staticmethod
    def display(path: str, home: str) -> str:
        """How the evidence of a finding in `home` names another file: relative to the current directory when
        both are inside it, as the finding's own path is; else relative to `home`'s directory."""
        relative = os.path.relpath(path)
        if not relative.startswith("..") and not os.path.relpath(home).startswith(".."):
            return relative
        return os.path.relpath(path, os.path.dirname(os.path.abspath(home)))

    def _text(self, path: str) -> bytes | None:
        if path not in self._texts:
            try:
                with open(path, "rb") as handle:
                    self._texts[path] = handle.read()
            except OSError:
                self._texts[path] = None
        return self._texts[path]


def module_name(path: str) -> str:
    """`pkg.sub.model` for pkg/sub/model.py where pkg and sub hold an `__init__.py`; `model` for a script
    directory (its siblings import it by that name); a package's `__init__.py` is the package."""
    folder, stem = os.path.split(path)
    parts = [] if stem == "__init__.py" else [stem[:-3]]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    return ".".join(parts)


def _from_imports(raw: bytes, path: str) -> list[tuple[str, list[tuple[str, str]]]]:
    try:
        tree = ast.parse(raw)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    here = module_name(path).split(".")
    package = here if path.endswith("__init__.py") else here[:-1]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if node.level > len(package) + 1:
                continue
            source = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        found.append((source, [(alias.name, alias.asname or alias.name) for alias in node.names]))
    return found


def _imported_as(imports, name: str, is_target) -> str | None:
    """The local name `from <module> import name` gives in a file, for a module that `is_target`; None if none."""
    for source, names in imports:
        for imported, local in names:
            if imported == name and is_target(source):
                return local
    return None


def _same_module(written: str, module: str) -> bool:
    """`pkg.model` names `pkg.model`; in a src layout or a script directory the run may see a shorter or longer
    dotted name for the same file, so a match of the trailing parts counts."""
    if not written or not module:
        return False
    a, b = written.split("."), module.split(".")
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    return longer[len(longer) - len(shorter):] == shorter


def _parse(path: str, raw: bytes | None):
    from mhalint.context import ModuleContext
    from mhalint.lazy import cst

    if raw is None:
        return None
    try:
        text, _ = decode(raw)
        return ModuleContext(cst.parse_module(text), path, text)
    except (UnicodeDecodeError, LookupError, SyntaxError, cst.ParserSyntaxError, RecursionError, ValueError):
        return None
