"""benchmarks/speed.py's comparison with an earlier mhalint runs the same rules on both sides: it asks each install
which rules it has (the corpus and the rounds themselves take minutes and are not run here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mhalint.rule import load_rules

# loaded from its file: putting benchmarks/ on sys.path would make its profile.py shadow the standard library's
_SPEC = importlib.util.spec_from_file_location("speed_script", Path(__file__).parents[1] / "benchmarks" / "speed.py")
speed = sys.modules["speed_script"] = importlib.util.module_from_spec(_SPEC)  # its dataclasses look it up there
_SPEC.loader.exec_module(speed)


def test_rule_codes_lists_the_rules_the_install_has(tmp_path: Path):
    codes = speed.rule_codes([sys.executable, "-m", "mhalint"], tmp_path)
    assert codes == set(load_rules()) and "MHA001" in codes


def test_rule_codes_stops_on_an_install_that_cannot_list_them(tmp_path: Path, capsys):
    try:
        speed.rule_codes([sys.executable, "-c", "raise SystemExit('no mhalint here')"], tmp_path)
    except SystemExit as stopped:
        assert stopped.code == 2
    else:
        raise AssertionError("rule_codes accepted a command that failed")
    assert "no mhalint here" in capsys.readouterr().out
