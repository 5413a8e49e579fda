"""--fix / --unsafe-fixes / --diff: what is written, that it is written atomically, and what is never written."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mhalint import fixes
from mhalint.cli.main import main
from mhalint.finding import SAFE, UNSAFE, Edit, Finding, Fix

BATCH_FIRST_BUG = (
    "import torch.nn as nn\n"
    "\n"
    "class Block(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.attn = nn.MultiheadAttention(\n"
    "            64,\n"
    "            8,\n"
    "        )\n"
    "\n"
    "    def forward(self, x):\n"
    "        B, T, C = x.shape\n"
    "        return self.attn(x, x, x, need_weights=False)[0]\n"
)
MASK_BUG = (
    "import torch.nn.functional as F\n"
    "\n"
    "def attend(q, k, v, tokens, pad_id):\n"
    "    pad = tokens == pad_id\n"
    "    return F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])\n"
)


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def write(tmp_path: Path, name: str, text: str, newline: str = "\n", encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode(encoding))
    return path


def test_unsafe_fixes_are_not_applied_without_the_flag(tmp_path: Path):
    path = write(tmp_path, "model.py", BATCH_FIRST_BUG)
    result = run("check", "--fix", str(path))
    assert path.read_text() == BATCH_FIRST_BUG
    assert result.exit_code == 1 and "Fixed 0 findings." in result.output


def test_unsafe_fix_text_keeps_the_call_formatting(tmp_path: Path):
    path = write(tmp_path, "model.py", BATCH_FIRST_BUG)
    result = run("check", "--fix", "--unsafe-fixes", "--select", "MHA001", str(path))
    assert result.exit_code == 0, result.output
    assert "        self.attn = nn.MultiheadAttention(\n            64,\n            8,\n            batch_first=True,\n" \
           "        )\n" in path.read_text()
    assert "Fixed 1 finding." in result.output


def test_mask_fix_adds_the_inversion(tmp_path: Path):
    path = write(tmp_path, "attend.py", MASK_BUG)
    assert run("check", "--fix", "--unsafe-fixes", str(path)).exit_code == 0
    assert "attn_mask=~pad[:, None, None, :])" in path.read_text()


def test_fixing_twice_changes_nothing_the_second_time(tmp_path: Path):
    path = write(tmp_path, "attend.py", MASK_BUG)
    run("check", "--fix", "--unsafe-fixes", str(path))
    once = path.read_bytes()
    second = run("check", "--fix", "--unsafe-fixes", str(path))
    assert path.read_bytes() == once
    assert "Fixed 0 findings." in second.output and second.exit_code == 0


def test_diff_prints_and_writes_nothing(tmp_path: Path):
    path = write(tmp_path, "attend.py", MASK_BUG)
    result = run("check", "--diff", "--unsafe-fixes", str(path))
    assert result.exit_code == 1
    assert f"--- {path}\n+++ {path}\n" in result.output
    assert "-    return F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])" in result.output
    assert "+    return F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])" in result.output
    assert path.read_text() == MASK_BUG
    assert run("check", "--diff", str(path)).exit_code == 0  # only an unsafe fix exists: nothing to show


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_newline_style_encoding_and_mode_are_kept(tmp_path: Path, newline: str):
    text = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + MASK_BUG
    path = write(tmp_path, "attend.py", text, newline=newline, encoding="latin-1")
    path.chmod(0o640)
    assert run("check", "--fix", "--unsafe-fixes", str(path)).exit_code == 0
    expected = text.replace("attn_mask=pad", "attn_mask=~pad").replace("\n", newline).encode("latin-1")
    assert path.read_bytes() == expected
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_byte_order_mark_is_kept(tmp_path: Path):
    path = tmp_path / "attend.py"
    path.write_bytes(b"\xef\xbb\xbf" + MASK_BUG.encode())
    run("check", "--fix", "--unsafe-fixes", str(path))
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert b"attn_mask=~pad" in path.read_bytes()


def broken_fix_finding(path: str) -> Finding:
    """A fix whose result cannot parse: it opens a bracket and never closes it."""
    return Finding(path, 1, 1, "XYZ001", "m", fix=Fix((Edit(1, 1, 1, 2, "x = ("),), SAFE, "break"))


def test_a_fix_that_would_not_parse_is_refused():
    with pytest.raises(fixes.FixError, match="would not parse"):
        fixes.fix_source("y = 1\n", lambda text: [broken_fix_finding("f.py")] if text == "y = 1\n" else [],
                         unsafe=False)


def test_the_count_is_of_the_findings_removed_not_of_the_fixes_applied():
    """Issue 34: a fix whose result a later round fixes again (a finding the first fix made) counted twice, so
    `--diff` said "Would fix 2 findings" for one. A fix that removes two findings counts both."""
    def fixing(code: str, text: str, *also: str) -> list[Finding]:
        return [Finding("f.py", 1, 1, c, "m", fix=Fix((Edit(1, 1, 1, 2, text),), UNSAFE, "t")) for c in (code, *also)]

    chain = {"a\n": fixing("A1", "b"), "b\n": fixing("A2", "c")}
    assert fixes.fix_source("a\n", lambda text: chain.get(text, []), unsafe=True) == ("c\n", 1)
    both = {"a\n": fixing("A1", "b", "A3")}
    assert fixes.fix_source("a\n", lambda text: both.get(text, []), unsafe=True) == ("b\n", 2)


def test_diff_counts_the_findings_it_would_fix(tmp_path: Path):
    path = write(tmp_path, "model.py", "import torch\nfrom torch import nn\n"
                 "attn = nn.MultiheadAttention(8, 2, batch_first=True)\n"
                 "mask = torch.ones(5, 5); mask = torch.tril(mask)\nx = torch.randn(1, 5, 8)\n"
                 "out = attn(x, x, x, attn_mask=mask)\n")
    result = CliRunner().invoke(main, ["check", "--diff", "--unsafe-fixes", "--no-cache", str(path)])
    assert "Would fix 1 finding." in result.output, result.output


def test_overlapping_fixes_apply_one_per_round():
    first = Finding("f.py", 1, 1, "A1", "m", fix=Fix((Edit(1, 1, 1, 4, "bbb"),), SAFE, "t"))
    second = Finding("f.py", 1, 2, "A2", "m", fix=Fix((Edit(1, 2, 1, 3, "z"),), SAFE, "t"))
    unsafe = Finding("f.py", 1, 5, "A3", "m", fix=Fix((Edit(1, 5, 1, 6, "!"),), UNSAFE, "t"))
    assert fixes.apply_fixes("aaa x\n", [second, first, unsafe], unsafe=False) == ("bbb x\n", 1)
    assert fixes.apply_fixes("aaa x\n", [first, unsafe], unsafe=True) == ("bbb !\n", 2)


def test_interrupted_write_leaves_the_original_intact(tmp_path: Path, monkeypatch):
    path = write(tmp_path, "attend.py", MASK_BUG)

    def crash(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", crash)
    result = run("check", "--fix", "--unsafe-fixes", str(path))
    assert result.exit_code == 2
    assert "cannot fix" in result.output and "No space left on device" in result.output
    assert path.read_text() == MASK_BUG
    assert [p.name for p in tmp_path.iterdir()] == ["attend.py"]  # no temporary file left behind


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory_is_reported_and_left_alone(tmp_path: Path):
    path = write(tmp_path, "attend.py", MASK_BUG)
    tmp_path.chmod(0o555)
    try:
        result = run("check", "--fix", "--unsafe-fixes", str(path))
    finally:
        tmp_path.chmod(0o755)
    assert result.exit_code == 2 and "cannot fix" in result.output
    assert path.read_text() == MASK_BUG


def test_file_changed_on_disk_between_read_and_write_is_not_overwritten(tmp_path: Path):
    path = write(tmp_path, "attend.py", MASK_BUG)
    source = fixes.SourceFile.read(path)
    path.write_text(MASK_BUG + "# edited meanwhile\n")
    with pytest.raises(fixes.FixError, match="changed on disk"):
        source.write(source.text.replace("attn_mask=pad", "attn_mask=~pad"), [tmp_path])
    assert path.read_text().endswith("# edited meanwhile\n")


# ---- issue 16: fixes at one place, and the call's own layout (through the real command line, in a subprocess) ----
def mhalint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


BUFFER_MASK_DISCARDED_WEIGHTS = (
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, n):\n"
    "        super().__init__()\n"
    "        self.attn = nn.MultiheadAttention(64, 8, batch_first=True)\n"
    "        self.register_buffer(\"mask\", torch.tril(torch.ones(n, n)))\n"
    "\n"
    "    def forward(self, x):\n"
    "        return self.attn(x, x, x, attn_mask=self.mask)[0]\n"
)


def test_two_fixes_inserting_at_one_place_are_applied_one_after_the_other(tmp_path: Path):
    """MHA007 (`, need_weights=False`) and MHA008 (` == 0`) both insert after `self.mask`; applied in one round they
    interleave into `need_weights=False == 0` (True). One per round, each computed on the other's result."""
    path = write(tmp_path, "block.py", BUFFER_MASK_DISCARDED_WEIGHTS)
    assert {"MHA007", "MHA008"} <= {line.split()[1] for line in mhalint(str(path), cwd=tmp_path).stdout.splitlines()
                                    if line.startswith(str(path))}
    completed = mhalint("--fix", "--unsafe-fixes", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert path.read_text() == BUFFER_MASK_DISCARDED_WEIGHTS.replace(
        "attn_mask=self.mask)[0]", "attn_mask=self.mask == 0, need_weights=False)[0]")
    again = mhalint("--select", "MHA007,MHA008", str(path), cwd=tmp_path)
    assert again.returncode == 0, again.stdout


def test_fixes_of_different_findings_that_touch_wait_for_the_next_round():
    insert = Finding("f.py", 1, 2, "A1", "m", fix=Fix((Edit(1, 2, 1, 2, "+"),), SAFE, "t"))
    same_place = Finding("f.py", 1, 2, "A2", "m", fix=Fix((Edit(1, 2, 1, 2, "-"),), SAFE, "t"))
    ending_there = Finding("f.py", 1, 1, "A3", "m", fix=Fix((Edit(1, 1, 1, 2, "b"),), SAFE, "t"))
    assert fixes.apply_fixes("ax\n", [insert, same_place], unsafe=False) == ("a+x\n", 1)
    assert fixes.apply_fixes("ax\n", [ending_there, insert], unsafe=False) == ("bx\n", 1)


ONE_PER_LINE = (
    "import torch.nn as nn\n"
    "\n"
    "attn = nn.MultiheadAttention(64, 8, batch_first=True)\n"
    "\n"
    "\n"
    "def forward(x):\n"
    "    return attn(\n"
    "        x,\n"
    "        x,\n"
    "        x,\n"
    "        key_padding_mask=None{end}\n"
    "    )[0]\n"
)


@pytest.mark.parametrize(("end", "fixed"), [
    pytest.param("", "        key_padding_mask=None,\n        need_weights=False\n    )[0]\n", id="no-trailing-comma"),
    pytest.param(",", "        key_padding_mask=None,\n        need_weights=False,\n    )[0]\n", id="trailing-comma"),
    pytest.param("  # no padding",
                 "        key_padding_mask=None,  # no padding\n        need_weights=False\n    )[0]\n",
                 id="comment-after-the-last-argument"),
])
def test_an_argument_added_to_a_call_with_one_argument_per_line_gets_its_own_line(tmp_path: Path, end: str,
                                                                                   fixed: str):
    """No `key_padding_mask=None, ` with a trailing space, no `need_weights=False)[0]` on the closing line."""
    source = ONE_PER_LINE.format(end=end)
    path = write(tmp_path, "model.py", source)
    completed = mhalint("--fix", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert path.read_text() == source[:source.index("        key_padding_mask")] + fixed
    assert not any(line.endswith(" ") for line in path.read_text().splitlines())


def test_an_argument_added_to_packed_arguments_follows_the_last_one(tmp_path: Path):
    packed = "    return attn(x, x, x,\n                key_padding_mask=None)[0]\n"
    source = ONE_PER_LINE[:ONE_PER_LINE.index("    return attn(")] + packed
    path = write(tmp_path, "model.py", source)
    completed = mhalint("--fix", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert path.read_text() == source.replace("None)[0]", "None, need_weights=False)[0]")
