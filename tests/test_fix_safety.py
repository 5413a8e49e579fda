"""`--fix` never loses data: links, owner, group and mode survive; a read-only file, a file with several hard links
and a file edited while the fix is written are left alone, with a message; no temporary file outlives the run, an
interrupt included. Through the real command line, in a subprocess (as a user, pre-commit or CI runs it)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from invoke import invoke

BUG = ("import torch.nn as nn\n\n"
       "attn = nn.MultiheadAttention(64, 8, batch_first=True)\n\n\n"
       "def forward(x):\n"
       "    return attn(x, x, x)[0]\n")
FIXED = BUG.replace("attn(x, x, x)[0]", "attn(x, x, x, need_weights=False)[0]")
NOBODY = 65534  # nobody:nogroup on Debian and Ubuntu

as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="giving a file to another user, or becoming one, needs root")


def mhalint_fix(*paths: Path, cwd: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "mhalint", "check", "--fix", "--no-cache",
                           *map(str, paths)], cwd=cwd, capture_output=True, text=True, timeout=120)


def stray_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*.mhalint"))


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "model.py"
    target.write_text(BUG)
    link = tmp_path / "model.py"
    link.symlink_to(Path("real") / "model.py")
    completed = mhalint_fix(link, cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "model.py")
    assert target.read_text() == FIXED
    assert stray_files(tmp_path) == []


def test_a_file_with_hard_links_is_refused_and_the_others_are_fixed(tmp_path: Path):
    first, second, other = tmp_path / "first.py", tmp_path / "second.py", tmp_path / "other.py"
    first.write_text(BUG)
    os.link(first, second)
    other.write_text(BUG)
    completed = mhalint_fix(first, other, cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [
        f"mhalint: error: cannot fix {first}: it has 2 hard links, which the fix (a new file renamed over it) "
        f"would split; nothing was written"]
    assert os.path.samefile(first, second) and first.read_text() == BUG
    assert other.read_text() == FIXED
    assert stray_files(tmp_path) == []


@pytest.mark.parametrize("mode", [0o444, 0o400, 0o555], ids=["444", "400", "555"])
def test_a_read_only_file_is_refused_even_for_root_and_the_others_are_fixed(tmp_path: Path, mode: int):
    locked, other = tmp_path / "locked.py", tmp_path / "other.py"
    locked.write_text(BUG)
    locked.chmod(mode)
    other.write_text(BUG)
    completed = mhalint_fix(locked, other, cwd=tmp_path)
    assert completed.returncode == 2  # as ruff: a file that could not be fixed is an error
    assert completed.stderr.splitlines() == [
        f"mhalint: error: cannot fix {locked}: the file is read-only (mode {mode:o}); nothing was written"]
    assert locked.read_text() == BUG and stat.S_IMODE(locked.stat().st_mode) == mode
    assert other.read_text() == FIXED
    assert stray_files(tmp_path) == []


@as_root
def test_owner_group_and_mode_are_kept(tmp_path: Path):
    path = tmp_path / "model.py"
    path.write_text(BUG)
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o640)
    completed = mhalint_fix(path, cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    status = path.stat()
    assert (status.st_uid, status.st_gid, stat.S_IMODE(status.st_mode)) == (NOBODY, NOBODY, 0o640)
    assert path.read_text() == FIXED


@as_root
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv to drop CAP_CHOWN")
def test_a_file_whose_owner_cannot_be_kept_is_refused(tmp_path: Path):
    """Root without the capability to give files away (as in many containers) fixes nobody's world-writable file:
    a new file would be root's, so nothing is written."""
    path = tmp_path / "model.py"
    path.write_text(BUG)
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o666)
    completed = mhalint_fix(path, cwd=tmp_path, prefix=("setpriv", "--bounding-set", "-chown"))
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.splitlines() == [
        f"mhalint: error: cannot fix {path}: the fixed file would belong to root:root instead of nobody:nogroup "
        f"(Operation not permitted); nothing was written"]
    assert path.read_text() == BUG and (path.stat().st_uid, path.stat().st_gid) == (NOBODY, NOBODY)
    assert stray_files(tmp_path) == []


def test_an_edit_made_while_the_fix_is_written_is_kept(tmp_path: Path, monkeypatch):
    """The user's editor saves the file while mhalint writes its fix (here: while the fixed text is flushed to
    disk, the last moment before the rename): the check just before the rename sees it and nothing is written."""
    path = tmp_path / "model.py"
    path.write_text(BUG)
    real_fsync = os.fsync

    def fsync_while_the_user_saves(descriptor: int) -> None:
        with open(path, "a") as edited:
            edited.write("# saved meanwhile\n")
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync_while_the_user_saves)
    result = invoke("check", "--fix", "--no-cache", str(path), cwd=tmp_path)
    assert result.exit_code == 2
    assert f"cannot fix {path}: the file changed on disk while mhalint was fixing it" in result.stderr
    assert path.read_text() == BUG + "# saved meanwhile\n"
    assert stray_files(tmp_path) == []


@pytest.mark.slow
def test_sigterm_at_any_moment_of_a_fix_leaves_no_temporary_and_no_half_file(tmp_path: Path):
    """SIGTERM while a temporary file is there (seen by polling the directory), or at a random moment of the
    fixing phase (which starts when the first file changes): no run leaves a `.NAME.XXXX.mhalint` file, every file
    is either as it was or fully fixed, and an interrupted run exits 143 without a traceback."""
    files = [tmp_path / f"model_{i:03}.py" for i in range(50)]
    rng = random.Random()
    during_a_write = stopped_early = 0
    for attempt in range(10):
        for path in files:
            path.write_text(BUG)
        process = subprocess.Popen([sys.executable, "-m", "mhalint", "check", "--fix", "--no-cache", "--jobs", "1",
                                    str(tmp_path)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        if attempt % 2:  # the files are fixed in order: the first one changing starts the fixing phase
            while process.poll() is None and time.monotonic() < deadline and files[0].stat().st_size == len(BUG):
                time.sleep(0.001)
            time.sleep(rng.uniform(0, 0.6))
        else:  # while the temporary file of a random one of the first 30 files is there
            seen: set[str] = set()
            skip = rng.randrange(30)
            while process.poll() is None and time.monotonic() < deadline and len(seen) <= skip:
                seen.update(entry.name for entry in os.scandir(tmp_path) if entry.name.endswith(".mhalint"))
            during_a_write += process.poll() is None
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
        contents = [path.read_text() for path in files]
        assert stray_files(tmp_path) == [], f"attempt {attempt}"
        assert set(contents) <= {BUG, FIXED}, f"attempt {attempt}: a half-written file"
        if BUG in contents:  # stopped before the end
            stopped_early += 1
            assert process.returncode == 128 + signal.SIGTERM, stderr
            assert "Traceback" not in stderr, stderr
    assert during_a_write >= 3 and stopped_early >= 5  # the signals did land while files were being fixed
