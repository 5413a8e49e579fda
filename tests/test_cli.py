"""The command line as users and CI see it: output lines, summary, exit codes, selection, rule docs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from invoke import invoke

from mhalint.rule import load_rules

BAD = "import torch.nn as nn\n\nattn = nn.MultiheadAttention(64, 8)\n"
GOOD = "import torch.nn as nn\n\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n"


def run(*args: str, cwd: Path | None = None):
    return invoke(*args, cwd=cwd)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "broken.py").write_text("def f(:\n    nn.MultiheadAttention\n")
    (tmp_path / "pkg" / "late.py").write_text("x = 1\n" + BAD)
    return tmp_path


def test_reports_path_line_col_code_message_and_summary(tree: Path):
    result = run("check", "bad.py", "good.py", cwd=tree)
    lines = result.output.splitlines()
    assert lines[0].startswith("bad.py:3:8: MHA001 [warning] nn.MultiheadAttention is built without batch_first")
    assert "Fix:" not in lines[0] and len(lines) == 2  # the fix is in --output-format full and json, not here
    assert lines[-1] == "Found 1 finding (2 files checked)."
    assert result.exit_code == 1


def test_clean_files_exit_zero(tree: Path):
    result = run("check", "good.py", cwd=tree)
    assert result.exit_code == 0
    assert result.output.strip() == "All checks passed! (1 file checked)"


def test_default_path_is_cwd_and_syntax_error_does_not_stop_the_run(tree: Path):
    result = run("check", cwd=tree)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[:-1] == sorted(lines[:-1], key=lambda line: (line.split(":")[0], int(line.split(":")[1])))
    paths = [line.split(":")[0] for line in lines[:-1]]
    assert paths == ["bad.py", os.path.join("pkg", "broken.py"), os.path.join("pkg", "late.py")]
    broken = lines[1]
    assert broken.startswith(os.path.join("pkg", "broken.py") + ":1:7: MHA900 ")
    assert "syntax error" in broken
    assert lines[2].startswith(os.path.join("pkg", "late.py") + ":4:8: MHA001")


def test_syntax_error_alone_exits_one_not_two(tmp_path: Path):
    (tmp_path / "broken.py").write_text("attn = nn.MultiheadAttention(\n")
    result = run("check", str(tmp_path / "broken.py"))
    assert result.exit_code == 1
    assert "MHA900" in result.output


@pytest.mark.parametrize("args", [["--select", "MHA004"], ["--ignore", "MHA0"], ["--select", "MHA", "--ignore", "MHA001"]])
def test_selection_by_code_or_prefix_turns_rules_off(tree: Path, args):
    result = run("check", *args, "bad.py", cwd=tree)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("args", [["--select", "MHA0"], ["--select", "MHA004,MHA001"], ["--ignore", "MHA004"],
                                  ["--select", "MHA", "--ignore", "MHA00", "--select", "MHA001"]])
def test_selection_keeps_selected_rule(tree: Path, args):
    result = run("check", *args, "bad.py", cwd=tree)
    assert result.exit_code == 1
    assert "MHA001" in result.output


def test_ignoring_engine_code_hides_parse_errors(tree: Path):
    result = run("check", "--ignore", "MHA900", "pkg/broken.py", cwd=tree)
    assert result.exit_code == 0


@pytest.mark.parametrize("args, message", [
    (["check", "--select", "MHA999"], "unknown rule code or prefix 'MHA999' in --select"),
    (["check", "--ignore", "XYZ"], "unknown rule code or prefix 'XYZ' in --ignore"),
    (["check", "does-not-exist.py"], "path 'does-not-exist.py' does not exist"),
    (["rule", "MHA999"], "unknown rule code 'MHA999'"),
])
def test_usage_errors_exit_two_with_one_line(tree: Path, args, message):
    completed = subprocess.run([sys.executable, "-m", "mhalint", *args], cwd=tree, capture_output=True, text=True)
    assert completed.returncode == 2
    assert completed.stderr.strip() == f"mhalint: error: {message}" + (
        "; `mhalint rule --all` lists the codes" if "prefix" in message else
        "; `mhalint rule --all` lists them" if "rule code 'MHA" in message else "")
    assert "Traceback" not in completed.stderr + completed.stdout


def test_min_severity_info_shows_info_findings(tmp_path: Path):
    (tmp_path / "odd.py").write_text("import torch.nn as nn\nattn = nn.MultiheadAttention(60, 5, batch_first=False)\n")
    hidden = run("check", str(tmp_path / "odd.py"))
    assert hidden.exit_code == 0
    assert hidden.output.strip() == ("All checks passed! (1 file checked; 1 below warning hidden, --min-severity info "
                                     "shows them)")
    shown = run("check", "--min-severity", "info", str(tmp_path / "odd.py"))
    assert shown.exit_code == 1
    assert ":2:8: MHA004 [info] " in shown.output and "does not matter here" in shown.output


def test_rule_command_prints_documentation_sections():
    result = run("rule", "mha002")
    assert result.exit_code == 0
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety",
                    "## References"):
        assert section in result.output


def test_rule_all_lists_every_rule():
    result = run("rule", "--all")
    codes = [line.split()[0] for line in result.output.splitlines()]
    assert codes == sorted(load_rules()) and {"MHA001", "MHA002", "MHA003", "MHA004"} <= set(codes)


def test_console_script_and_module_entry_agree(tree: Path):
    script = Path(sys.executable).with_name("mhalint")
    via_script = subprocess.run([str(script), "check", "bad.py"], cwd=tree, capture_output=True, text=True)
    via_module = subprocess.run([sys.executable, "-m", "mhalint", "check", "bad.py"], cwd=tree,
                                capture_output=True, text=True)
    assert via_script.returncode == via_module.returncode == 1
    assert via_script.stdout == via_module.stdout


def test_static_run_never_imports_torch(tree: Path):
    probe = textwrap.dedent("""
        import sys
        from mhalint.cli.main import main
        try:
            main(["check", "."])
        except SystemExit:
            pass
        print("torch imported:", "torch" in sys.modules)
    """)
    completed = subprocess.run([sys.executable, "-c", probe], cwd=tree, capture_output=True, text=True)
    assert "torch imported: False" in completed.stdout


def test_gitignored_files_are_skipped(tmp_path: Path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("generated/\n")
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "bad.py").write_text(BAD)
    assert run("check", ".", cwd=tmp_path).exit_code == 0
    assert run("check", "--no-respect-gitignore", ".", cwd=tmp_path).exit_code == 1


def test_version_and_help_do_not_import_libcst_or_torch():
    probe = textwrap.dedent("""
        import sys
        from mhalint.cli.main import main
        for args in (["--version"], ["--help"]):
            try:
                main(args)
            except SystemExit:
                pass
        print("heavy imported:", sorted(m for m in ("libcst", "torch") if m in sys.modules))
    """)
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "heavy imported: []" in completed.stdout, completed.stdout + completed.stderr


def test_checking_files_without_an_attention_call_does_not_load_libcst(tmp_path: Path):
    """The pre-commit case: rules are loaded (their trigger patterns are needed) but libcst's code never runs,
    even for a file that names an API in a comment or docstring only. A file with a call loads it."""
    (tmp_path / "plain.py").write_text('"""Wraps nn.MultiheadAttention."""\nimport os  # see scaled_dot_product_attention\n')
    (tmp_path / "bad.py").write_text(BAD)
    probe = textwrap.dedent("""
        import sys
        from mhalint.cli.main import main
        try:
            main(["check", "--no-cache", sys.argv[1]])
        except SystemExit as exit:
            print("exit", exit.code)
        print("libcst loaded:", "libcst._nodes.base" in sys.modules)
    """)
    plain = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "plain.py")], capture_output=True, text=True)
    assert "exit 0" in plain.stdout and "libcst loaded: False" in plain.stdout, plain.stdout + plain.stderr
    bad = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "bad.py")], capture_output=True, text=True)
    assert "exit 1" in bad.stdout and "libcst loaded: True" in bad.stdout, bad.stdout + bad.stderr


def test_checking_one_file_loads_only_what_it_uses(tmp_path: Path):
    """A pre-commit run on one file pays for its imports: importlib.metadata (the rules' entry points are read
    directly), multiprocessing (one file is not spread over workers), the probe, the notebook reader and, with
    --no-cache, the cache are left unloaded."""
    (tmp_path / "bad.py").write_text(BAD)
    probe = textwrap.dedent("""
        import sys
        from mhalint.cli.main import console
        try:
            console()
        except SystemExit as exit:
            print("exit", exit.code)
        unused = ("importlib.metadata", "multiprocessing", "mhalint.probe.runner", "mhalint.parse.notebook",
                  "mhalint.run.cache", "mhalint.run.workers", "difflib", "secrets")
        print("loaded:", sorted(name for name in unused if name in sys.modules))
    """)
    completed = subprocess.run([sys.executable, "-c", probe, "check", "--no-cache", str(tmp_path / "bad.py")],
                               capture_output=True, text=True)
    assert "exit 1" in completed.stdout and "loaded: []" in completed.stdout, completed.stdout + completed.stderr


def test_the_console_script_collects_garbage_while_it_checks_and_main_leaves_the_collector_alone(tmp_path: Path):
    """console() keeps the collector off while modules and rules load, then freezes what they made and turns it
    back on before any file is checked (and before any other command runs); main() called in-process, as
    click's test runner does, changes nothing."""
    (tmp_path / "bad.py").write_text(BAD)
    probe = textwrap.dedent("""
        import gc, sys
        import mhalint.run.engine, mhalint.rule
        from mhalint.cli.main import console
        seen = []
        load_rules, check_paths = mhalint.rule.load_rules, mhalint.run.engine.Checker.check_paths
        def loading(*args):
            seen.append(("load_rules", gc.isenabled()))
            return load_rules(*args)
        def checking(*args, **kwargs):
            seen.append(("check_paths", gc.isenabled(), gc.get_freeze_count() > 0))
            return check_paths(*args, **kwargs)
        mhalint.rule.load_rules, mhalint.run.engine.Checker.check_paths = loading, checking
        try:
            console()
        except SystemExit:
            pass
        print(seen)
    """)
    check = subprocess.run([sys.executable, "-c", probe, "check", "--no-cache", str(tmp_path / "bad.py")],
                           capture_output=True, text=True)
    assert check.stdout.strip().splitlines()[-1] == "[('load_rules', False), ('check_paths', True, True)]", check.stderr
    listing = subprocess.run([sys.executable, "-c", probe, "rule", "--all"], capture_output=True, text=True)
    assert listing.stdout.strip().splitlines()[-1] == "[('load_rules', True)]", listing.stderr
    import gc

    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    assert run("check", "--no-cache", str(tmp_path / "bad.py")).exit_code == 1
    assert (gc.isenabled(), gc.get_freeze_count()) == (enabled, frozen)


