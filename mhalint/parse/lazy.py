"""libcst as a deferred import: a module object now, its code on the first attribute access.

Loading the rules is what tells mhalint their trigger patterns, and rules use libcst (about 0.2 s to import, most
of a small run); a run whose files match no trigger (the common pre-commit case) must not pay for it. Modules get
it with `from mhalint.parse.lazy import cst`: a plain `import libcst` statement would load it at once.

The stand-in is a plain module whose module-level `__getattr__` (PEP 562) imports the real one with an ordinary
import, then copies the real module's attributes into itself, so that every later access is a plain look-up.
An import interrupted half-way (Ctrl-C, SIGTERM) is undone: the modules it had added are taken out of
`sys.modules` (a half-initialised libcst there would be used as it is, `module 'libcst' has no attribute
'parse_module'`) and the next access imports again. importlib's LazyLoader was not used for this reason: it
executes the module into the object that everyone already holds, and after an interrupt that object stays half
filled.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING


def defer(name: str) -> ModuleType:
    """`name`, as it is if already imported, otherwise a stand-in that imports it on first attribute access."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    if importlib.util.find_spec(name) is None:
        return importlib.import_module(name)  # raises the usual ModuleNotFoundError
    stand_in = ModuleType(name)

    def load(attribute: str):
        real = import_whole(name)
        stand_in.__dict__.update(real.__dict__)  # this `load` stays only where the real module has no __getattr__
        return getattr(real, attribute)

    stand_in.__getattr__ = load
    return stand_in


def import_whole(name: str) -> ModuleType:
    """`import name`, or, if that is interrupted or fails, no trace of it: the modules of the package `name` that it
    added to sys.modules are removed (a module imported half-way, or a complete one holding a half-imported one
    through a circular import), and the exception is raised again."""
    before = set(sys.modules)
    try:
        return importlib.import_module(name)
    except BaseException:
        for added in set(sys.modules) - before:
            if added == name or added.startswith(name + "."):
                sys.modules.pop(added, None)
        raise


if TYPE_CHECKING:
    import libcst as cst
else:
    cst = defer("libcst")
