"""[tool.mhalint] in pyproject.toml, its precedence under the command line, stdin and --exit-zero."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from invoke import invoke

BAD = "import torch.nn as nn\nattn = nn.MultiheadAttention(60, 5)\n"  # MHA001 warning, MHA004 info


def mhalint(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`mhalint ARGS` in `cwd`, in this process (tests/invoke.py); the outcome as a subprocess would give it."""
    result = invoke(*args, cwd=cwd, input=stdin)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def codes(output: str) -> list[tuple[str, str]]:
    """(file name, code) of each finding line."""
    found = []
    for line in output.splitlines():
        parts = line.split(": ", 1)
        if len(parts) == 2 and parts[1][:3] == "MHA":
            found.append((Path(parts[0].split(":")[0]).name, parts[1].split()[0]))
    return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text(BAD)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(BAD)
    return tmp_path


def configure(project: Path, body: str) -> None:
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.mhalint]\n" + body)


def test_select_ignore_min_severity_and_per_file_ignores(project: Path):
    configure(project, 'select = ["MHA0"]\nignore = ["MHA001"]\nmin-severity = "info"\n'
                       '[tool.mhalint.per-file-ignores]\n"tests/*.py" = ["MHA004"]\n')
    result = mhalint("check", cwd=project)
    assert codes(result.stdout) == [("a.py", "MHA004")]
    assert result.returncode == 1


def test_nearest_file_upward_from_the_checked_path(project: Path):
    configure(project, 'ignore = ["MHA001"]\n')
    (project / "tests" / "pyproject.toml").write_text("[tool.other]\nx = 1\n")  # no [tool.mhalint]: skipped
    result = mhalint("check", str(project / "tests"), cwd=project.parent)
    assert codes(result.stdout) == [] and result.returncode == 0


def test_config_option_names_another_file(project: Path, tmp_path_factory):
    other = tmp_path_factory.mktemp("elsewhere") / "pyproject.toml"
    other.write_text('[tool.mhalint]\nselect = ["MHA004"]\nmin-severity = "info"\n')
    configure(project, 'ignore = ["MHA"]\n')
    result = mhalint("check", "--config", str(other), "a.py", cwd=project)
    assert codes(result.stdout) == [("a.py", "MHA004")]


def test_command_line_overrides_the_file(project: Path):
    configure(project, 'select = ["MHA004"]\nignore = ["MHA004"]\nmin-severity = "error"\n')
    assert codes(mhalint("check", "a.py", cwd=project).stdout) == []
    result = mhalint("check", "--select", "MHA001", "--min-severity", "warning", "a.py", cwd=project)
    assert codes(result.stdout) == [("a.py", "MHA001")]
    result = mhalint("check", "--extend-select", "MHA001", "--min-severity", "warning", "a.py", cwd=project)
    assert codes(result.stdout) == [("a.py", "MHA001")]


def test_exclude_replaces_and_extend_exclude_adds(project: Path):
    configure(project, 'extend-exclude = ["tests/"]\n')
    assert codes(mhalint("check", cwd=project).stdout) == [("a.py", "MHA001")]
    (project / "venv").mkdir()
    (project / "venv" / "lib.py").write_text(BAD)  # skipped by default, like ruff
    assert ("lib.py", "MHA001") not in codes(mhalint("check", cwd=project).stdout)
    configure(project, 'exclude = ["a.py"]\n')  # replaces the defaults: venv/ is checked now
    assert sorted(codes(mhalint("check", cwd=project).stdout)) == [("lib.py", "MHA001"), ("test_a.py", "MHA001")]


def test_respect_gitignore_false(project: Path):
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / ".gitignore").write_text("tests/\n")
    configure(project, "")
    assert codes(mhalint("check", cwd=project).stdout) == [("a.py", "MHA001")]
    configure(project, "respect-gitignore = false\n")
    assert len(codes(mhalint("check", cwd=project).stdout)) == 2


@pytest.mark.parametrize("body, message", [
    ('selct = ["MHA001"]\n', "unknown key `selct` in [tool.mhalint]"),
    ('select = ["MHA999"]\n', "unknown rule code or prefix 'MHA999' in `select` in"),
    ('select = "MHA001"\n', "`select` must be a list of strings"),
    ('min-severity = "loud"\n', "`min-severity` must be one of info, warning, error"),
    ('[tool.mhalint.per-file-ignores]\n"x.py" = ["NOPE1"]\n', "unknown rule code or prefix 'NOPE1' in "
                                                              "`per-file-ignores` entry 'x.py'"),
    ("[tool.mhalint.probe]\ntimeot = 3\n", "unknown key `probe.timeot`"),
    ("[tool.mhalint.probe]\nmemory = 1.5\n",
     "`probe.memory` must be a whole number of MB from 256 to 1,048,576 (got 1.5)"),
    ("select = [\n", "not valid TOML"),
])
def test_configuration_errors_name_the_key_and_exit_two(project: Path, body: str, message: str):
    configure(project, body)
    result = mhalint("check", cwd=project)
    assert result.returncode == 2
    assert result.stderr.startswith("mhalint: error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_stdin_with_a_display_name(project: Path):
    result = mhalint("check", "-", "--stdin-filename", "pkg/model.py", cwd=project, stdin=BAD)
    assert result.stdout.startswith("pkg/model.py:2:8: MHA001 ")
    assert result.returncode == 1


def test_stdin_fix_prints_the_fixed_source(project: Path):
    source = ("import torch.nn.functional as F\ndef f(q, tokens, pad_id):\n    pad = tokens == pad_id\n"
              "    return F.scaled_dot_product_attention(q, q, q, attn_mask=pad[:, None, None, :])\n")
    result = mhalint("check", "-", "--fix", "--unsafe-fixes", cwd=project, stdin=source)
    assert result.stdout == source.replace("attn_mask=pad", "attn_mask=~pad")
    assert result.returncode == 0


def test_per_file_ignores_apply_to_the_stdin_filename(project: Path):
    configure(project, '[tool.mhalint.per-file-ignores]\n"tests/*" = ["MHA001"]\n')
    result = mhalint("check", "-", "--stdin-filename", "tests/x.py", cwd=project, stdin=BAD)
    assert result.returncode == 0, result.stdout


def test_exit_zero_keeps_the_output(project: Path):
    result = mhalint("check", "--exit-zero", "a.py", cwd=project)
    assert result.returncode == 0 and codes(result.stdout) == [("a.py", "MHA001")]


def test_exit_zero_does_not_hide_usage_errors(project: Path):
    assert mhalint("check", "--exit-zero", "--select", "NOPE", cwd=project).returncode == 2


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX only")
def test_probe_settings_come_from_the_file(project: Path, monkeypatch):
    configure(project, "[tool.mhalint.probe]\ntimeout = 3\ntotal-timeout = 9\nmemory = 1024\n")
    from mhalint.configuration import settings as settings_module
    from mhalint.rule import load_rules

    monkeypatch.chdir(project)
    resolved = settings_module.resolve(
        load_rules(), [Path("a.py")], config_path=None, select=None, extend_select=[], ignore=None, exclude=None,
        extend_exclude=[], respect_gitignore=None, min_severity=None, probe_timeout=None, probe_total_timeout=None,
        probe_memory=2048)
    assert (resolved.probe_limits.site_timeout, resolved.probe_limits.total_timeout,
            resolved.probe_limits.memory_mb) == (3, 9, 2048)