def test_explain_adds_each_findings_explanation_to_the_full_format(tree: Path):
    short = run("check", "--no-cache", "--output-format", "full", str(tree / "bad.py"))
    explained = run("check", "--no-cache", "--output-format", "full", "--explain", str(tree / "bad.py"))
    assert short.exit_code == explained.exit_code == 1
    assert "explanation:" not in short.output
    assert "explanation:" in explained.output and "docs/torch-facts.md#" in explained.output
    assert len(explained.output) > len(short.output)


@pytest.mark.parametrize(("args", "environment", "coloured"), [
    (["--color", "always"], {}, True),
    (["--color", "never"], {"FORCE_COLOR": "1"}, False),
    ([], {}, False),  # auto, and the runner's output is not a terminal
    ([], {"FORCE_COLOR": "1"}, True),
    ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    (["--color", "always"], {"NO_COLOR": "1"}, True),  # an explicit choice wins over the environment
])
def test_colour_follows_the_option_then_no_color_and_force_color(tree: Path, monkeypatch, args, environment,
                                                                  coloured):
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    result = run("check", "--no-cache", "--output-format", "full", *args, str(tree / "bad.py"))
    assert result.exit_code == 1
    assert ("\x1b[" in result.output) is coloured
    if coloured:
        import click

        assert click.unstyle(result.output) == run("check", "--no-cache", "--output-format", "full",
                                                   "--color", "never", str(tree / "bad.py")).output


