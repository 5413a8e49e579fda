"""Every writer of user files (`--fix`, `--unsafe-fixes`, `--add-noqa`, a notebook's fix) writes only files whose
real path lies inside the project being checked: the paths given (a link given as a path does not bring its target
in) or the project's root (the configuration file's directory, else the current directory). A link out of it is
reported, left alone and not counted as fixed; a link inside it is fixed through, as before (issue 34, item 2).
Through the real command line, in this process (`invoke`), so that a race can be staged at the last moment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from invoke import invoke
from test_fix_safety import BUG, FIXED, stray_files
from test_notebooks import nbformat_notebook


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """`project/` (where mhalint runs) and `victim/model.py` beside it, outside the project."""
    project, victim = tmp_path / "project", tmp_path / "victim"
    project.mkdir()
    victim.mkdir()
    (victim / "model.py").write_text(BUG)
    return project, victim


def refusal(stderr: str) -> str:
    """The one line that says why a file was left, with the project's `outside` wording."""
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "outside the project being checked; nothing was written" in lines[0], stderr
    return lines[0]


@pytest.mark.parametrize("flags", [("--fix",), ("--fix", "--unsafe-fixes")])
def test_a_link_out_of_the_project_is_reported_and_left(layout, flags):
    project, victim = layout
    (project / "model.py").symlink_to(Path("..") / "victim" / "model.py")
    result = invoke("check", *flags, "--no-cache", ".", cwd=project)
    assert (victim / "model.py").read_text() == BUG
    assert refusal(result.stderr).startswith(f"mhalint: error: cannot fix model.py: it leads to "
                                             f"{victim.resolve() / 'model.py'}, ")
    assert result.exit_code == 2
    assert "model.py:7:12: MHA007" in result.stdout  # still reported: it was not fixed
    assert "Fixed 0 findings." in result.stdout  # a refused write is not counted
    assert os.path.islink(project / "model.py") and stray_files(victim) == []


def test_a_link_given_as_a_path_does_not_bring_its_target_in(layout):
    project, victim = layout
    (project / "model.py").symlink_to(victim / "model.py")
    result = invoke("check", "--fix", "--no-cache", "model.py", cwd=project)
    refusal(result.stderr)
    assert (victim / "model.py").read_text() == BUG and result.exit_code == 2


def test_a_linked_directory_given_as_a_path_is_not_inside(layout):
    """CI runs `mhalint check --fix src`; the pull request made `src` a link to a directory elsewhere."""
    project, victim = layout
    (project / "src").symlink_to(victim)
    result = invoke("check", "--fix", "--no-cache", "src", cwd=project)
    refusal(result.stderr)
    assert (victim / "model.py").read_text() == BUG and result.exit_code == 2


def test_add_noqa_does_not_follow_a_link_out_of_the_project(layout):
    project, victim = layout
    (project / "model.py").symlink_to(victim / "model.py")
    result = invoke("check", "--add-noqa", "--no-cache", ".", cwd=project)
    refused, added = result.stderr.splitlines()
    assert refusal(refused).startswith("mhalint: error: cannot add noqa directives to model.py: it leads to ")
    assert added == "Added 0 noqa directives." and result.exit_code == 2
    assert (victim / "model.py").read_text() == BUG


def test_a_notebook_linked_out_of_the_project_is_left(layout):
    project, victim = layout
    before = nbformat_notebook(victim / "nb.ipynb", 1, False, "\n")
    (project / "nb.ipynb").symlink_to(victim / "nb.ipynb")
    result = invoke("check", "--fix", "--no-cache", ".", cwd=project)
    refusal(result.stderr)
    assert (victim / "nb.ipynb").read_text(encoding="utf-8") == before and result.exit_code == 2
    assert "Fixed 0 findings." in result.stdout


def test_links_inside_the_project_are_fixed_through(layout):
    """From a subdirectory given as the path, to a file elsewhere in the project (the current directory, with no
    configuration file); and with the configuration's directory as the root, run from outside the project."""
    project, _ = layout
    (project / "lib").mkdir()
    (project / "lib" / "model.py").write_text(BUG)
    (project / "src").mkdir()
    (project / "src" / "model.py").symlink_to(Path("..") / "lib" / "model.py")
    result = invoke("check", "--fix", "--no-cache", "src", cwd=project)
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    assert (project / "lib" / "model.py").read_text() == FIXED and os.path.islink(project / "src" / "model.py")

    (project / "lib" / "model.py").write_text(BUG)
    (project / "mhalint.toml").write_text("")
    result = invoke("check", "--fix", "--no-cache", str(project / "src"), cwd=project.parent)
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    assert (project / "lib" / "model.py").read_text() == FIXED


def test_a_directory_moved_out_while_the_fix_is_written_is_refused(layout, monkeypatch):
    """The real path is checked again right before the rename: here the file's directory is moved out of the
    project and a link put in its place while the fixed text is flushed to disk."""
    project, victim = layout
    (project / "pkg").mkdir()
    (project / "pkg" / "model.py").write_text(BUG)
    moved = victim / "pkg"
    real_fsync = os.fsync

    def fsync_while_the_directory_moves(descriptor: int) -> None:
        os.rename(project / "pkg", moved)
        (project / "pkg").symlink_to(moved)
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync_while_the_directory_moves)
    result = invoke("check", "--fix", "--no-cache", ".", cwd=project)
    refusal(result.stderr)
    assert (moved / "model.py").read_text() == BUG and result.exit_code == 2
    assert stray_files(victim) == []
