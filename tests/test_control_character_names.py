"""A file name with control characters (a line break, an escape, a tab, DEL, C1 controls, an undecodable byte in the
C1 range) cannot forge a report's lines or send the terminal an escape sequence: every text format, the messages on
standard error and `--diff`'s headers print it quoted and escaped as git does (`"a\\nb.py"`); json, json-lines and
SARIF escape it as JSON, and SARIF's URI is percent-encoded (issue 34, item 10). Through the real command line, in
this process (`invoke`), on files with such names on disk."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote_to_bytes

import pytest
from invoke import invoke
from test_fix_safety import BUG

# name on disk (as Python sees it) -> how mhalint prints it
NAMES = {
    "a\nb.py": '"a\\nb.py"',
    "a\rb.py": '"a\\rb.py"',
    "a\tb.py": '"a\\tb.py"',
    "a\x1b[2Jb.py": '"a\\033[2Jb.py"',
    "a\x07b.py": '"a\\ab.py"',
    "a\x7fb.py": '"a\\177b.py"',
    "a\x85b.py": '"a\\302\\205b.py"',  # C1 NEL, written as UTF-8: its bytes, as git writes them
    "a\x9b31mb.py": '"a\\302\\23331mb.py"',  # C1 CSI
    os.fsdecode(b"a\x9b31mb.py"): '"a\\23331mb.py"',  # the CSI byte alone: not UTF-8, a C1 control in 8-bit terminals
    'q"\\\x1b.py': '"q\\"\\\\\\033.py"',  # quotes and backslashes are escaped too once a name is quoted
}
ORDINARY = "modèle_注意.py"  # non-ASCII letters stay readable, and a name without control characters is unchanged
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\udc80-\udc9f]")  # but the line break; \udc9b: the byte 0x9b


@pytest.fixture(params=list(NAMES), ids=[repr(name) for name in NAMES])
def named(request, tmp_path: Path) -> tuple[Path, str, str]:
    """A directory holding `ORDINARY` and a file with the control-character name; both have an MHA007 finding."""
    name = request.param
    try:
        (tmp_path / name).write_text(BUG)
    except (OSError, UnicodeEncodeError):
        pytest.skip(f"the file system refuses the name {name!r}")
    (tmp_path / ORDINARY).write_text(BUG)
    return tmp_path, name, NAMES[name]


def text(output: bytes) -> str:
    """`output` decoded, asserting that it holds no control character but the line break."""
    decoded = output.decode("utf-8", "surrogateescape")
    assert not CONTROL.search(decoded), decoded
    return decoded


@pytest.mark.parametrize("output_format", ["concise", "full"])
def test_human_formats_quote_the_name(named, output_format):
    directory, _, shown = named
    result = invoke("check", "--no-cache", "--output-format", output_format, ".", cwd=directory)
    out = text(result.stdout_bytes)
    if output_format == "concise":
        lines = out.splitlines()
        assert len(lines) == 3 and lines[2].startswith("Found 2 findings (2 files checked)."), lines
        assert sorted(line.split(": MHA007 [warning] [*] ")[0] for line in lines[:2]) == sorted(
            [f"{shown}:7:12", f"{ORDINARY}:7:12"])
    else:
        assert f" --> {shown}:7:12\n" in out and f" --> {ORDINARY}:7:12\n" in out
        assert out.count("MHA007 [warning]") == 2


def test_github_annotations_quote_the_name_and_escape_it_for_the_runner(named):
    directory, name, shown = named
    result = invoke("check", "--no-cache", "--output-format", "github", ".", cwd=directory)
    lines = text(result.stdout_bytes).splitlines()
    assert len(lines) == 2 and all(line.startswith("::warning file=") for line in lines), lines
    expected = shown.replace("%", "%25").replace(":", "%3A").replace(",", "%2C")
    assert f"::warning file={expected},line=7,col=12," in lines[0] + lines[1]


def test_structured_formats_escape_the_name_as_json_and_sarif_uris_are_percent_encoded(named):
    directory, name, _ = named
    for output_format in ("json", "json-lines"):
        out = invoke("check", "--no-cache", "--output-format", output_format, ".", cwd=directory).stdout_bytes
        text(out.replace(b"\x7f", b""))  # JSON may leave DEL as it is; a terminal shows nothing for it
        objects = json.loads(out) if output_format == "json" else [json.loads(line) for line in out.splitlines()]
        assert sorted(item["path"] for item in objects) == sorted([name, ORDINARY])
    sarif = invoke("check", "--no-cache", "--output-format", "sarif", ".", cwd=directory).stdout_bytes
    text(sarif.replace(b"\x7f", b""))
    uris = [result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for result in json.loads(sarif)["runs"][0]["results"]]
    assert all(re.fullmatch(r"[A-Za-z0-9\-._~%!$&'()*+,;=:@/]+", uri) for uri in uris), uris  # RFC 3986 only
    assert sorted(unquote_to_bytes(uri) for uri in uris) == sorted([os.fsencode(name), os.fsencode(ORDINARY)])


def test_statistics_show_files_and_show_fixes(named):
    directory, _, shown = named
    statistics = invoke("check", "--no-cache", "--statistics", ".", cwd=directory).stdout  # rows by code: no names
    assert statistics.startswith("2\tMHA007\t[*] weights-discarded\nFound 2 findings"), statistics
    assert sorted(text(invoke("check", "--show-files", ".", cwd=directory).stdout_bytes).splitlines()) == sorted(
        [shown, ORDINARY])
    fixed = text(invoke("check", "--no-cache", "--fix", "--show-fixes", ".", cwd=directory).stdout_bytes)
    assert f"- {shown}:\n    1 × MHA007 (weights-discarded)\n" in fixed
    assert f"- {ORDINARY}:\n    1 × MHA007 (weights-discarded)\n" in fixed


def test_diff_headers_quote_the_name_and_patch_reads_them(named):
    directory, name, shown = named
    result = invoke("check", "--no-cache", "--diff", ".", cwd=directory)
    out = text(result.stdout_bytes)
    assert f"--- {shown}\n+++ {shown}\n" in out and f"--- {ORDINARY}\n+++ {ORDINARY}\n" in out
    if shutil.which("patch") is not None:  # GNU patch decodes git's quoting
        import subprocess

        completed = subprocess.run(["patch", "-p0"], input=result.stdout_bytes, cwd=directory, capture_output=True)
        assert completed.returncode == 0, completed.stdout + completed.stderr
        assert (directory / name).read_text() == (directory / ORDINARY).read_text() != BUG


def test_messages_on_standard_error_quote_the_name(named):
    """`cannot fix` and `cannot add noqa directives` name the file (here a read-only one); the note on a file that
    cannot be checked too."""
    directory, name, shown = named
    (directory / name).chmod(0o444)
    result = invoke("check", "--no-cache", "--fix", ".", cwd=directory)
    assert text(result.stderr_bytes).startswith(f"mhalint: error: cannot fix {shown}: the file is read-only")
    result = invoke("check", "--no-cache", "--add-noqa", ".", cwd=directory)
    assert text(result.stderr_bytes).startswith(f"mhalint: error: cannot add noqa directives to {shown}: ")
    (directory / name).unlink()
    os.mkfifo(directory / name)  # not a file mhalint reads
    result = invoke("check", "--show-files", ".", cwd=directory)
    assert f"mhalint: warning: {shown}: cannot be checked: " in text(result.stderr_bytes)


def test_a_configuration_file_under_such_a_name_is_named_quoted(tmp_path: Path):
    """An error on standard error is printed quoted as a whole when it holds a control character (here the
    configuration file's directory); `--verbose` names the file read."""
    directory = tmp_path / "a\x1b[2Jb"
    directory.mkdir()
    (directory / "mhalint.toml").write_text("select = 1\n")
    result = invoke("check", "--no-cache", str(directory), cwd=tmp_path)
    assert result.exit_code == 2
    assert text(result.stderr_bytes) == (f'mhalint: error: "{tmp_path.resolve()}/a\\033[2Jb/mhalint.toml: `select` '
                                         f'must be a list of strings"\n')
    (directory / "mhalint.toml").write_text("")
    result = invoke("check", "--no-cache", "--verbose", str(directory), cwd=tmp_path)
    assert text(result.stderr_bytes).startswith(
        f'mhalint: configuration: "{tmp_path.resolve()}/a\\033[2Jb/mhalint.toml" (top-level keys)\n')


def test_clean_names_the_cache_quoted(tmp_path: Path):
    directory = tmp_path / "a\x1b[2Jb"
    directory.mkdir()
    out = text(invoke("clean", cwd=directory, env={"MHALINT_CACHE_DIR": ""}).stdout_bytes)
    assert out.startswith('No cache at "') and "/a\\033[2Jb/" in out, out
