"""`from mhalint.lazy import cst`, as rules written before `mhalint.api` import libcst: the same lazy module as
`mhalint.api.cst` (mhalint.parse.lazy), kept so that they go on working."""

from mhalint.parse.lazy import cst

__all__ = ["cst"]
