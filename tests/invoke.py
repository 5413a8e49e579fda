"""`invoke(*args, cwd=...)`: the `mhalint` command line in this process, through click's CliRunner.

A subprocess costs about half a second (Python, click and libcst start again); a test that is about what the
command does, not about the process it runs in, calls this instead and runs in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from click.testing import CliRunner, Result

from mhalint.cli.main import main


def invoke(*args: str, cwd: Path | None = None, input: str | None = None, env: dict | None = None) -> Result:
    """The result of `mhalint ARGS` run in `cwd` (default: the current directory), stdout and stderr apart. An
    exception that escapes the command is raised here: CliRunner would turn it into exit code 1, which reads as
    "findings" to a test."""
    with _working_directory(cwd):
        result = CliRunner().invoke(main, list(args), input=input, env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@contextlib.contextmanager
def _working_directory(path: Path | None):
    """contextlib.chdir, which Python 3.10 lacks; None stays where it is."""
    old = os.getcwd()
    if path is not None:
        os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)
