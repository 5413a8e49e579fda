"""libcst's parse of source that CPython has accepted, without libcst's check of every node it builds.

The check is a third of a parse, and nodes built by libcst's own parser from source CPython accepts need none
(libcst says as much in a PERF note in CSTNode.__post_init__). Both the file being checked and the other files of
the project that an analysis reads go through CPython's parser first, which also refuses nesting that would
overflow the native stack of libcst's parser.
"""

from __future__ import annotations

import contextlib

from mhalint.parse.lazy import cst


@contextlib.contextmanager
def unvalidated_nodes():
    """Within it, libcst's parser builds nodes unchecked. Nodes built anywhere else, fixes included, are still
    checked: the check is put back as soon as the parse ends, even when another thread's parse overlapped this
    one."""
    node_class = cst.CSTNode
    current = node_class.__dict__.get("__post_init__")
    if current is None:  # a libcst that validates elsewhere: nothing to skip
        yield
        return
    if current is not _skip_validation:
        _VALIDATION["post_init"] = current
    node_class.__post_init__ = _skip_validation
    try:
        yield
    finally:
        node_class.__post_init__ = _VALIDATION["post_init"]


class BodyParseError(BaseException):
    """libcst refused a function body parsed on its own (mhalint.parse.lazy_bodies), after the rest of the file: the
    check must start again with whole parses, where the file's parse fails as it would have at first. A
    BaseException, so that the containment of a rule's errors (MHA902) does not take it for a bug of the rule."""


def _skip_validation(node) -> None:
    return None


_VALIDATION: dict = {}  # libcst's own CSTNode.__post_init__, kept while it is swapped out
