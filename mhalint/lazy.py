"""libcst as a deferred import: a module object now, its code on the first attribute access.

Loading the rules is what tells mhalint their trigger patterns, and rules use libcst (about 0.2 s to import, most
of a small run); a run whose files match no trigger (the common pre-commit case) must not pay for it. Modules get
it with `from mhalint.lazy import cst`: a plain `import libcst` statement would load it at once, because the
import system reads the module's `__spec__`, and importlib's LazyLoader runs the module on any attribute access.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING


def defer(name: str) -> ModuleType:
    """`name`, as it is if already imported, otherwise imported on first attribute access."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return importlib.import_module(name)  # raises the usual ModuleNotFoundError
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    import libcst as cst
else:
    cst = defer("libcst")
