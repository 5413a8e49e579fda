"""The flake8 plugin, through the real `flake8` command: same findings, same line:col as `mhalint check`."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from wrapped import CALLER, ENCODER

import mhalint
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

pytest.importorskip("flake8")

BAD = textwrap.dedent("""\
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 8)
    """)
GOOD = BAD.replace("nn.MultiheadAttention(64, 8)", "nn.MultiheadAttention(64, 8, batch_first=True)")
# Correct, but relying on the default: an info finding, hidden unless asked for.
INFO = textwrap.dedent("""\
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 8)

        def forward(self, x):
            B, T, C = x.shape
            x = x.permute(1, 0, 2)
            return self.attn(x, x, x, need_weights=False)[0]
    """)
LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>MHA\d+) \[(?P<severity>\w+)\] (?P<text>.+)$")


def flake8(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    # --isolated: no user or project configuration can change what is selected.
    return subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "MHA", *args], cwd=cwd,
                          input=stdin, capture_output=True, text=True, timeout=120)


def parsed(output: str) -> list[dict[str, str]]:
    lines = [line for line in output.splitlines() if line.strip()]
    matches = [LINE.match(line) for line in lines]
    assert all(matches), output
    return [match.groupdict() for match in matches]


def mhalint_findings(source: str, path: str = "bad.py"):
    return Checker(list(load_rules().values())).check_source(source.encode(), path)


def test_plugin_is_registered():
    result = subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True)
    assert f"mhalint: {mhalint.__version__}" in result.stdout


def test_bad_file_is_reported_at_mhalints_line_and_column(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    result = flake8("bad.py", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    (reported,) = parsed(result.stdout)
    (finding,) = mhalint_findings(BAD)
    assert reported["path"] == "bad.py"
    assert reported["code"] == finding.code == "MHA001"
    assert (int(reported["line"]), int(reported["col"])) == (finding.line, finding.column) == (7, 21)
    assert reported["severity"] == str(finding.severity)
    assert reported["text"] == finding.message


def test_output_is_the_same_line_mhalint_check_prints(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    flake8_line = flake8("bad.py", cwd=tmp_path).stdout.splitlines()[0]
    check = subprocess.run([sys.executable, "-m", "mhalint", "check", "bad.py"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert check.stdout.splitlines()[0] == flake8_line


def test_good_file_passes(tmp_path):
    (tmp_path / "good.py").write_text(GOOD)
    result = flake8("good.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, ""), result.stderr


def test_noqa_for_the_code_is_honoured(tmp_path):
    (tmp_path / "bad.py").write_text(BAD.replace("(64, 8)", "(64, 8)  # noqa: MHA001"))
    result = flake8("bad.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, ""), result.stderr


def test_noqa_for_another_code_is_not(tmp_path):
    (tmp_path / "bad.py").write_text(BAD.replace("(64, 8)", "(64, 8)  # noqa: E501"))
    result = flake8("bad.py", cwd=tmp_path)
    assert result.returncode == 1
    assert [r["code"] for r in parsed(result.stdout)] == ["MHA001"]


def test_flake8_ignore_and_select_apply_to_mha_codes(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    assert flake8("--extend-ignore", "MHA001", "bad.py", cwd=tmp_path).returncode == 0
    assert flake8("--per-file-ignores", "bad.py:MHA", "bad.py", cwd=tmp_path).returncode == 0


def test_stdin_with_display_name(tmp_path):
    result = flake8("--stdin-display-name", "pkg/model.py", "-", cwd=tmp_path, stdin=BAD)
    assert result.returncode == 1, result.stderr
    (reported,) = parsed(result.stdout)
    assert (reported["path"], reported["line"], reported["col"], reported["code"]) == (
        "pkg/model.py", "7", "21", "MHA001")
    assert flake8("-", cwd=tmp_path, stdin=GOOD).returncode == 0


def test_info_findings_hidden_unless_asked_for(tmp_path):
    (tmp_path / "info.py").write_text(INFO)
    (finding,) = mhalint_findings(INFO, "info.py")
    assert (finding.code, str(finding.severity)) == ("MHA001", "info")
    assert flake8("info.py", cwd=tmp_path).returncode == 0
    result = flake8("--mhalint-min-severity", "info", "info.py", cwd=tmp_path)
    assert result.returncode == 1
    (reported,) = parsed(result.stdout)
    assert (reported["code"], reported["severity"]) == ("MHA001", "info")
    (tmp_path / "setup.cfg").write_text("[flake8]\nmhalint-min-severity = info\n")
    no_isolation = subprocess.run([sys.executable, "-m", "flake8", "--select", "MHA", "info.py"], cwd=tmp_path,
                                  capture_output=True, text=True)
    assert no_isolation.returncode == 1, no_isolation.stderr


def test_declared_encoding_keeps_columns(tmp_path):
    # A latin-1 file with a non-ASCII character before the finding on its line: columns count characters.
    source = "# -*- coding: latin-1 -*-\n" + BAD.replace("self.attn = ", "self.attn = ('é', ")[:-1] + ")\n"
    (tmp_path / "latin.py").write_bytes(source.encode("latin-1"))
    result = flake8("latin.py", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    (reported,) = parsed(result.stdout)
    (finding,) = Checker(list(load_rules().values())).check_source(source.encode("latin-1"), "latin.py")
    assert (int(reported["line"]), int(reported["col"])) == (finding.line, finding.column) == (8, 27)


def test_several_files_in_parallel_jobs(tmp_path):
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(BAD)
    (tmp_path / "ok.py").write_text(GOOD)
    result = flake8("--jobs", "2", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert sorted(Path(r["path"]).name for r in parsed(result.stdout)) == ["a.py", "b.py", "c.py"]


def test_syntax_error_is_flake8s_e999_only(tmp_path):
    (tmp_path / "broken.py").write_text(BAD + "def (:\n")
    result = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "MHA,E999", "broken.py"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    assert "E999" in result.stdout and "MHA" not in result.stdout


# ---- mhalint's own configuration (issue 16, item 12) --------------------------------------------------------------
# BAD and INFO both have MHA001 at 7:21; INFO's is an info finding, and an odd head count gives MHA004 (info) too.
ODD = BAD.replace("(64, 8)", "(60, 5)")  # MHA001 warning and MHA004 info at 7:21


def reported(result: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    return sorted((Path(r["path"]).as_posix().removeprefix("./"), r["code"]) for r in parsed(result.stdout))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("model.py", "gen/made.py", "tests/test_model.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(ODD)
    return tmp_path


def test_plugin_reads_ignore_exclude_and_per_file_ignores_of_tool_mhalint(project: Path):
    assert reported(flake8(".", cwd=project)) == [("gen/made.py", "MHA001"), ("model.py", "MHA001"),
                                                  ("tests/test_model.py", "MHA001")]
    (project / "pyproject.toml").write_text(
        '[tool.mhalint]\nmin-severity = "info"\nignore = ["MHA001"]\nextend-exclude = ["gen/"]\n'
        '[tool.mhalint.per-file-ignores]\n"tests/*" = ["MHA004"]\n')
    result = flake8(".", cwd=project)
    assert result.returncode == 1, result.stderr
    assert reported(result) == [("model.py", "MHA004")]
    assert reported(flake8("gen/made.py", "tests/test_model.py", cwd=project)) == []  # named files too
    check = subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", "--force-exclude", "model.py",
                            "gen/made.py", "tests/test_model.py"], cwd=project, capture_output=True, text=True)
    assert [line.split(" [")[0] for line in check.stdout.splitlines()[:-1]] == ["model.py:7:21: MHA004"]


def test_plugin_reads_mhalint_toml_found_from_the_files_folder(project: Path):
    (project / "tests" / "mhalint.toml").write_text('select = ["MHA004"]\nmin-severity = "info"\n')
    assert reported(flake8(".", cwd=project)) == [("gen/made.py", "MHA001"), ("model.py", "MHA001"),
                                                  ("tests/test_model.py", "MHA004")]


def test_flake8s_own_options_win_where_they_overlap(project: Path):
    (project / "pyproject.toml").write_text('[tool.mhalint]\nignore = ["MHA004"]\nmin-severity = "error"\n')
    assert reported(flake8(".", cwd=project)) == []
    # --mhalint-min-severity replaces min-severity; a code flake8 selects by name beats mhalint's ignore, as
    # `mhalint check --select MHA004` does.
    result = flake8("--mhalint-min-severity", "info", ".", cwd=project)
    assert {code for _, code in reported(result)} == {"MHA001"}
    result = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "MHA004",
                             "--mhalint-min-severity", "info", "model.py"], cwd=project, capture_output=True, text=True)
    assert reported(result) == [("model.py", "MHA004")], result.stderr
    # flake8's ignore and per-file-ignores still hide what mhalint reports
    assert reported(flake8("--mhalint-min-severity", "info", "--extend-ignore", "MHA001", ".", cwd=project)) == []


def test_a_broken_configuration_is_said_once_and_the_defaults_apply(project: Path):
    (project / "pyproject.toml").write_text("[tool.mhalint]\nselct = []\n")
    result = flake8("--jobs", "1", "model.py", "tests/test_model.py", cwd=project)
    assert reported(result) == [("model.py", "MHA001"), ("tests/test_model.py", "MHA001")]
    assert result.stderr.count("mhalint: error: ") == 1, result.stderr  # once per flake8 process
    assert "unknown key `selct` in [tool.mhalint]" in result.stderr and "Traceback" not in result.stderr


def test_a_file_is_judged_by_the_callers_in_the_rest_of_its_project(tmp_path):
    """flake8 hands the plugin one file at a time; the analysis still sees the other files of the project."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(ENCODER)
    (tmp_path / "train.py").write_text(CALLER.format(module="model", unpack="B, T, C"))
    [reported] = parsed(flake8("model.py", cwd=tmp_path).stdout)
    assert reported["severity"] == "error" and "train.py:4" in reported["text"]
    (tmp_path / "pyproject.toml").unlink()  # no project root: the file alone
    [reported] = parsed(flake8("model.py", cwd=tmp_path).stdout)
    assert reported["severity"] == "warning"
