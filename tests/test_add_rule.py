"""scripts/add_rule.py: a rule scaffolded into a copy of the repository, filled in as an author would, passes its
tests there; and the scaffold refuses what is taken, writing nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import add_rule  # noqa: E402

COPIED_OUT = shutil.ignore_patterns(".venv", ".git", "__pycache__", "site", ".pytest_cache", ".hypothesis",
                                    ".mhalint_cache", "*.egg-info")

# What an author writes in the places the scaffold leaves: a rule that flags every call of `demo_attention`.
VISITOR = '''
        if isinstance(node.func, cst.Name) and node.func.value == "demo_attention":
            self.report(node, FOUND, severity=Severity.ERROR, api="demo_attention", what="a demo argument")
'''
EXAMPLES = '''    valid = (Valid("def demo_attention(x):\\n    return x\\n"),)
    invalid = (Invalid("from demo import demo_attention\\ndemo_attention(1)\\n", line=2, severity=Severity.ERROR,
                       headline="demo_attention gets a demo argument"),)
'''


@pytest.fixture(name="copy")
def copy_fixture(tmp_path: Path) -> Path:
    copy = tmp_path / "repository"
    shutil.copytree(ROOT, copy, ignore=COPIED_OUT)
    return copy


def _fill(copy: Path) -> None:
    rule = copy / "mhalint" / "rules" / "demo_rule.py"
    text = rule.read_text()
    text = text.replace('"TODO: the problem and the evidence that decides it, e.g. {api} gets {what}"',
                        '"{api} gets {what}"')
    text = re.sub(r"    valid = \(  # TODO.*?\n    \)\n    invalid = \(  # TODO.*?\n    \)\n", lambda _: EXAMPLES, text,
                  flags=re.DOTALL)
    text = text.rstrip("\n") + "\n" + VISITOR
    rule.write_text(text)
    test = copy / "tests" / "test_mha099.py"
    test.write_text(test.read_text()
                    .replace("TODO: the bug, with the evidence that establishes it",
                             "from demo import demo_attention\n        demo_attention(2)")
                    .replace("TODO: the same code, correct", "def demo_attention(x):\n            return x"))


def _register(copy: Path) -> dict[str, str]:
    """What `pip install -e .` does for the copy, without touching this environment: the copy's package first on
    the path, with its entry points."""
    project = tomllib.loads((copy / "pyproject.toml").read_text())
    info = copy / "mhalint-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mhalint\nVersion: 0.0.0\n")
    entries = project["project"]["entry-points"]["mhalint.rules"]
    (info / "entry_points.txt").write_text("[mhalint.rules]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    return {**os.environ, "PYTHONPATH": str(copy)}


@pytest.mark.slow
def test_a_scaffolded_rule_filled_in_passes_its_tests(copy):
    written = add_rule.scaffold(copy, "MHA099", "demo-rule", "A demo", r"demo_attention\b")
    assert {path.relative_to(copy).as_posix() for path in written} >= {
        "mhalint/rules/demo_rule.py", "tests/test_mha099.py", "examples/mha099_demo_rule_bad.py",
        "examples/mha099_demo_rule_fixed.py", "docs/experiments/demo_rule.py", "pyproject.toml", "mkdocs.yml"}
    _fill(copy)
    env = _register(copy)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                          "tests/test_mha099.py", "tests/test_rule_examples.py", "tests/test_docs.py", "-k",
                          "mha099 or MHA099"], cwd=copy, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert re.search(r"\b(\d+) passed", run.stdout) and " 0 passed" not in run.stdout, run.stdout[-500:]
    pages = subprocess.run([sys.executable, "scripts/docs.py"], cwd=copy, env=env, capture_output=True, text=True)
    assert pages.returncode == 0, pages.stderr
    page = (copy / "docs" / "rules" / "MHA099.md").read_text()
    assert "# demo-rule (MHA099)" in page and "demo_attention gets a demo argument" in page


def test_the_scaffold_refuses_a_code_or_a_name_taken_and_writes_nothing(copy):
    before = {path: path.read_bytes() for path in copy.rglob("*") if path.is_file()}
    for code, name in (("MHA001", "brand-new"), ("MHA099", "batch-first-default"), ("mha099", "x"),
                       ("MHA099", "Not_Kebab")):
        with pytest.raises(ValueError):
            add_rule.scaffold(copy, code, name, "A demo", "demo")
    after = {path: path.read_bytes() for path in copy.rglob("*") if path.is_file()}
    assert after == before
