"""The bundled examples are the README demo: every bad program is flagged with its own code, no fixed one is."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mhalint.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BAD = sorted(EXAMPLES.glob("*_bad.py"))
FIXED = sorted(EXAMPLES.glob("*_fixed.py"))


def test_every_bad_example_has_a_fixed_twin():
    assert BAD, "no examples found"
    assert [p.name.replace("_bad", "") for p in BAD] == [p.name.replace("_fixed", "") for p in FIXED]


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_example_is_flagged_with_its_own_code_only(path: Path):
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 1
    codes = {line.split()[1] for line in result.output.splitlines()[:-1]}
    assert codes == {path.name.split("_")[0].upper()}


@pytest.mark.parametrize("path", FIXED, ids=lambda p: p.name)
def test_fixed_example_is_clean_at_every_severity(path: Path):
    result = CliRunner().invoke(main, ["check", "--min-severity", "info", str(path)])
    assert result.exit_code == 0, result.output


def test_check_examples_directory_exits_one_and_flags_each_bad_file():
    result = CliRunner().invoke(main, ["check", str(EXAMPLES)])
    assert result.exit_code == 1
    flagged = {Path(line.split(":")[0]).name for line in result.output.splitlines()[:-1]}
    assert flagged == {p.name for p in BAD}
