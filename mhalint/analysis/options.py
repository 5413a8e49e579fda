"""Command-line options: the values `args.x` can take, read from the file's `parser.add_argument(...)` calls.

A flag (`action="store_true"`) gives two values, one per run (without it, with it); an option with `default=`
gives its default, the value when the command line does not set it; `parser.set_defaults(x=...)` replaces it.
An option whose default is not a plain value, or an `args.x` no option of the file defines, is unknown.
"""

from __future__ import annotations

from mhalint.analysis import values as _values
from mhalint.analysis.sites import place
from mhalint.context import ModuleContext
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal

_FLAGS = {"store_true": (False, True), "store_false": (True, False)}


def option_values(ctx: ModuleContext, name: str, depth: int) -> list | None:
    """The `Reach`es of the option whose destination is `name`; None when no option of the file gives it, or
    several do, or its default is unknown."""
    options = _options(ctx).get(name, [])
    if len(options) != 1:
        return None
    call, written = options[0]
    line = place(ctx, call)
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    action = keywords.get("action")
    if isinstance(action, cst.SimpleString) and literal(action) in _FLAGS:
        without, given = _FLAGS[literal(action)]
        if "default" in keywords or _set_default(ctx, name) is not None:  # `default=True` beside store_true
            default = _values.resolve(ctx, _set_default(ctx, name) or keywords["default"], ctx.root, depth + 1)
            if default is None:
                return None
            without = default.value
            if without == given and type(without) is type(given):
                return [_values.Reach(_values.Value(given, (f"`{written}` is {literal(action)} with "
                                                            f"default {given!r} ({line}): {given} in every run",)))]
        return [_values.Reach(_values.Value(value, (f"`{written}` is {literal(action)} ({line}): "
                                                    f"{value} {when}",)), line, f"a run {when}")
                for value, when in ((without, f"without {written}"), (given, f"with {written}"))]
    default = _set_default(ctx, name) or keywords.get("default")
    if default is None or action is not None:
        return None
    found = _values.resolve(ctx, default, ctx.root, depth + 1)
    if found is None:
        return None
    return [_values.Reach(_values.Value(found.value, (
        f"`{written}` defaults to {ctx.code(default)} at {place(ctx, default)} (unless the command line sets "
        "it)",) + found.trail))]


def _options(ctx: ModuleContext) -> dict[str, list[tuple[cst.Call, str]]]:
    """Destination -> (the add_argument call, its first option string) for every option the file defines."""
    memo = ctx.memo.get("options")
    if memo is None:
        memo = ctx.memo["options"] = {}
        for call, _ in ctx.calls_named("add_argument"):
            strings = [literal(arg.value) for arg in call.args if arg.keyword is None
                       and isinstance(arg.value, cst.SimpleString) and isinstance(literal(arg.value), str)]
            dest = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "dest"),
                        None)
            if isinstance(dest, cst.SimpleString) and isinstance(literal(dest), str):
                name = literal(dest)
            else:
                longs = [s for s in strings if s.startswith("--")]
                chosen = longs[0] if longs else strings[0] if strings else ""
                name = chosen.lstrip("-").replace("-", "_")
            if name and strings:
                memo.setdefault(name, []).append((call, strings[0]))
    return memo


def _set_default(ctx: ModuleContext, name: str) -> cst.BaseExpression | None:
    """The value `parser.set_defaults(name=...)` gives, when the file calls it once for that name."""
    found = [arg.value for call, _ in ctx.calls_named("set_defaults") for arg in call.args
             if arg.keyword is not None and arg.keyword.value == name]
    return found[0] if len(found) == 1 else None
