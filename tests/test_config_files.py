"""Configuration files as a ruff user expects them (issue 16, items 4, 8, 10 and 11): `mhalint.toml` and
`.mhalint.toml` beside pyproject.toml, `--config` in either form, broken files as one-line errors,
`--show-settings`, `--show-files` and `--force-exclude`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_config import BAD, codes, mhalint


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "a.py").write_text(BAD)  # MHA001 warning, MHA004 info
    return tmp_path


def assert_config_error(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("mhalint: error: ") and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------- broken files (item 4)

@pytest.mark.parametrize("body, message", [
    ("tool = 5\n", "pyproject.toml: `tool` must be a table"),
    ('tool = "mhalint"\n', "pyproject.toml: `tool` must be a table"),
    ("[tool]\nmhalint = 5\n", "pyproject.toml: [tool.mhalint] must be a table"),
    ("[tool.mhalint.probe]\ntimeout = nan\n",
     "`probe.timeout` must be a number of seconds from 0.1 to 3,600 (got nan)"),
    ("[tool.mhalint.probe]\ntotal-timeout = inf\n",
     "`probe.total-timeout` must be a number of seconds from 1 to 86,400 (got inf)"),
    ("[tool.mhalint.probe]\ntimeout = -inf\n",
     "`probe.timeout` must be a number of seconds from 0.1 to 3,600 (got -inf)"),
    ("[tool.mhalint.probe]\ntimeout = -1\n",
     "`probe.timeout` must be a number of seconds from 0.1 to 3,600 (got -1)"),
    ("[tool.mhalint]\nforce-exclude = 1\n", "`force-exclude` must be true or false"),
])
def test_a_broken_pyproject_is_one_line_and_exit_two(project: Path, body: str, message: str):
    (project / "pyproject.toml").write_text(body)
    assert_config_error(mhalint("check", cwd=project), message)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_a_fifo_given_with_config_is_refused_without_hanging(project: Path):
    os.mkfifo(project / "settings.toml")
    result = subprocess.run([sys.executable, "-m", "mhalint", "check", "--config", "settings.toml", "a.py"],
                            cwd=project, capture_output=True, text=True, timeout=20)
    assert_config_error(result, "settings.toml: cannot be read (not a regular file (a FIFO))")


# ----------------------------------------------------------------------------- mhalint.toml, .mhalint.toml (11)

def test_mhalint_toml_has_top_level_keys(project: Path):
    (project / "mhalint.toml").write_text('ignore = ["MHA001"]\nmin-severity = "info"\n')
    result = mhalint("check", "a.py", cwd=project)
    assert codes(result.stdout) == [("a.py", "MHA004")]


@pytest.mark.parametrize("present, used", [
    ({"pyproject.toml", "mhalint.toml"}, "mhalint.toml"),
    ({"pyproject.toml", "mhalint.toml", ".mhalint.toml"}, ".mhalint.toml"),
    ({"pyproject.toml", ".mhalint.toml"}, ".mhalint.toml"),
])
def test_in_one_folder_dot_mhalint_toml_then_mhalint_toml_then_pyproject(project: Path, present: set[str],
                                                                           used: str):
    # Each file selects a different code, so the report says which one was read.
    selects = {"pyproject.toml": "MHA001", "mhalint.toml": "MHA004", ".mhalint.toml": "MHA002"}  # a.py: no MHA002
    for name in present:
        body = f'select = ["{selects[name]}"]\nmin-severity = "info"\n'
        (project / name).write_text(f"[tool.mhalint]\n{body}" if name == "pyproject.toml" else body)
    expected = {"pyproject.toml": [("a.py", "MHA001")], "mhalint.toml": [("a.py", "MHA004")], ".mhalint.toml": []}
    result = mhalint("check", "-v", "a.py", cwd=project)
    assert codes(result.stdout) == expected[used]
    assert f"mhalint: configuration: {project / used} (top-level keys)" in result.stderr


def test_an_empty_mhalint_toml_is_used_as_ruff_uses_an_empty_ruff_toml(project: Path):
    (project / "pyproject.toml").write_text('[tool.mhalint]\nignore = ["MHA001"]\n')
    (project / "mhalint.toml").write_text("")
    assert codes(mhalint("check", "a.py", cwd=project).stdout) == [("a.py", "MHA001")]


def test_the_nearest_folder_wins_whatever_the_file(project: Path):
    (project / "mhalint.toml").write_text('ignore = ["MHA001"]\n')
    (project / "pkg").mkdir()
    (project / "pkg" / "b.py").write_text(BAD)
    (project / "pkg" / "pyproject.toml").write_text('[tool.mhalint]\nselect = ["MHA001"]\n')
    assert codes(mhalint("check", "pkg", cwd=project).stdout) == [("b.py", "MHA001")]
    (project / "pkg" / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")  # no table: looked past
    assert codes(mhalint("check", "pkg", cwd=project).stdout) == []


def test_a_pyproject_table_in_mhalint_toml_is_explained(project: Path):
    (project / "mhalint.toml").write_text('[tool.mhalint]\nignore = ["MHA001"]\n')
    assert_config_error(mhalint("check", cwd=project), "unknown key `tool` at the top level (this file takes the "
                                                      "settings at the top level, without [tool.mhalint])")


# ------------------------------------------------------------------------------------------------- --config (11)

@pytest.mark.parametrize("name, body, table", [
    ("mhalint.toml", 'ignore = ["MHA001"]\n', "top-level keys"),
    ("ci.toml", 'ignore = ["MHA001"]\n', "top-level keys"),
    ("ci.toml", '[tool.mhalint]\nignore = ["MHA001"]\n', "[tool.mhalint]"),
    ("pyproject.toml", '[tool.mhalint]\nignore = ["MHA001"]\n', "[tool.mhalint]"),
])
def test_config_takes_either_form_and_says_which_table_it_read(project: Path, tmp_path_factory, name: str,
                                                               body: str, table: str):
    path = tmp_path_factory.mktemp("elsewhere") / name
    path.write_text(body)
    result = mhalint("check", "-v", "--config", str(path), "a.py", cwd=project)
    assert codes(result.stdout) == []
    assert f"mhalint: configuration: {path} ({table})" in result.stderr
    shown = mhalint("check", "--config", str(path), "--show-settings", cwd=project)
    assert shown.stdout.splitlines()[0] == f"# settings from {path} ({table})"
    assert f'ignore              = ["MHA001"]  # {path} ({table})' in shown.stdout.splitlines()


@pytest.mark.parametrize("name, body, message", [
    ("pyproject.toml", "[project]\nname = 'x'\n", "no mhalint settings: neither a [tool.mhalint] table nor"),
    ("other.toml", "[tool.black]\nline-length = 100\n", "no mhalint settings: neither a [tool.mhalint] table nor"),
    ("other.toml", "", "no mhalint settings"),
    ("setup.cfg", "[mhalint]\nignore = MHA001\n", "setup.cfg: not a mhalint configuration file; mhalint reads "
                                                  "a pyproject.toml with a [tool.mhalint] table, or .mhalint.toml "
                                                  "or mhalint.toml with top-level keys"),
    ("other.toml", 'ignore = ["MHA001"]\nline-length = 3\n', "unknown key `line-length` at the top level"),
])
def test_an_unrecognised_config_file_is_an_error(project: Path, name: str, body: str, message: str):
    (project / name).write_text(body)
    assert_config_error(mhalint("check", "--config", name, "a.py", cwd=project), message)


# ------------------------------------------------------------------------------------------ --show-settings (8)

def test_show_settings_says_where_each_value_came_from(project: Path):
    (project / "pyproject.toml").write_text('[tool.mhalint]\nignore = ["MHA004"]\nextend-exclude = ["gen/"]\n'
                                            "[tool.mhalint.probe]\ntimeout = 5\n")
    result = mhalint("check", "--show-settings", "--min-severity", "info", "--extend-exclude", "old/", cwd=project)
    assert result.returncode == 0 and result.stderr == ""
    source = f"{project / 'pyproject.toml'} ([tool.mhalint])"
    lines = result.stdout.splitlines()
    assert lines[0] == f"# settings from {source}"
    settings = {line.split(" = ")[0].strip(): line.split(" = ", 1)[1] for line in lines if " = " in line}
    assert settings["select"] == '["ALL"]  # default'
    assert settings["ignore"] == f'["MHA004"]  # {source}'
    assert settings["min-severity"] == '"info"  # --min-severity'
    assert settings["extend-exclude"] == f'["gen/", "old/"]  # --extend-exclude and {source}'
    assert settings["probe.timeout"] == f"5  # {source}"
    assert settings["probe.memory"] == "2048  # default"
    assert settings["force-exclude"] == "false  # default"
    assert lines[-1].startswith("# enabled rules: MHA001, ") and "MHA004" not in lines[-1]
    assert "a.py" not in result.stdout  # nothing was checked


def test_show_settings_without_a_file_says_so(project: Path):
    result = mhalint("check", "--show-settings", "--select", "MHA001", cwd=project)
    assert result.stdout.splitlines()[0] == "# settings from no configuration file"
    assert 'select              = ["MHA001"]  # --select' in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "# enabled rules: MHA001"


# --------------------------------------------------------------------------------------------- --show-files (8)

def test_show_files_lists_what_would_be_checked_sorted(project: Path):
    for name in ("z.py", "pkg/m.pyi", "pkg/b.ipynb", "venv/lib.py", "gen/g.py", "notes.txt"):
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text("")
    (project / "pyproject.toml").write_text('[tool.mhalint]\nextend-exclude = ["gen/"]\n')
    result = mhalint("check", "--show-files", cwd=project)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == ["a.py", "pkg/b.ipynb", "pkg/m.pyi", "z.py"]
    named = mhalint("check", "--show-files", "gen/g.py", "z.py", cwd=project)
    assert named.stdout.splitlines() == ["gen/g.py", "z.py"]  # a named file is checked...
    forced = mhalint("check", "--show-files", "--force-exclude", "gen/g.py", "z.py", cwd=project)
    assert forced.stdout.splitlines() == ["z.py"]  # ...unless --force-exclude


# ------------------------------------------------------------------------------------------ --force-exclude (10)

def test_force_exclude_applies_exclude_and_per_file_ignores_to_named_files(project: Path):
    (project / "gen").mkdir()
    (project / "gen" / "g.py").write_text(BAD)
    (project / "build").mkdir()
    (project / "build" / "b.py").write_text(BAD)  # build/ is in the default exclusions
    (project / "tests").mkdir()
    (project / "tests" / "t.py").write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.mhalint]\nextend-exclude = ["gen/"]\n'
                                            '[tool.mhalint.per-file-ignores]\n"tests/*" = ["MHA001"]\n')
    named = ("a.py", "gen/g.py", "build/b.py", "tests/t.py")
    assert codes(mhalint("check", *named, cwd=project).stdout) == [
        ("a.py", "MHA001"), ("b.py", "MHA001"), ("g.py", "MHA001")]
    result = mhalint("check", "--force-exclude", *named, cwd=project)
    assert codes(result.stdout) == [("a.py", "MHA001")]
    assert "(2 files checked" in result.stdout  # a.py and tests/t.py
    (project / "pyproject.toml").write_text('[tool.mhalint]\nextend-exclude = ["gen/"]\nforce-exclude = true\n')
    assert codes(mhalint("check", *named, cwd=project).stdout) == [("a.py", "MHA001"), ("t.py", "MHA001")]
    assert len(codes(mhalint("check", "--no-force-exclude", *named, cwd=project).stdout)) == 4


def test_force_exclude_matches_a_named_directory_and_the_folders_above_a_file(project: Path):
    (project / "gen" / "deep").mkdir(parents=True)
    (project / "gen" / "deep" / "g.py").write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.mhalint]\nextend-exclude = ["gen"]\n')
    for named in ("gen", "gen/deep", "gen/deep/g.py", "./gen/deep/../deep/g.py"):
        result = mhalint("check", "--force-exclude", named, cwd=project)
        assert "(0 files checked" in result.stdout and result.returncode == 0, (named, result.stdout)
    assert "(1 file checked" in mhalint("check", "gen/deep/g.py", cwd=project).stdout


# ---------------------------------------------------------------- required-version (issue 39 item 4, as ruff's)

@pytest.mark.parametrize("spec", ['"{v}"', '">=0.2, <1000"', '"~={major}.{minor}"', '"!=0.0.1"'])
def test_a_required_version_mhalint_meets_lets_it_run(project: Path, spec: str):
    from mhalint import __version__

    major, minor, *_ = __version__.split(".")
    (project / "pyproject.toml").write_text(f"[tool.mhalint]\nrequired-version = "
                                            f"{spec.format(v=__version__, major=major, minor=minor)}\n")
    result = mhalint("check", "--no-cache", ".", cwd=project)
    assert result.returncode == 1 and codes(result.stdout) == [("a.py", "MHA001")]
    assert "required-version" in mhalint("check", "--show-settings", ".", cwd=project).stdout


@pytest.mark.parametrize(("spec", "message"), [
    ('">=1000"', "`required-version` is '>=1000', and this is mhalint "),
    ('"<0.1"', "`required-version` is '<0.1', and this is mhalint "),
    ('"~=0.1.0"', "`required-version` is '~=0.1.0', and this is mhalint "),
    ('"newest"', "`required-version` must be a version or comma-separated version clauses"),
    ("2", "`required-version` must be a version or comma-separated version clauses"),
])
def test_a_required_version_mhalint_does_not_meet_stops_it(project: Path, spec: str, message: str):
    (project / "pyproject.toml").write_text(f"[tool.mhalint]\nrequired-version = {spec}\n")
    assert_config_error(mhalint("check", "--no-cache", ".", cwd=project), message)


# ------------------------------------------------------------------------ extend (issue 39 item 4, as ruff's)

def test_extend_puts_a_files_settings_over_another_files(project: Path):
    (project / "shared.toml").write_text('ignore = ["MHA001"]\nmin-severity = "info"\n[probe]\ntimeout = 7\n')
    (project / "pyproject.toml").write_text('[tool.mhalint]\nextend = "shared.toml"\nmin-severity = "warning"\n'
                                            '[tool.mhalint.probe]\nmemory = 4096\n')
    result = mhalint("check", "--no-cache", ".", cwd=project)
    assert result.returncode == 0 and codes(result.stdout) == []  # MHA001 ignored there, MHA004 below warning
    settings = mhalint("check", "--show-settings", ".", cwd=project).stdout
    assert "probe.timeout       = 7" in settings and "probe.memory        = 4096" in settings
    assert 'extend              = "shared.toml"' in settings


@pytest.mark.parametrize(("files", "message"), [
    ({"pyproject.toml": '[tool.mhalint]\nextend = "a.toml"\n', "a.toml": 'extend = "pyproject.toml"\n'},
     "`extend` makes a cycle"),
    ({"pyproject.toml": '[tool.mhalint]\nextend = "missing.toml"\n'}, "which is not a file"),
    ({"pyproject.toml": "[tool.mhalint]\nextend = 3\n"}, "`extend` must be the path of another configuration file"),
    ({"pyproject.toml": '[tool.mhalint]\nextend = "b.toml"\n', "b.toml": 'min-severity = "loud"\n'},
     "b.toml: `min-severity` must be one of"),
])
def test_a_broken_extend_is_an_error_that_names_the_file(project: Path, files: dict, message: str):
    for name, text in files.items():
        (project / name).write_text(text)
    assert_config_error(mhalint("check", ".", cwd=project), message)


# ------------------------------------------------------------------------ cache-dir (issue 39 item 4, as ruff's)

def test_the_cache_dir_setting_names_the_cache_folder_in_the_project(project: Path, monkeypatch):
    monkeypatch.delenv("MHALINT_CACHE_DIR", raising=False)
    (project / "pyproject.toml").write_text('[tool.mhalint]\ncache-dir = "lint-cache"\n')
    first = mhalint("check", ".", cwd=project)
    assert list((project / "lint-cache").glob("findings-*.json")) and not (project / ".mhalint_cache").exists()
    assert mhalint("check", ".", cwd=project).stdout == first.stdout
    assert 'cache-dir           = "lint-cache"' in mhalint("check", "--show-settings", ".", cwd=project).stdout
    assert mhalint("clean", cwd=project).stdout.startswith(f"Removed {project / 'lint-cache'}")
    assert not (project / "lint-cache").exists()


@pytest.mark.parametrize("value", ['"../outside"', '"/tmp/elsewhere"', '"build/cache"', '".."', "7"])
def test_a_cache_dir_setting_that_leaves_the_project_is_an_error(project: Path, value: str, monkeypatch):
    monkeypatch.delenv("MHALINT_CACHE_DIR", raising=False)
    (project / "pyproject.toml").write_text(f"[tool.mhalint]\ncache-dir = {value}\n")
    assert_config_error(mhalint("check", ".", cwd=project), "`cache-dir` must be the name of a folder beside the "
                                                            "configuration file")
    assert sorted(path.name for path in project.iterdir()) == ["a.py", "pyproject.toml"]  # nothing written
