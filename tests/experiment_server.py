"""Runs docs/experiments/ scripts for the tests, importing torch once instead of once per script.

`python tests/experiment_server.py DIR` imports DIR/_helpers.py (which imports torch), then reads one script
name per line on stdin and answers each with one JSON line {"returncode", "stdout", "stderr"}. Each script runs in
a fresh fork of that process, as `python DIR/NAME.py` would run it: its folder first on sys.path, `__main__` as
its module name, its own stdout and stderr. Importing torch takes about 3 s of the 3-7 s a script takes, and the
fork shares it. The parent runs no torch operation, so no thread pool exists when it forks.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import tempfile
import traceback

LIMIT_SECONDS = 600  # a script that hangs is killed by SIGALRM (returncode -14) instead of hanging the suite


def run_in_fork(path: str) -> dict:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 1
            try:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the requests are the parent's, not the script's
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                signal.alarm(LIMIT_SECONDS)
                sys.argv = [path]
                runpy.run_path(path, run_name="__main__")
                code = 0
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        texts = []
        for handle in (out, err):
            handle.seek(0)
            texts.append(handle.read().decode("utf-8", "replace"))
    return {"returncode": os.waitstatus_to_exitcode(status), "stdout": texts[0], "stderr": texts[1]}


def main(directory: str) -> None:
    sys.path.insert(0, directory)
    import _helpers  # noqa: F401  (torch, imported once for every fork)

    for line in sys.stdin:
        answer = run_in_fork(os.path.join(directory, line.strip()))
        sys.__stdout__.write(json.dumps(answer) + "\n")
        sys.__stdout__.flush()


if __name__ == "__main__":
    main(sys.argv[1])