def test_color_rejects_an_unknown_choice(tree: Path):
    result = run("check", "--color", "sometimes", str(tree / "bad.py"))
    assert result.exit_code == 2 and "sometimes" in result.output


def test_python_dash_m_does_not_import_from_the_checked_directory(tmp_path: Path):
    """A repository that ships a rule plugin's metadata or a module named like one of mhalint's imports must not
    get its code run by `python -m mhalint check` started inside it."""
    marker = tmp_path / "ran"
    payload = f"open({str(marker)!r}, 'w').close()\n"
    (tmp_path / "evilrule.py").write_text(payload + "from mhalint.rule import Rule\nclass R(Rule): ...\n")
    (tmp_path / "click.py").write_text(payload)
    info = tmp_path / "evil-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mhalint.rules]\nEVIL001 = evilrule:R\n")
    (tmp_path / "bad.py").write_text(BAD)
    completed = subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", "bad.py"], cwd=tmp_path,
                               capture_output=True, text=True, env={**os.environ, "PYTHONSAFEPATH": ""})
    assert not marker.exists()
    assert completed.returncode == 1, completed.stderr
    assert "MHA001" in completed.stdout


def test_rule_explains_runtime_only_rules_and_the_engine_codes():
    from click.testing import CliRunner

    from mhalint.cli.main import main

    runner = CliRunner()
    listed = runner.invoke(main, ["rule", "--all"]).output
    assert "MHA101  fully-masked-rows" in listed and "MHA103  nan-output" in listed
    runtime = runner.invoke(main, ["rule", "MHA101"])
    assert runtime.exit_code == 0 and "## What it does" in runtime.output
    engine = runner.invoke(main, ["rule", "mha900"])
    assert engine.exit_code == 0 and engine.output.startswith("# could not parse this file (MHA900)")
    assert "--ignore MHA900" in engine.output
    unknown = runner.invoke(main, ["rule", "MHA999"])
    assert unknown.exit_code == 2 and "unknown rule code" in unknown.output


def test_rule_all_in_full_gives_every_rules_documentation():
    result = run("rule", "--all", "--output-format", "full")
    rules = load_rules()
    headings = [line for line in result.output.splitlines() if line.startswith("# ")]
    assert headings == [f"# {rule.name} ({code})" for code, rule in rules.items()]
    assert result.output.count("## What it does") == len(rules)
    documented = json.loads(run("rule", "--all", "--output-format", "json").output)
    assert [entry["code"] for entry in documented] == list(rules) and all(entry["sections"] for entry in documented)
