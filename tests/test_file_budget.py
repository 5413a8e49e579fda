"""Each file's time and memory budget (`file-time-limit`, `file-memory-limit`): past it, the file is MHA903 with
the reason and the run goes on with the other files (issue 16, item 5b). Through the real command line, in the
main process and in worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SMALL = "import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\n"  # one MHA001 finding, checked in milliseconds


def generated(units: int) -> str:
    """A file of `units` classes, each building masks and giving them to SDPA and nn.MultiheadAttention: about
    22 lines and 250 tokens a class, and several milliseconds of analysis each (benchmarks/scaling.py's `masks`)."""
    return "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n" + "".join(f'''

class Encoder{i}(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x, lengths, tokens):
        b, t, c = x.shape
        keep = torch.arange(t)[None, :] < lengths[:, None]
        pad = tokens == 0
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        y = F.scaled_dot_product_attention(x, x, x, attn_mask=keep)
        out, _ = self.mha(x, x, x, key_padding_mask=pad, attn_mask=causal)
        return out, y


encoder{i} = Encoder{i}(64, 8)
''' for i in range(units))


def mhalint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mhalint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=os.environ | {"NO_COLOR": "1"})


def project(tmp_path: Path, limits: str, big: str, small_files: int) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.mhalint]\n{limits}\n")
    (tmp_path / "big.py").write_text(big)
    for index in range(small_files):
        (tmp_path / f"small{index}.py").write_text(SMALL)
    return tmp_path


def by_file(stdout: str) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for finding in json.loads(stdout):
        found.setdefault(Path(finding["path"]).name, []).append(finding)
    return found


# 1 small file: checked in the main process; 9: more than 8 files to parse, so in worker processes
@pytest.mark.parametrize("small_files, jobs", [(1, "1"), (9, "2")])
def test_a_file_predicted_over_the_memory_limit_is_mha903_and_the_others_are_checked(tmp_path: Path,
                                                                                      small_files: int, jobs: str):
    root = project(tmp_path, "file-memory-limit = 20", generated(80), small_files)  # 13,056 tokens: ~39 MB
    result = mhalint("check", "--no-cache", "--jobs", jobs, "--output-format", "json", ".", cwd=root)
    assert result.returncode == 1, result.stderr
    found = by_file(result.stdout)
    [budget] = found["big.py"]
    assert budget["code"] == "MHA903" and budget["line"] == 1
    assert budget["message"].startswith("too large or too complex to analyse: about ")
    assert "MB of libcst's syntax tree expected for 1,444 lines (13,056 tokens)" in budget["message"]
    assert "over the 20 MB limit (file-memory-limit)" in budget["message"]
    assert sorted(found) == ["big.py", *sorted(f"small{i}.py" for i in range(small_files))]
    assert all([f["code"] for f in found[f"small{i}.py"]] == ["MHA001"] for i in range(small_files))


@pytest.mark.parametrize("small_files, jobs", [(1, "1"), (9, "2")])
def test_a_file_that_takes_longer_than_the_time_limit_is_mha903_and_the_others_are_checked(
        tmp_path: Path, small_files: int, jobs: str):
    # unlimited, the big file takes seconds (parse and analysis); a small one takes milliseconds, well inside
    root = project(tmp_path, "file-time-limit = 0.3", generated(150), small_files)
    result = mhalint("check", "--no-cache", "--jobs", jobs, "--output-format", "json", ".", cwd=root)
    assert result.returncode == 1, result.stderr
    found = by_file(result.stdout)
    assert [(f["code"], f["message"]) for f in found["big.py"]] == [
        ("MHA903", "too large or too complex to analyse: checking it passed the 0.3 s time limit (file-time-limit); "
                   "exclude the file or raise the limit")]
    assert all([f["code"] for f in found[f"small{i}.py"]] == ["MHA001"] for i in range(small_files))


def test_the_outcome_is_not_cached_so_a_raised_limit_applies(tmp_path: Path):
    root = project(tmp_path, "file-memory-limit = 20", generated(80), 0)
    cache = {"MHALINT_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):  # the second run reads the cache the first wrote
        result = subprocess.run([sys.executable, "-m", "mhalint", "check", "--output-format", "concise", "big.py"],
                                cwd=root, capture_output=True, text=True, timeout=120, env=os.environ | cache)
        assert "big.py:1:1: MHA903 [error] too large or too complex to analyse" in result.stdout
    (root / "pyproject.toml").write_text("[tool.mhalint]\nfile-memory-limit = 500\n")
    result = subprocess.run([sys.executable, "-m", "mhalint", "check", "--output-format", "concise", "big.py"],
                            cwd=root, capture_output=True, text=True, timeout=120, env=os.environ | cache)
    assert "MHA903" not in result.stdout and "MHA001" not in result.stdout  # batch_first=True: checked, clean
    assert "MHA007" in result.stdout, result.stdout + result.stderr


def test_the_limits_and_where_they_come_from_are_shown(tmp_path: Path):
    root = project(tmp_path, "file-time-limit = 12.5", SMALL, 0)
    shown = mhalint("check", "--show-settings", ".", cwd=root).stdout
    assert "file-time-limit     = 12.5  # " in shown and "pyproject.toml" in shown.split("file-time-limit")[1]
    assert "file-memory-limit   = 2000  # default" in shown


@pytest.mark.parametrize("setting, message", [
    ("file-time-limit = 0", "`file-time-limit` must be a number of seconds from 0.1 to 86,400 (got 0)"),
    ("file-time-limit = nan", "`file-time-limit` must be a number of seconds from 0.1 to 86,400 (got nan)"),
    ("file-memory-limit = 1.5", "`file-memory-limit` must be a whole number of MB from 1 to 1,048,576 (got 1.5)"),
    ('file-memory-limit = "2GB"', "`file-memory-limit` must be a whole number of MB from 1 to 1,048,576 (got '2GB')"),
])
def test_a_limit_that_is_not_a_positive_number_is_a_configuration_error(tmp_path: Path, setting: str,
                                                                        message: str):
    result = mhalint("check", ".", cwd=project(tmp_path, setting, SMALL, 0))
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_flake8_plugin_applies_the_configured_limits(tmp_path: Path):
    """The flake8 plugin reads the same limits: a file over the configured memory limit is MHA903 there too, and
    a small file beside it is still checked."""
    root = project(tmp_path, "file-memory-limit = 20", generated(80), 1)
    result = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "MHA", "big.py",
                             "small0.py"], cwd=root, capture_output=True, text=True, timeout=120)
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("big.py")] == [
        next(line for line in lines if line.startswith("big.py:1:1: MHA903 ") and "file-memory-limit" in line)]
    assert any(line.startswith("small0.py:") for line in lines), result.stdout + result.stderr
