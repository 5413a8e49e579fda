"""Odd but real input never hangs or crashes a run (issue 16, item 4), through `python -m mhalint check`.

Each test runs the real command line in a subprocess with a timeout (a FIFO used to block it forever, a link to
/dev/zero to read until memory ran out), on a tree that also holds `good.py` with a real finding: the odd file
gets one `MHA901` line with the reason, good.py is still checked, the exit code is 1 and nothing else is printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote_to_bytes

import pytest
from test_bad_input import GOOD, GOOD_AT, Run, assert_sound, mhalint_process, tree_with

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, devices and byte file names are POSIX")

SOURCE = "import torch.nn as nn\n\nattn = nn.MultiheadAttention(64, 8)\n"


def run(cwd: Path, *args: str) -> Run:
    return mhalint_process(cwd, "--no-cache", *args, timeout=300)


def assert_one_line(run: Run, path: str, message: str, files_checked: int = 1) -> None:
    """`path` has one MHA901 line; `files_checked` counts good.py, and the odd file where it was read."""
    assert_sound(run)
    row = run.only(path)
    assert (row.line, row.column, row.code, row.message) == (1, 1, "MHA901", f"could not read this file: {message}")
    assert run.files_checked == files_checked


@pytest.mark.parametrize("how", ["named", "walked"])
def test_fifo_is_not_a_regular_file(tmp_path: Path, how: str):
    tree_with(tmp_path)
    (tmp_path / "pkg").mkdir()
    os.mkfifo(tmp_path / "pkg" / "pipe.py")  # nothing ever writes to it: opening it for reading would block
    outcome = run(tmp_path, *(["good.py", "pkg/pipe.py"] if how == "named" else []))
    assert_one_line(outcome, "pkg/pipe.py", "not a regular file (a FIFO)")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("how", ["named", "walked"])
def test_link_to_a_device_is_judged_by_its_target(tmp_path: Path, how: str):
    tree_with(tmp_path)
    (tmp_path / "zero.py").symlink_to("/dev/zero")  # endless: reading it ran to a MemoryError
    (tmp_path / "linked.py").symlink_to("good.py")  # a link to a regular file is read as that file
    outcome = run(tmp_path, *(["good.py", "zero.py", "linked.py"] if how == "named" else []))
    assert_sound(outcome)
    row = outcome.only("zero.py")
    assert (row.code, row.message) == ("MHA901", "could not read this file: not a regular file (a character device)")
    assert outcome.only("linked.py").code == "MHA001"
    assert outcome.files_checked == 2


@pytest.mark.parametrize("codec, name", [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")])
def test_utf16_and_utf32_files_are_reported_as_python_refuses_them(tmp_path: Path, codec: str, name: str):
    raw = ("\ufeff" if codec.endswith("-be") else "").encode(codec) + SOURCE.encode(codec)
    with pytest.raises(SyntaxError):  # CPython does not read such a file as source
        compile(raw, "wide.py", "exec")
    tree_with(tmp_path, **{"wide.py": raw})
    outcome = run(tmp_path)
    message = (f"cannot decode the source: the file is {name} (it starts with a {name} byte-order mark), which "
               f"Python does not read as source; save it as UTF-8")
    assert_one_line(outcome, "wide.py", message, files_checked=2)  # read, and refused


def test_declared_encoding_that_is_not_ascii_compatible_is_refused_as_python_refuses_it(tmp_path: Path):
    raw = f"# -*- coding: utf-16 -*-\n{SOURCE}".encode()
    tree_with(tmp_path, **{"declared.py": raw})
    python = subprocess.run([sys.executable, "declared.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "SyntaxError: encoding problem: utf-16" in python.stderr  # how Python refuses to run it
    outcome = run(tmp_path)
    row = outcome.only("declared.py")
    assert (row.code, row.message) == ("MHA901", "could not read this file: cannot decode the source: encoding "
                                                 "problem: utf-16 (declared, but not a superset of ASCII, so "
                                                 "Python refuses it as a source encoding)")
    assert_sound(outcome)


def test_null_bytes_are_mha901_not_python_source(tmp_path: Path):
    tree_with(tmp_path, **{"binary.py": SOURCE.replace("\n\n", "\n\0\n").encode()})
    outcome = run(tmp_path)
    assert_sound(outcome)
    row = outcome.only("binary.py")
    assert (row.line, row.column, row.code, row.message) == (
        1, 1, "MHA901", "could not read this file: not Python source: null bytes")


def test_sarif_for_a_file_name_that_is_not_utf8(tmp_path: Path):
    name = b"b\xe9ad.py"  # latin-1 bytes: not valid UTF-8
    try:
        (tmp_path / os.fsdecode(name)).write_bytes(GOOD)
    except (OSError, UnicodeError):
        pytest.skip("this file system does not take a name that is not UTF-8")
    completed = subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", "--output-format", "sarif",
                                "."], cwd=tmp_path, capture_output=True, timeout=300)
    assert completed.returncode == 1, completed.stderr
    assert completed.stderr == b""
    (result,) = json.loads(completed.stdout)["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "b%E9ad.py", "uriBaseId": "%SRCROOT%"}
    assert unquote_to_bytes(location["uri"]) == name  # a SARIF viewer gets the file's own bytes back
    assert (result["ruleId"], result["locations"][0]["physicalLocation"]["region"]["startLine"]) == (
        GOOD_AT[4], GOOD_AT[2])
