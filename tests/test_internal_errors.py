"""An exception inside one rule on one file is contained (issue 8, item 2).

A real plugin (a module plus a .dist-info on PYTHONPATH, as in test_plugins.py) whose rule raises on purpose:
the run reports MHA902 for that file and rule, every other rule's findings on that file and every finding on
the other files are still reported, the exit code is 2, and the traceback is printed on stderr only with
`--show-traceback`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from test_plugins import install_plugin

PLUGIN = textwrap.dedent('''
    import libcst as cst
    from mhalint.rule import Rule

    class Boom(Rule):
        """
        ## What it does
        Raises on purpose (a test plugin): in visit_Call on `explode()`, in leave_Call on `explode_on_leave()`,
        with unbounded recursion on `recurse()`; otherwise flags `softmax` calls, to show it still works.
        """
        code = "BOOM001"
        name = "boom"
        summary = "A rule that fails on purpose"
        triggers = ("explode", "softmax", "recurse")

        def visit_Call(self, node: cst.Call) -> None:
            name = node.func.value if isinstance(node.func, cst.Name) else None
            if name == "explode":
                raise ZeroDivisionError("kaboom from the test plugin")
            if name == "recurse":
                def down(n):
                    return down(n + 1)
                down(0)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "softmax":
                self.report(node, "softmax seen")

        def leave_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "explode_on_leave":
                raise KeyError("leaving went wrong")

    class BoomInit(Rule):
        """
        ## What it does
        Raises while being set up for a file that mentions `init_explode`.
        """
        code = "BOOM002"
        name = "boom-init"
        summary = "A rule whose constructor fails on purpose"
        triggers = ("init_explode",)

        def __init__(self, context, emit):
            super().__init__(context, emit)
            if "init_explode" in context.module.code:
                raise LookupError("set-up failed")
''')
ENTRIES = "BOOM001 = mhalint_xyz:Boom\nBOOM002 = mhalint_xyz:BoomInit"

MHA001 = "attn = nn.MultiheadAttention(64, 8)\n"
GOOD = "import torch.nn as nn\n\n" + MHA001
# explode() on line 2 raises; MHA001 on line 3 must survive; the second explode() is not reported again (the rule
# is switched off for the rest of the file)
BAD = "import torch.nn as nn\nexplode()\n" + MHA001 + "explode()\n"
LATER = "p = scores.softmax(-1)\n"  # checked after bad.py: the plugin works again on the next file

_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]+[0-9]+) \[\w+\] (?P<message>.*)$")


def run(tmp_path: Path, *args: str, files: dict[str, str]) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    if not site.exists():
        install_plugin(site, PLUGIN, ENTRIES)
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    for name, text in files.items():
        (project / name).write_text(text)
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)


def rows(stdout: str) -> list[tuple[str, int, int, str, str]]:
    found = []
    for line in stdout.splitlines():
        match = _LINE.match(line)
        if match:
            found.append((match["path"], int(match["line"]), int(match["col"]), match["code"], match["message"]))
    return found


FILES = {"bad.py": BAD, "good.py": GOOD, "later.py": LATER}


def test_rule_exception_is_mha902_for_that_file_and_rule_and_the_run_goes_on(tmp_path: Path):
    completed = run(tmp_path, "--output-format", "concise", files=FILES)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert "Traceback" not in completed.stdout + completed.stderr
    assert completed.stderr == ""
    found = rows(completed.stdout)
    assert [(path, line, col, code) for path, line, col, code, _ in found] == [
        ("bad.py", 2, 1, "MHA902"),  # once, although explode() is called twice
        ("bad.py", 3, 8, "MHA001"),  # the other rules still checked the failing file
        ("good.py", 3, 8, "MHA001"),
        ("later.py", 1, 5, "BOOM001"),  # and the failing rule still checks the next file
    ]
    message = found[0][4]
    assert message.startswith("internal error in rule BOOM001 (ZeroDivisionError: kaboom from the test plugin)")
    assert "--show-traceback" in message


def test_show_traceback_prints_the_rule_traceback_on_stderr(tmp_path: Path):
    plain = run(tmp_path, "--output-format", "concise", files=FILES)
    detailed = run(tmp_path, "--output-format", "concise", "--show-traceback", files=FILES)
    assert detailed.returncode == 2
    assert detailed.stdout == plain.stdout  # the report itself does not change
    assert detailed.stderr.startswith("bad.py: BOOM001\nTraceback (most recent call last):")
    assert 'mhalint_xyz.py", line' in detailed.stderr and "in visit_Call" in detailed.stderr
    assert detailed.stderr.rstrip().endswith("ZeroDivisionError: kaboom from the test plugin")


def test_exception_in_a_leave_handler_is_contained_too(tmp_path: Path):
    files = {"bad.py": "import torch.nn as nn\nexplode_on_leave()\n" + MHA001, "good.py": GOOD}
    completed = run(tmp_path, "--output-format", "concise", files=files)
    assert completed.returncode == 2
    assert "Traceback" not in completed.stdout + completed.stderr
    found = [(path, line, code) for path, line, _, code, _ in rows(completed.stdout)]
    assert found == [("bad.py", 2, "MHA902"), ("bad.py", 3, "MHA001"), ("good.py", 3, "MHA001")]
    assert "KeyError: 'leaving went wrong'" in rows(completed.stdout)[0][4]


def test_internal_error_exits_2_even_with_exit_zero_and_in_json(tmp_path: Path):
    completed = run(tmp_path, "--output-format", "json", "--exit-zero", files=FILES)
    assert completed.returncode == 2
    assert completed.stderr == ""
    findings = json.loads(completed.stdout)
    assert [(f["path"], f["code"]) for f in findings] == [("bad.py", "MHA902"), ("bad.py", "MHA001"),
                                                        ("good.py", "MHA001"), ("later.py", "BOOM001")]
    assert findings[0]["severity"] == "error" and findings[0]["name"] == "internal-error"


def test_internal_errors_in_worker_processes_are_contained(tmp_path: Path):
    """From 8 files to parse the engine uses worker processes: failures must come back from them the same way."""
    files = {f"bad{i}.py": BAD for i in range(6)} | {f"good{i}.py": GOOD for i in range(6)}
    serial = run(tmp_path, "--output-format", "concise", "--jobs", "1", "--show-traceback", files=files)
    parallel = run(tmp_path, "--output-format", "concise", "--jobs", "2", "--show-traceback", files=files)
    assert serial.returncode == parallel.returncode == 2
    assert parallel.stdout == serial.stdout
    assert parallel.stderr == serial.stderr
    assert [code for *_, code, _ in rows(serial.stdout)].count("MHA902") == 6
    assert serial.stderr.count("Traceback (most recent call last):") == 6


def test_recursion_error_inside_a_rule_is_an_internal_error(tmp_path: Path):
    files = {"bad.py": "import torch.nn as nn\nrecurse()\n" + MHA001, "good.py": GOOD}
    completed = run(tmp_path, "--output-format", "concise", files=files)
    assert "Traceback" not in completed.stdout + completed.stderr
    found = [(path, line, code) for path, line, _, code, _ in rows(completed.stdout)]
    assert found == [("bad.py", 2, "MHA902"), ("bad.py", 3, "MHA001"), ("good.py", 3, "MHA001")]
    assert completed.returncode == 2


def test_exception_in_rule_setup_is_an_internal_error(tmp_path: Path):
    files = {"bad.py": "import torch.nn as nn\ninit_explode = 1\n" + MHA001, "good.py": GOOD}
    completed = run(tmp_path, "--output-format", "concise", files=files)
    assert "Traceback" not in completed.stdout + completed.stderr
    found = [(path, code) for path, _, _, code, _ in rows(completed.stdout)]
    assert ("bad.py", "MHA902") in found and ("bad.py", "MHA001") in found and ("good.py", "MHA001") in found
    assert completed.returncode == 2
