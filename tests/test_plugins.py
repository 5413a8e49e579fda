"""Third-party rules load exactly like the built-in ones: through the `mhalint.rules` entry-point group."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = textwrap.dedent('''
    import libcst as cst
    from mhalint.rule import Invalid, Rule, Valid

    class NoManualSoftmax(Rule):
        """
        ## What it does
        Flags `scores.softmax(-1)` written by hand next to attention code.
        """
        code = "XYZ001"
        name = "manual-softmax"
        summary = "Hand-written attention softmax"
        triggers = ("softmax",)
        valid = (Valid("x = 1\\n"),)
        invalid = (Invalid("y = scores.softmax(-1)\\n", line=1),)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "softmax":
                self.report(node, "hand-written softmax: use F.scaled_dot_product_attention")
''')


def install_plugin(site: Path, module_source: str = PLUGIN, entry: str = "XYZ001 = mhalint_xyz:NoManualSoftmax"):
    """A real (if minimal) installed distribution: a module plus a .dist-info with entry_points.txt."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "mhalint_xyz.py").write_text(module_source)
    dist = site / "mhalint_xyz-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mhalint-xyz\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[mhalint.rules]\n{entry}\n")


def mhalint(*args: str, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run([sys.executable, "-m", "mhalint", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_external_rule_is_loaded_and_run(tmp_path: Path):
    install_plugin(tmp_path / "site")
    (tmp_path / "model.py").write_text("import torch\nprobs = (q @ k.T).softmax(-1)\n")
    completed = mhalint("check", "model.py", site=tmp_path / "site", cwd=tmp_path)
    assert completed.returncode == 1
    assert completed.stdout.splitlines()[0] == (
        "model.py:2:9: XYZ001 [warning] hand-written softmax: use F.scaled_dot_product_attention")


def test_external_rule_is_listed_selectable_and_documented(tmp_path: Path):
    install_plugin(tmp_path / "site")
    (tmp_path / "model.py").write_text("probs = scores.softmax(-1)\n")
    listed = mhalint("rule", "--all", site=tmp_path / "site", cwd=tmp_path)
    assert any(line.startswith("XYZ001  manual-softmax") for line in listed.stdout.splitlines())
    assert mhalint("check", "--ignore", "XYZ", "model.py", site=tmp_path / "site", cwd=tmp_path).returncode == 0
    assert "## What it does" in mhalint("rule", "XYZ001", site=tmp_path / "site", cwd=tmp_path).stdout


def test_broken_plugin_is_a_one_line_error(tmp_path: Path):
    install_plugin(tmp_path / "site", module_source="raise ImportError('missing dependency foo')\n")
    (tmp_path / "model.py").write_text("x = 1\n")
    completed = mhalint("check", "model.py", site=tmp_path / "site", cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.strip() == ("mhalint: error: rule plugin XYZ001 (mhalint_xyz:NoManualSoftmax) failed to "
                                        "load: missing dependency foo")


def test_plugin_registered_under_the_wrong_code_is_refused(tmp_path: Path):
    install_plugin(tmp_path / "site", entry="XYZ002 = mhalint_xyz:NoManualSoftmax")
    completed = mhalint("rule", "--all", site=tmp_path / "site", cwd=tmp_path)
    assert completed.returncode == 2
    assert "registered under XYZ002 but its code is XYZ001" in completed.stderr


def test_engine_imports_no_rule_module_by_name():
    engine_dir = Path(__file__).resolve().parents[1] / "mhalint"
    for source in engine_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            assert not any(name.startswith(("mhalint.rules", "rules")) for name in names), (source, names)


API_PLUGIN = textwrap.dedent('''
    from mhalint.api import Invalid, Rule, Severity, Valid, call_target, cst, torchapi

    class SdpaEverywhere(Rule):
        """
        ## What it does
        Flags every call that reaches F.scaled_dot_product_attention, however it is spelled.
        """
        code = "XYZ002"
        name = "sdpa-everywhere"
        summary = "A call of scaled_dot_product_attention"
        triggers = (torchapi.SDPA_TRIGGER,)
        valid = (Valid("x = 1\\\\n"),)
        invalid = (Invalid("import torch.nn.functional as F\\\\nF.scaled_dot_product_attention(q, k, v)\\\\n", line=2),)

        def visit_Call(self, node: cst.Call) -> None:
            target = call_target(self.context, node, self.scope)
            if target is not None and target.api == torchapi.SDPA:
                self.report(node, "a call of scaled_dot_product_attention", severity=Severity.INFO)
''')


def test_a_rule_written_against_mhalint_api_alone_loads_and_uses_the_analyses(tmp_path: Path):
    """`mhalint.api` is the one import a rule author needs: the analyses resolve an alias of torch's function."""
    install_plugin(tmp_path / "site", API_PLUGIN, "XYZ002 = mhalint_xyz:SdpaEverywhere")
    (tmp_path / "model.py").write_text("from torch.nn import functional as fn\nsdpa = fn.scaled_dot_product_attention\n"
                                       "out = sdpa(q, k, v)\n")
    completed = mhalint("check", "--select", "XYZ002", "--min-severity", "info", "model.py", site=tmp_path / "site",
                        cwd=tmp_path)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.splitlines()[0] == "model.py:3:7: XYZ002 [info] a call of scaled_dot_product_attention"


@pytest.mark.parametrize("module", ["mhalint.api", "mhalint.lazy"])
def test_importing_the_rule_api_loads_neither_libcst_nor_torch(module: str):
    """`mhalint.lazy` is where rules written before `mhalint.api` take libcst from: it still gives the lazy module."""
    probe = (f"import sys, {module} as m; print('libcst' in sys.modules, 'torch' in sys.modules); "
             "print(m.cst.Call.__module__)")
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert completed.stdout.split() == ["False", "False", "libcst._nodes.expression"]
