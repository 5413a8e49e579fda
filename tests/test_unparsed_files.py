"""Files checked without a parse are counted in the summary, cold and from the cache, and `--parse-all` parses
them and reports their syntax errors (issue 39 item 6)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mhalint.cli.main import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOT_PARSED = "not parsed: no attention API in their code, --parse-all checks their syntax"


def _tree(root: Path) -> Path:
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.mhalint]\n")
    shutil.copy(EXAMPLES / "mha001_batch_first_default_bad.py", root / "model.py")
    (root / "broken.py").write_text("import torch\nx = (\n")  # torch, but no attention API: not parsed by default
    (root / "plain.py").write_text("x = 1\n")
    return root


def _check(root: Path, *args: str, monkeypatch) -> tuple[int, list[str]]:
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, ["check", "--output-format", "concise", *args, "."])
    return result.exit_code, result.output.splitlines()


@pytest.mark.parametrize("cache", [["--no-cache"], []], ids=["no cache", "cache"])
def test_the_summary_counts_the_files_not_parsed_cold_and_warm(tmp_path, monkeypatch, cache):
    root = _tree(tmp_path / "tree")
    for _ in range(2):  # the second run answers from the cache, when there is one
        code, lines = _check(root, *cache, monkeypatch=monkeypatch)
        assert code == 1
        assert [line.split(":")[0] for line in lines[:-1]] == ["model.py"]  # the syntax error goes unseen
        assert lines[-1].startswith(f"Found 1 finding (3 files checked, 2 of them {NOT_PARSED}).")


@pytest.mark.parametrize("cache", [["--no-cache"], []], ids=["no cache", "cache"])
def test_parse_all_reports_the_syntax_errors_of_every_file(tmp_path, monkeypatch, cache):
    root = _tree(tmp_path / "tree")
    _check(root, *cache, monkeypatch=monkeypatch)  # a run without it first: its cache must not answer for it
    for _ in range(2):
        code, lines = _check(root, "--parse-all", *cache, monkeypatch=monkeypatch)
        assert code == 1
        assert lines[0] == ("broken.py:2:5: MHA900 [error] could not parse this file: syntax error: '(' was never "
                            "closed; fix the syntax so mhalint can check this file")
        assert lines[1].startswith("model.py:") and "MHA001" in lines[1]
        assert lines[-1].startswith("Found 2 findings (3 files checked).")


def test_a_tree_whose_every_file_is_parsed_says_nothing_more(tmp_path, monkeypatch):
    root = tmp_path / "tree"
    root.mkdir()
    shutil.copy(EXAMPLES / "mha001_batch_first_default_fixed.py", root / "model.py")
    code, lines = _check(root, "--no-cache", monkeypatch=monkeypatch)
    assert (code, lines) == (0, ["All checks passed! (1 file checked)"])
