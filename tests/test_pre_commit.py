"""The pre-commit hook, through the real `pre-commit try-repo`: it fails on a bad file and passes once it is fixed.

`try-repo` builds the hook's environment the way a user's `pre-commit install` does: a fresh virtual environment
with `pip install` of the repository (no extras, so no torch). It takes the repository at a commit, plus the
changes to tracked files, but not untracked files. So the test commits a snapshot of this checkout's working
tree (tracked and untracked files that .gitignore does not exclude) into a temporary repository and points
`try-repo` at that: on a clean clone, as in CI, the snapshot is the clone itself; during development it is what
the next commit would contain.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pre_commit")
pytestmark = pytest.mark.slow  # builds the hook's fresh virtual environment with pip

ROOT = Path(__file__).resolve().parent.parent
BAD = textwrap.dedent("""\
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 8)
    """)
GOOD = BAD.replace("nn.MultiheadAttention(64, 8)", "nn.MultiheadAttention(64, 8, batch_first=True)")
# Fixed identities and dates: the snapshot of the same files is the same commit.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "mhalint tests", "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "mhalint tests", "GIT_COMMITTER_EMAIL": "tests@example.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def snapshot(destination: Path) -> Path:
    """A one-commit repository holding this checkout's working tree as the next commit would."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of mhalint (pre-commit installs hooks from git repositories)")
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    destination.mkdir()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not in the next commit
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    assert (destination / ".pre-commit-hooks.yaml").is_file()
    git("init", "-q", cwd=destination)
    git("add", "-A", cwd=destination)
    git("commit", "-q", "--no-verify", "--no-gpg-sign", "-m", "snapshot", cwd=destination)
    return destination


def try_repo(repo: Path, project: Path, *files: str) -> subprocess.CompletedProcess:
    # try-repo installs into a throwaway store of its own; PRE_COMMIT_HOME only keeps anything else pre-commit
    # might write (its log) out of the user's cache.
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(project.parent / "pre-commit-home"),
           "PRE_COMMIT_COLOR": "never"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(repo), "mhalint", "--verbose", "--files", *files],
        cwd=project, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    return snapshot(tmp_path_factory.mktemp("hook") / "mhalint")


def test_hook_fails_on_bad_file_and_passes_once_fixed(hook_repo, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    git("init", "-q", cwd=project)
    (project / "model.py").write_text(BAD)
    (project / "other.py").write_text(GOOD)
    git("add", "-A", cwd=project)
    git("commit", "-q", "--no-verify", "--no-gpg-sign", "-m", "bad", cwd=project)

    failed = try_repo(hook_repo, project, "model.py", "other.py")
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert "mhalint..." in output and "Failed" in output, output
    assert "model.py:7:21: MHA001 [" in output, output
    assert "other.py:" not in output.split("Using config:")[-1], output
    assert "(2 files checked)" in output, output  # require_serial: one `mhalint check` got both files

    (project / "model.py").write_text(GOOD)
    passed = try_repo(hook_repo, project, "model.py", "other.py")
    output = passed.stdout + passed.stderr
    assert passed.returncode == 0, output
    assert "Passed" in output and "All checks passed!" in output, output


def test_hook_applies_exclude_and_per_file_ignores_to_the_files_it_is_given(hook_repo, tmp_path):
    """pre-commit names every staged file; the project's `extend-exclude` and `per-file-ignores` still apply
    (the hook runs `mhalint check --force-exclude`, as ruff's hook runs `ruff check --force-exclude`)."""
    project = tmp_path / "project"
    for name in ("model.py", "generated/made.py", "tests/test_model.py"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.mhalint]\nextend-exclude = ["generated/"]\n'
                                            '[tool.mhalint.per-file-ignores]\n"tests/*" = ["MHA001"]\n')
    git("init", "-q", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "--no-verify", "--no-gpg-sign", "-m", "bad", cwd=project)

    failed = try_repo(hook_repo, project, "model.py", "generated/made.py", "tests/test_model.py")
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert "model.py:7:21: MHA001 [" in output, output
    hook_output = output.split("Using config:")[-1]
    assert "generated/made.py" not in hook_output and "tests/test_model.py:" not in hook_output, output
    assert "(2 files checked" in output, output  # generated/made.py was not even read

    (project / "model.py").write_text(GOOD)
    passed = try_repo(hook_repo, project, "model.py", "generated/made.py", "tests/test_model.py")
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_hook_environment_does_not_need_torch(hook_repo):
    """The hook's environment is `pip install .` plus the hook's additional_dependencies: neither may bring torch,
    which only the optional `probe` extra needs (a multi-GB install on every contributor's first commit)."""
    from importlib.metadata import requires

    from pre_commit.clientlib import load_manifest

    (hook,) = load_manifest(str(hook_repo / ".pre-commit-hooks.yaml"))
    assert (hook["id"], hook["entry"], hook["language"], hook["require_serial"]) == (
        "mhalint", "mhalint check --force-exclude", "python", True)
    assert hook["types_or"] == ["python", "pyi", "jupyter"]
    assert not hook["additional_dependencies"]
    torch = [r for r in requires("mhalint") or () if r.lower().startswith("torch")]
    assert torch and all("extra ==" in r for r in torch), torch
