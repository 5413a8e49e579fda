"""Run programs with torch, each under mhalint's runtime guard, and print what happened as JSON.

tests/test_fixes_execute.py runs this once for all its programs (torch is imported once). Standard input: a JSON
list of {"prelude": code, "program": code, "call": bool}. Each program runs as `__main__` in a fresh namespace,
after its prelude (the free names it takes, as small synthetic tensors), with torch's seed set. With `call`, every
function and nn.Module class the program defines at its top level is then called with the namespace's values of
its parameters, by name (a module is built from its `__init__` parameters, put in eval mode and called with its
`forward` parameters): a fragment's dangerous call site runs. Standard output: a JSON list of {"error": the
exception or null, "guard": the codes the runtime guard reported, "stdout": what the program printed}.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import json
import sys
import warnings


class MissingInput(Exception):
    """A parameter the prelude does not define and that has no default."""


def _arguments(function, namespace: dict) -> dict:
    arguments = {}
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name in namespace:
            arguments[name] = namespace[name]
        elif parameter.default is parameter.empty:
            raise MissingInput(f"`{function.__qualname__}` takes `{name}`, which the prelude does not define")
    return arguments


def _call_everything(program: str, namespace: dict, torch) -> None:
    for node in ast.parse(program).body:
        value = namespace.get(getattr(node, "name", None))
        if isinstance(node, ast.FunctionDef):
            value(**_arguments(value, namespace))
        elif isinstance(node, ast.ClassDef) and isinstance(value, type) and issubclass(value, torch.nn.Module):
            module = value(**_arguments(value, namespace)).eval()
            module(**_arguments(module.forward, namespace))


def run(case: dict, torch, mhalint) -> dict:
    namespace = {"__name__": "__main__"}
    printed = io.StringIO()
    error = None
    torch.manual_seed(0)
    with mhalint.guard() as guard, contextlib.redirect_stdout(printed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(compile(case["prelude"], "<prelude>", "exec"), namespace)  # noqa: S102 (our own examples)
            exec(compile(case["program"], "<program>", "exec"), namespace)  # noqa: S102
            if case["call"]:
                _call_everything(case["program"], namespace, torch)
        except Exception as exception:  # what the test reports: the fixed code must run
            error = f"{type(exception).__name__}: {exception}"
    return {"error": error, "guard": sorted({entry.report.code for entry in guard.reports()}),
            "stdout": printed.getvalue()}


def main() -> None:
    import torch

    import mhalint

    torch.set_num_threads(1)  # the machine is shared; the programs are small
    cases = json.load(sys.stdin)
    json.dump([run(case, torch, mhalint) for case in cases], sys.stdout)


if __name__ == "__main__":
    main()
