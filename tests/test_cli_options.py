"""The options a ruff user reaches for (issue 16, items 4, 6-9, 16), through the real `mhalint` process: the
`[*]` mark and the fix counts, `--statistics`, `--show-fixes`, `--output-file`, `-q`, `-s`, `-v`,
`--exit-non-zero-on-fix`, `--add-noqa`, unused `# noqa` directives (MHA904), `rule NAME`, colour in the concise
format, the hidden-severity hint, `probe` on json-lines and SARIF, and output errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

# MHA007 (warning, safe fix): the weights are computed and discarded.
SAFE = ("import torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.attn = nn.MultiheadAttention(64, 8, batch_first=True)\n\n    def forward(self, x):\n"
        "        return self.attn(x, x, x)[0]\n")
# MHA001 (error, unsafe fix): batch-first data into a sequence-first module.
UNSAFE = ("import torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
          "        self.attn = nn.MultiheadAttention(64, 8)\n\n    def forward(self, x):\n        B, T, C = x.shape\n"
          "        return self.attn(x, x, x, need_weights=False)[0]\n")
WARNING = "import torch.nn as nn\n\nattn = nn.MultiheadAttention(64, 8)\n"  # MHA001 (warning, no fix)
INFO = "import torch.nn as nn\nattn = nn.MultiheadAttention(60, 5, batch_first=False)\n"  # MHA004 (info)


def mhalint(*args: str, cwd: Path, input: str | None = None, env: dict | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m mhalint ARGS` in `cwd`, with no colour variables from the environment unless `env` sets them."""
    environment = {name: value for name, value in os.environ.items() if name not in ("NO_COLOR", "FORCE_COLOR")}
    completed = subprocess.run([sys.executable, "-m", "mhalint", *args], cwd=cwd, input=input, capture_output=True,
                               text=True, timeout=timeout, env={**environment, **(env or {})})
    assert "Traceback" not in completed.stdout + completed.stderr, completed.stderr
    return completed


def tree(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def lines_of(code: str, stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if f": {code} [" in line]


# ---- 6: --stdin-filename alone reads standard input ---------------------------------------------------------------
def test_stdin_filename_without_a_dash_reads_standard_input(tmp_path: Path):
    tree(tmp_path, **{"other.py": UNSAFE})
    completed = mhalint("check", "--no-cache", "--stdin-filename", "foo.py", cwd=tmp_path, input=WARNING)
    assert completed.returncode == 1
    assert completed.stdout.splitlines()[0].startswith("foo.py:3:8: MHA001 [warning] ")
    assert "other.py" not in completed.stdout  # the directory was not checked
    assert completed.stdout.splitlines()[-1] == "Found 1 finding (1 file checked)."


# ---- 7: [*], the fix counts, --unsafe-fixes alone, --diff's last line ---------------------------------------------
def test_fixable_findings_are_marked_in_concise_and_full(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE, "unsafe.py": UNSAFE})
    concise = mhalint("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path).stdout
    assert lines_of("MHA007", concise)[0].startswith("safe.py:10:16: MHA007 [warning] [*] nn.MultiheadAttention")
    assert "[*]" not in lines_of("MHA001", concise)[0]  # an unsafe fix is not what --fix applies
    unsafe = mhalint("check", "--no-cache", "--output-format", "concise", "--unsafe-fixes", ".", cwd=tmp_path).stdout
    assert lines_of("MHA001", unsafe)[0].startswith("unsafe.py:7:21: MHA001 [error] [*] ")
    full = mhalint("check", "--no-cache", "--output-format", "full", ".", cwd=tmp_path).stdout
    assert "\nMHA007 [warning] [*] nn.MultiheadAttention computes" in "\n" + full
    assert "\nMHA001 [error] nn.MultiheadAttention gets batch-first" in "\n" + full


def test_the_summary_counts_the_unsafe_fixes_it_hides(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE, "unsafe.py": UNSAFE})
    both = mhalint("check", "--no-cache", ".", cwd=tmp_path)
    assert both.stdout.splitlines()[-1] == ("Found 2 findings (2 files checked). 1 fixable with --fix (1 hidden fix "
                                            "can be enabled with --unsafe-fixes).")
    with_unsafe = mhalint("check", "--no-cache", "--unsafe-fixes", ".", cwd=tmp_path)
    assert with_unsafe.stdout.splitlines()[-1] == "Found 2 findings (2 files checked). 2 fixable with --fix."
    only_unsafe = mhalint("check", "--no-cache", "unsafe.py", cwd=tmp_path)
    assert only_unsafe.stdout.splitlines()[-1] == ("Found 1 finding (1 file checked). No fixes available (1 hidden "
                                                   "fix can be enabled with --unsafe-fixes).")


def test_diff_ends_with_what_it_would_fix(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE, "unsafe.py": UNSAFE})
    safe_only = mhalint("check", "--no-cache", "--diff", ".", cwd=tmp_path)
    assert safe_only.returncode == 1 and safe_only.stdout.startswith("--- safe.py\n")
    assert safe_only.stderr.splitlines()[-1] == ("Would fix 1 finding (1 hidden fix can be enabled with "
                                                 "--unsafe-fixes).")
    both = mhalint("check", "--no-cache", "--diff", "--unsafe-fixes", ".", cwd=tmp_path)
    assert both.stderr.splitlines()[-1] == "Would fix 2 findings."
    assert (tmp_path / "safe.py").read_text() == SAFE and (tmp_path / "unsafe.py").read_text() == UNSAFE
    stdin = mhalint("check", "--diff", "--stdin-filename", "safe.py", "-", cwd=tmp_path, input=SAFE)
    assert stdin.returncode == 1 and stdin.stdout.startswith("--- safe.py\n")
    assert stdin.stderr.splitlines()[-1] == "Would fix 1 finding."


# ---- 8: --statistics, --show-fixes, --output-file, -q, -s, -v, --exit-non-zero-on-fix ------------------------------
def test_statistics_count_each_code_most_first(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE, "safe2.py": SAFE, "unsafe.py": UNSAFE, "warn.py": WARNING})
    completed = mhalint("check", "--no-cache", "--statistics", ".", cwd=tmp_path)
    assert completed.returncode == 1
    assert completed.stdout.splitlines() == [
        "2\tMHA001\t[ ] batch-first-default",
        "2\tMHA007\t[*] weights-discarded",
        "Found 4 findings (4 files checked). 2 fixable with --fix (1 hidden fix can be enabled with --unsafe-fixes).",
    ]
    as_json = json.loads(mhalint("check", "--no-cache", "--statistics", "--unsafe-fixes", "--output-format", "json",
                                 ".", cwd=tmp_path).stdout)
    assert as_json == [
        {"code": "MHA001", "name": "batch-first-default", "count": 2, "fixable": True, "fixable_count": 1},
        {"code": "MHA007", "name": "weights-discarded", "count": 2, "fixable": True, "fixable_count": 2},
    ]


def test_show_fixes_lists_what_was_fixed_by_file_and_code(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE, "unsafe.py": UNSAFE})
    completed = mhalint("check", "--no-cache", "--fix", "--show-fixes", ".", cwd=tmp_path)
    assert completed.stdout.splitlines()[-4:] == [
        "Fixed 1 finding:",
        "- safe.py:",
        "    1 × MHA007 (weights-discarded)",
        "Found 1 finding (2 files checked). Fixed 1 finding. 1 hidden fix can be enabled with --unsafe-fixes.",
    ]
    assert "need_weights=False" in (tmp_path / "safe.py").read_text()
    alone = mhalint("check", "--no-cache", "--show-fixes", ".", cwd=tmp_path)  # as ruff: nothing fixed, nothing listed
    assert alone.returncode == 1 and alone.stderr == ""
    assert alone.stdout.splitlines()[-1].startswith("Found 1 finding (2 files checked).")


@pytest.mark.parametrize("output_format", ["concise", "json", "sarif"])
def test_output_file_gets_what_standard_output_would(tmp_path: Path, output_format: str):
    tree(tmp_path, **{"safe.py": SAFE, "warn.py": WARNING})
    printed = mhalint("check", "--no-cache", "--output-format", output_format, ".", cwd=tmp_path)
    written = mhalint("check", "--no-cache", "--output-format", output_format, "-o", "reports/out.txt", ".",
                      cwd=tmp_path)
    assert written.returncode == printed.returncode == 1
    assert written.stdout == "" and written.stderr == ""
    assert (tmp_path / "reports" / "out.txt").read_text() == printed.stdout  # the folder is created, as ruff does


def test_an_output_file_that_cannot_be_written_is_one_line_and_exit_two(tmp_path: Path):
    tree(tmp_path, **{"warn.py": WARNING})
    completed = mhalint("check", "--no-cache", "--output-file", "warn.py/out.txt", ".", cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr == "mhalint: error: cannot write the report to warn.py/out.txt: Not a directory\n"


def test_quiet_prints_only_the_findings_and_silent_nothing(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE, "warn.py": WARNING})
    quiet = mhalint("check", "--no-cache", "-q", ".", cwd=tmp_path)
    assert quiet.returncode == 1 and len(quiet.stdout.splitlines()) == 2
    assert all(re.match(r"\w+\.py:\d+:\d+: MHA", line) for line in quiet.stdout.splitlines())
    quiet_diff = mhalint("check", "--no-cache", "--quiet", "--diff", ".", cwd=tmp_path)
    assert quiet_diff.stdout.startswith("--- safe.py") and quiet_diff.stderr == ""  # no "Would fix" line
    for flag in ("-s", "--silent"):
        silent = mhalint("check", "--no-cache", flag, ".", cwd=tmp_path)
        assert (silent.returncode, silent.stdout, silent.stderr) == (1, "", "")
    clean = mhalint("check", "--no-cache", "--silent", "--select", "MHA005", ".", cwd=tmp_path)
    assert (clean.returncode, clean.stdout) == (0, "")


def test_verbose_says_which_configuration_and_how_many_files(tmp_path: Path):
    tree(tmp_path, **{"warn.py": WARNING, "pyproject.toml": "[tool.mhalint]\nignore = ['MHA004']\n"})
    completed = mhalint("check", "--no-cache", "-v", ".", cwd=tmp_path)
    assert completed.stderr.startswith(f"mhalint: configuration: {tmp_path / 'pyproject.toml'}")
    assert re.search(r"^mhalint: 1 file checked in \d+\.\d\d s$", completed.stderr, re.M), completed.stderr
    assert mhalint("check", "--no-cache", ".", cwd=tmp_path).stderr == ""


def test_exit_non_zero_on_fix_exits_one_when_a_file_was_fixed(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE})
    assert mhalint("check", "--no-cache", "--fix", ".", cwd=tmp_path).returncode == 0  # fixed, nothing left
    (tmp_path / "safe.py").write_text(SAFE)
    fixed = mhalint("check", "--no-cache", "--fix", "--exit-non-zero-on-fix", ".", cwd=tmp_path)
    assert fixed.returncode == 1 and fixed.stdout.splitlines()[-1].endswith("Fixed 1 finding.")
    again = mhalint("check", "--no-cache", "--fix", "--exit-non-zero-on-fix", ".", cwd=tmp_path)
    assert again.returncode == 0  # nothing to fix the second time


# ---- 8: --add-noqa and unused directives (MHA904) -----------------------------------------------------------------
def test_add_noqa_adds_the_codes_and_keeps_what_the_line_has(tmp_path: Path):
    source = ("import torch.nn as nn\n\n"
              "a = nn.MultiheadAttention(64, 8)\n"
              "b = nn.MultiheadAttention(64, 8)  # noqa: E501\n"
              "c = nn.MultiheadAttention(64, 8)  # the first head\r\n"
              "d = nn.MultiheadAttention(64, 8)  # noqa: MHA004\n")
    (tmp_path / "model.py").write_bytes(source.encode())
    completed = mhalint("check", "--no-cache", "--add-noqa", ".", cwd=tmp_path)
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, "", "Added 4 noqa directives.\n")
    assert (tmp_path / "model.py").read_bytes().decode() == (
        "import torch.nn as nn\n\n"
        "a = nn.MultiheadAttention(64, 8)  # noqa: MHA001\n"
        "b = nn.MultiheadAttention(64, 8)  # noqa: E501, MHA001\n"
        "c = nn.MultiheadAttention(64, 8)  # the first head  # noqa: MHA001\r\n"
        "d = nn.MultiheadAttention(64, 8)  # noqa: MHA001, MHA004\n")
    after = mhalint("check", "--no-cache", "--select", "MHA001", ".", cwd=tmp_path)
    assert after.returncode == 0 and after.stdout.startswith("All checks passed!")


def test_add_noqa_leaves_a_line_that_cannot_end_in_a_comment(tmp_path: Path):
    source = "import torch.nn as nn\n\nattn = nn.MultiheadAttention(64, 8) if \\\n    True else None\n"
    (tmp_path / "model.py").write_text(source)
    completed = mhalint("check", "--no-cache", "--add-noqa", ".", cwd=tmp_path)
    assert completed.stderr == "Added 0 noqa directives.\n"
    assert (tmp_path / "model.py").read_text() == source


def test_a_noqa_that_suppresses_nothing_is_reported_and_fixed(tmp_path: Path):
    source = ("import torch.nn as nn\n\n"
              "attn = nn.MultiheadAttention(64, 8, batch_first=True)  # noqa: MHA001\n"
              "other = nn.MultiheadAttention(64, 8)  # noqa: MHA001, MHA004, E501\n"
              "x = 1  # noqa: MHA001  # why\n"
              "y = 2  # noqa: MHA904, MHA001\n"
              "z = 3  # noqa: XYZ123, E501\n")
    tree(tmp_path, **{"model.py": source})
    completed = mhalint("check", "--no-cache", ".", cwd=tmp_path)
    assert completed.returncode == 1
    assert lines_of("MHA904", completed.stdout) == [
        "model.py:3:56: MHA904 [warning] [*] unused noqa directive: no MHA001 finding on this line to suppress",
        "model.py:4:39: MHA904 [warning] [*] unused noqa directive: no MHA004 finding on this line to suppress",
        "model.py:5:8: MHA904 [warning] [*] unused noqa directive: no MHA001 finding on this line to suppress",
    ]  # another linter's codes, unknown codes and a directive naming MHA904 are left alone
    fixed = mhalint("check", "--no-cache", "--fix", ".", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout
    assert (tmp_path / "model.py").read_text() == (
        "import torch.nn as nn\n\n"
        "attn = nn.MultiheadAttention(64, 8, batch_first=True)\n"
        "other = nn.MultiheadAttention(64, 8)  # noqa: MHA001, E501\n"
        "x = 1  # why\n"
        "y = 2  # noqa: MHA904, MHA001\n"
        "z = 3  # noqa: XYZ123, E501\n")


def test_unused_noqa_judges_only_the_rules_that_run_and_is_selected_like_one(tmp_path: Path):
    tree(tmp_path, **{"model.py": "import torch.nn as nn\n\n"
                                  "attn = nn.MultiheadAttention(64, 8)  # noqa: MHA001, MHA004\n"})
    only_mha001 = mhalint("check", "--no-cache", "--select", "MHA001,MHA904", ".", cwd=tmp_path)
    assert only_mha001.returncode == 0, only_mha001.stdout  # MHA004 did not run: its code is not judged
    every_rule = mhalint("check", "--no-cache", ".", cwd=tmp_path)
    assert lines_of("MHA904", every_rule.stdout) == [
        "model.py:3:38: MHA904 [warning] [*] unused noqa directive: no MHA004 finding on this line to suppress"]
    assert mhalint("check", "--no-cache", "--ignore", "MHA904", ".", cwd=tmp_path).returncode == 0
    assert mhalint("check", "--no-cache", "--select", "MHA0", ".", cwd=tmp_path).returncode == 0


def test_a_bare_noqa_is_reported_only_when_it_suppresses_nothing_and_only_at_info(tmp_path: Path):
    tree(tmp_path, **{"model.py": "import torch.nn as nn  # noqa\n\nattn = nn.MultiheadAttention(64, 8)  # noqa\n"})
    default = mhalint("check", "--no-cache", ".", cwd=tmp_path)
    assert default.returncode == 0
    assert default.stdout == ("All checks passed! (1 file checked; 1 below warning hidden, --min-severity info "
                              "shows them)\n")
    shown = mhalint("check", "--no-cache", "--min-severity", "info", ".", cwd=tmp_path)
    assert lines_of("MHA904", shown.stdout) == [
        "model.py:1:24: MHA904 [info] unused blanket noqa directive: no mhalint finding on this line to suppress"]
    assert "(1 hidden fix can be enabled with --unsafe-fixes)" in shown.stdout  # it may serve another linter
    mhalint("check", "--no-cache", "--min-severity", "info", "--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert (tmp_path / "model.py").read_text() == ("import torch.nn as nn\n\n"
                                                  "attn = nn.MultiheadAttention(64, 8)  # noqa\n")


def test_rule_explains_mha904_and_takes_a_rule_name(tmp_path: Path):
    unused = mhalint("rule", "MHA904", cwd=tmp_path)
    assert unused.returncode == 0 and unused.stdout.startswith("# unused noqa directive (MHA904)")
    assert mhalint("rule", "unused-noqa", cwd=tmp_path).stdout == unused.stdout
    by_name = mhalint("rule", "batch-first-default", cwd=tmp_path)
    assert by_name.returncode == 0 and by_name.stdout == mhalint("rule", "MHA001", cwd=tmp_path).stdout
    assert json.loads(mhalint("rule", "--output-format", "json", "Batch-First-Default", cwd=tmp_path).stdout)[
        "code"] == "MHA001"
    unknown = mhalint("rule", "batch-first", cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1


@pytest.mark.parametrize(("args", "environment", "coloured"), [
    (["--color", "always"], {}, True),
    ([], {"FORCE_COLOR": "1"}, True),
    ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ([], {}, False),  # auto: a pipe is not a terminal
    (["--color", "never"], {"FORCE_COLOR": "1"}, False),
])
def test_colour_options_work_for_the_concise_format_too(tmp_path: Path, args, environment, coloured):
    tree(tmp_path, **{"safe.py": SAFE})
    completed = mhalint("check", "--no-cache", "--output-format", "concise", *args, ".", cwd=tmp_path,
                        env=environment)
    assert ("\x1b[" in completed.stdout) is coloured
    plain = mhalint("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path).stdout
    assert re.sub(r"\x1b\[[0-9;]*m", "", completed.stdout) == plain


# ---- 9: the hidden count names the severity that shows them -------------------------------------------------------
def test_the_hidden_count_names_the_lowest_severity_that_shows_them(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE, "warn.py": WARNING, "unsafe.py": UNSAFE})
    warnings = mhalint("check", "--no-cache", "--min-severity", "error", ".", cwd=tmp_path)
    assert warnings.stdout.splitlines()[-1].startswith(
        "Found 1 finding (3 files checked; 2 below error hidden, --min-severity warning shows them).")
    (tmp_path / "info.py").write_text(INFO)
    with_info = mhalint("check", "--no-cache", "--min-severity", "error", ".", cwd=tmp_path)
    assert "; 3 below error hidden, --min-severity info shows them)." in with_info.stdout.splitlines()[-1]


# ---- 4: output errors ---------------------------------------------------------------------------------------------
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_is_one_line_and_exit_two(tmp_path: Path):
    tree(tmp_path, **{"warn.py": WARNING})
    with open("/dev/full", "w") as full:
        completed = subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", "."], cwd=tmp_path,
                                   stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert completed.returncode == 2
    assert completed.stderr == ("mhalint: error: cannot write the report to standard output: No space left on "
                                "device\n")


@pytest.mark.parametrize(("output_format", "source", "status"), [
    ("concise", WARNING, 1), ("full", WARNING, 1), ("json", WARNING, 1), ("concise", "x = 1\n", 0)])
def test_a_reader_that_closes_the_pipe_ends_the_output_quietly(tmp_path: Path, output_format: str, source: str,
                                                               status: int):
    tree(tmp_path, **{f"m{number}.py": source for number in range(3)})
    process = subprocess.Popen([sys.executable, "-m", "mhalint", "check", "--no-cache", "--output-format",
                                output_format, "."], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # as `| head -0` would, before mhalint has written anything
    _, stderr = process.communicate(timeout=120)
    assert stderr == b""  # no traceback, no "Exception ignored", no "Broken pipe" message
    assert process.returncode == status  # the run's own status, as ruff's: not 1 for a clean run


# ---- 16: the probe reads json-lines and SARIF ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("output_format", ["json-lines", "sarif"])
def test_probe_reads_json_lines_and_sarif_and_counts_each_outcome(tmp_path: Path, output_format: str):
    pytest.importorskip("torch")
    examples = Path(__file__).resolve().parents[1] / "examples"
    names = ["mha001_batch_first_default_bad.py", "mha004_odd_num_heads_bad.py"]
    for name in names:
        (tmp_path / name).write_text((examples / name).read_text())
    saved = mhalint("check", "--no-cache", "--output-format", output_format, *names, cwd=tmp_path)
    from_json = mhalint("check", "--no-cache", "--output-format", "json", *names, cwd=tmp_path)
    expected = mhalint("probe", "-", cwd=tmp_path, input=from_json.stdout, timeout=300)
    probed = mhalint("probe", "-", cwd=tmp_path, input=saved.stdout, timeout=300)
    assert probed.returncode == 1, probed.stderr
    assert probed.stdout == expected.stdout
    assert probed.stdout.splitlines()[-1] == ("Probed 2 findings. Probe: 2 confirmed, 0 reproduced, 0 not confirmed, "
                                              "0 skipped.")


def test_probe_of_an_empty_json_lines_report_probes_nothing(tmp_path: Path):
    completed = mhalint("probe", "-", cwd=tmp_path, input="")
    assert completed.returncode == 0
    assert completed.stdout == "Probed 0 findings. Probe: 0 confirmed, 0 reproduced, 0 not confirmed, 0 skipped.\n"


# ---- 4b: concise and full are printed file by file ------------------------------------------------------------------
HOLDING_PLUGIN = '''
import os
import time

from mhalint.rule import Invalid, Rule, Valid


class HoldsTheRun(Rule):
    """
    ## What it does
    On a file that calls `hold_here()`, writes a file named `held`, then waits until a file named `release`
    exists (at most ten minutes).
    """
    code = "XYZ201"
    name = "holds-the-run"
    summary = "Holds the run until released"
    triggers = ("hold_here",)
    valid = (Valid("x = 1\\n"),)
    invalid = (Invalid("hold_here()\\n", line=1),)

    def visit_Call(self, node):
        if getattr(node.func, "value", None) != "hold_here":
            return
        open("held", "w").close()
        deadline = time.monotonic() + 600
        while not os.path.exists("release") and time.monotonic() < deadline:
            time.sleep(0.05)
        self.report(node, "held")
'''


def _with_holding_plugin(tmp_path: Path) -> dict:
    site = tmp_path / "site"
    dist = site / "mhalint_hold-0.1.dist-info"
    dist.mkdir(parents=True)
    (site / "mhalint_hold.py").write_text(HOLDING_PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mhalint-hold\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mhalint.rules]\nXYZ201 = mhalint_hold:HoldsTheRun\n")
    environment = {name: value for name, value in os.environ.items() if name not in ("NO_COLOR", "FORCE_COLOR")}
    return {**environment, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


@pytest.mark.parametrize(("output_format", "first"), [("concise", "a.py:3:8: MHA001 [warning] "),
                                                      ("full", "MHA001 [warning] ")])
def test_findings_are_printed_while_a_later_file_is_still_being_checked(tmp_path: Path, output_format: str,
                                                                       first: str):
    import threading

    (tmp_path / "project").mkdir()
    project = tree(tmp_path / "project", **{"a.py": WARNING, "z.py": "hold_here()\n"})
    process = subprocess.Popen([sys.executable, "-m", "mhalint", "check", "--no-cache", "--jobs", "1",
                                "--output-format", output_format, "."], cwd=project, env=_with_holding_plugin(tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=600)  # a hang guard: the line comes as soon as a.py is done
        assert lines and lines[0].startswith(first), lines
        assert process.poll() is None  # z.py is still being checked: nothing has released it yet
    finally:
        (project / "release").write_text("")
        rest, stderr = process.communicate(timeout=120)
    assert stderr == "" and process.returncode == 1
    assert "z.py:1:1: XYZ201" in rest or "XYZ201 [warning] held" in rest
    assert rest.splitlines()[-1] == "Found 2 findings (2 files checked)."


def test_machine_formats_and_runs_that_need_every_finding_are_printed_whole(tmp_path: Path):
    (tmp_path / "project").mkdir()
    project = tree(tmp_path / "project", **{"a.py": WARNING, "z.py": "hold_here()\n", "release": ""})
    environment = _with_holding_plugin(tmp_path)
    for args in (["--output-format", "json"], ["--statistics"], ["--output-format", "sarif"]):
        completed = subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", *args, "."],
                                   cwd=project, env=environment, capture_output=True, text=True, timeout=120)
        assert completed.returncode == 1 and completed.stderr == "", completed.stderr
        if args[-1] in ("json", "sarif"):
            json.loads(completed.stdout)  # one document
    streamed = subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", "--output-format", "concise",
                               "."], cwd=project, env=environment, capture_output=True, text=True, timeout=120)
    assert [line.split(":")[0] for line in streamed.stdout.splitlines()[:-1]] == ["a.py", "z.py"]  # path order


def _check_with_a_terminal_for_stderr(project: Path, environment: dict, *args: str) -> tuple[str, str, int]:
    """`mhalint check` with standard error on a pseudo-terminal (as in a shell) and standard output on a pipe; the
    file z.py holds the run for 2.5 s, past the progress line's delay. (stdout, what the terminal got, exit)."""
    import pty
    import threading

    primary, secondary = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "mhalint", "check", "--no-cache", "--jobs", "1", *args, "."],
                               cwd=project, env={**environment, "TERM": "xterm"}, stdout=subprocess.PIPE,
                               stderr=secondary, text=True)
    os.close(secondary)
    received = bytearray()

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the process closed its end
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    _release_past_the_delay(project)
    stdout, _ = process.communicate(timeout=600)
    reader.join(timeout=60)
    os.close(primary)
    for name in ("held", "release"):
        (project / name).unlink()
    return stdout, received.decode(), process.returncode


def _release_past_the_delay(project: Path) -> None:
    """Release the held run 2.5 s after the hold began, so that it has run past the progress line's 2 s delay
    however slowly it started (counted from the hold, not from the process's start, which a busy machine
    stretches)."""
    import threading

    def release() -> None:
        while not (project / "held").exists():
            time.sleep(0.01)
        time.sleep(2.5)
        (project / "release").write_text("")

    threading.Thread(target=release, daemon=True).start()


def test_a_long_run_shows_a_progress_line_on_a_terminal_and_erases_it(tmp_path: Path):
    (tmp_path / "project").mkdir()
    project = tree(tmp_path / "project", **{"a.py": WARNING, "z.py": "hold_here()\n"})
    environment = _with_holding_plugin(tmp_path)
    stdout, terminal, code = _check_with_a_terminal_for_stderr(project, environment, "--output-format", "concise")
    assert code == 1 and stdout.splitlines()[-1] == "Found 2 findings (2 files checked)."
    assert "\x1b" not in stdout  # the report itself is untouched
    assert "] 2/2 files, 2 findings" in terminal and terminal.endswith("\r\x1b[K")  # drawn, then erased
    for args in (["-q"], ["--output-format", "json"], ["--output-format", "sarif"]):
        stdout, terminal, code = _check_with_a_terminal_for_stderr(project, environment, *args)
        assert code == 1 and terminal == "", args


def test_no_progress_line_when_standard_error_is_not_a_terminal(tmp_path: Path):
    (tmp_path / "project").mkdir()
    project = tree(tmp_path / "project", **{"a.py": WARNING, "z.py": "hold_here()\n"})
    _release_past_the_delay(project)  # a run past the delay
    completed = subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", "--jobs", "1", "."],
                               cwd=project, env={**_with_holding_plugin(tmp_path), "TERM": "xterm"},
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 1 and completed.stderr == ""


def test_the_progress_line_waits_for_its_delay_redraws_at_most_ten_times_a_second_and_fits_the_width():
    import io

    from mhalint.cli.progress import Progress

    now = [0.0]
    stream = io.StringIO()
    progress = Progress(stream, delay=2.0, clock=lambda: now[0])
    progress.update(1, 40, 0)
    assert stream.getvalue() == ""  # a short run shows nothing
    now[0] = 2.0
    progress.update(10, 40, 3)
    now[0] = 2.05
    progress.update(11, 40, 3)  # within 0.1 s of the last draw
    assert stream.getvalue().count("\r\x1b[K") == 1 and stream.getvalue().endswith("] 10/40 files, 3 findings")
    progress.clear()
    progress.clear()  # nothing drawn: nothing to erase
    assert stream.getvalue().endswith("findings\r\x1b[K") and stream.getvalue().count("\r\x1b[K") == 2
    assert progress.line(80) == "[" + "#" * 11 + "-" * 29 + "] 11/40 files, 3 findings"  # 11 of 40 in 40 cells
    assert progress.line(60) == "[" + "#" * 9 + "-" * 25 + "] 11/40 files, 3 findings"  # 60 characters
    assert progress.line(20) == "11/40 files, 3 findi"  # no room for the bar


def test_the_progress_line_and_the_summary_write_numbers_alike():
    import io

    from mhalint.cli import summary
    from mhalint.cli.progress import Progress
    from mhalint.finding import Severity

    progress = Progress(io.StringIO(), delay=0.0, clock=lambda: 0.0)
    progress.update(1234, 6606, 1000)
    assert progress.line(80).endswith("] 1234/6606 files, 1000 findings")
    assert summary.found(1000, 6606, [], Severity.WARNING, 6477) == (
        "Found 1000 findings (6606 files checked, 6477 of them not parsed: no attention API in their code, "
        "--parse-all checks their syntax).")


# ---- issue 39 item 4: ruff's --fix-only, --ignore-noqa, --isolated, --cache-dir; --show-settings lists MHA904 -----
def test_fix_only_fixes_and_reports_only_what_it_fixed(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE, "unsafe.py": UNSAFE})
    completed = mhalint("check", "--no-cache", "--fix-only", ".", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["Fixed 1 finding. 1 hidden fix can be enabled with --unsafe-fixes."]
    assert "need_weights=False" in (tmp_path / "safe.py").read_text()
    again = mhalint("check", "--no-cache", "--fix-only", "--exit-non-zero-on-fix", "--unsafe-fixes", ".",
                    cwd=tmp_path)
    assert (again.returncode, again.stdout.splitlines()) == (1, ["Fixed 1 finding."])
    assert "batch_first=True" in (tmp_path / "unsafe.py").read_text()


@pytest.mark.parametrize("cache", [["--no-cache"], []], ids=["no cache", "cache"])
def test_ignore_noqa_reports_what_the_directives_would_suppress(tmp_path: Path, cache):
    tree(tmp_path, **{"model.py": WARNING.replace("8)\n", "8)  # noqa: MHA001\n")})
    assert mhalint("check", *cache, ".", cwd=tmp_path).returncode == 0  # and fills the cache, when there is one
    ignored = mhalint("check", *cache, "--ignore-noqa", ".", cwd=tmp_path)
    assert ignored.returncode == 1 and len(lines_of("MHA001", ignored.stdout)) == 1
    assert lines_of("MHA904", ignored.stdout) == []  # no directive is judged unused when none is read
    assert mhalint("check", *cache, ".", cwd=tmp_path).returncode == 0  # its cache is not the other runs'


def test_isolated_reads_no_configuration_file(tmp_path: Path):
    tree(tmp_path, **{"model.py": WARNING, "pyproject.toml": '[tool.mhalint]\nignore = ["MHA001"]\n'})
    assert mhalint("check", "--no-cache", ".", cwd=tmp_path).returncode == 0
    isolated = mhalint("check", "--no-cache", "--isolated", ".", cwd=tmp_path)
    assert isolated.returncode == 1 and len(lines_of("MHA001", isolated.stdout)) == 1
    both = mhalint("check", "--isolated", "--config", "pyproject.toml", ".", cwd=tmp_path)
    assert (both.returncode, both.stderr) == (2, "mhalint: error: --isolated reads no configuration file: use it "
                                                 "without --config FILE\n")
    inline = mhalint("check", "--no-cache", "--isolated", "--config", "ignore = ['MHA001']", ".", cwd=tmp_path)
    assert inline.returncode == 0  # a setting given inline is no file: --isolated takes it


def test_config_takes_settings_as_key_value_over_the_files(tmp_path: Path):
    tree(tmp_path, **{"model.py": WARNING + INFO.split("\n", 1)[1], "pyproject.toml": '[tool.mhalint]\nignore = ["MHA001"]\n'})
    assert mhalint("check", "--no-cache", ".", cwd=tmp_path).returncode == 0
    shown = mhalint("check", "--no-cache", "--config", "ignore = []", "--config", "min-severity = 'info'", ".",
                    cwd=tmp_path)
    assert shown.returncode == 1 and lines_of("MHA001", shown.stdout) and lines_of("MHA004", shown.stdout)
    settings = mhalint("check", "--show-settings", "--config", "probe.timeout = 5", ".", cwd=tmp_path).stdout
    assert "probe.timeout       = 5  # --config" in settings and 'ignore              = ["MHA001"]' in settings
    wrong = mhalint("check", "--config", "min-severity = 'loud'", ".", cwd=tmp_path)
    assert (wrong.returncode, wrong.stderr) == (2, "mhalint: error: --config: `min-severity` must be one of info, "
                                                   "warning, error\n")
    broken = mhalint("check", "--config", "min-severity = ", ".", cwd=tmp_path)
    assert broken.returncode == 2 and "is neither a file nor a TOML `key = value` setting" in broken.stderr


def test_cache_dir_puts_the_cache_where_it_says(tmp_path: Path):
    project = tmp_path / "project"
    project.mkdir()
    tree(project, **{"model.py": WARNING, "pyproject.toml": "[tool.mhalint]\n"})
    chosen = tmp_path / "elsewhere"
    first = mhalint("check", "--cache-dir", str(chosen), ".", cwd=project)
    assert first.returncode == 1 and len(list(chosen.glob("findings-*.json"))) == 1
    assert not (project / ".mhalint_cache").exists()
    assert mhalint("check", "--cache-dir", str(chosen), ".", cwd=project).stdout == first.stdout


def test_show_settings_lists_the_unused_noqa_check_among_what_is_enabled(tmp_path: Path):
    shown = mhalint("check", "--show-settings", "--isolated", ".", cwd=tmp_path).stdout.splitlines()[-1]
    assert shown.startswith("# enabled rules: MHA001, ") and shown.endswith(", MHA904")
    without = mhalint("check", "--show-settings", "--isolated", "--ignore", "MHA904", ".", cwd=tmp_path)
    assert "MHA904" not in without.stdout.splitlines()[-1]


@pytest.mark.parametrize(("settings", "fixed"), [
    ("", {"safe.py"}),
    ('unfixable = ["MHA007"]\n', set()),
    ('fixable = ["MHA00"]\nunfixable = ["MHA007"]\n', set()),
    ('fixable = ["MHA001"]\n', set()),
    ('fixable = []\n', set()),
    ('fixable = ["MHA007"]\n', {"safe.py"}),
])
def test_fixable_and_unfixable_decide_which_fixes_are_offered(tmp_path: Path, settings: str, fixed: set):
    tree(tmp_path, **{"safe.py": SAFE, "pyproject.toml": f"[tool.mhalint]\n{settings}"})
    marked = mhalint("check", "--no-cache", ".", cwd=tmp_path)
    assert bool(fixed) == ("[*]" in marked.stdout)  # no [*] on a finding whose fix is not offered
    mhalint("check", "--no-cache", "--fix", ".", cwd=tmp_path)
    assert {name for name in ("safe.py",) if "need_weights=False" in (tmp_path / name).read_text()} == fixed
    assert ("fixable" in mhalint("check", "--show-settings", ".", cwd=tmp_path).stdout)


def test_an_unknown_code_in_unfixable_is_an_error(tmp_path: Path):
    tree(tmp_path, **{"safe.py": SAFE, "pyproject.toml": '[tool.mhalint]\nunfixable = ["MHA999"]\n'})
    failed = mhalint("check", ".", cwd=tmp_path)
    assert failed.returncode == 2 and "unknown rule code or prefix 'MHA999' in `unfixable` in" in failed.stderr


def test_add_noqa_with_a_reason_writes_it_after_the_codes(tmp_path: Path):
    (tmp_path / "model.py").write_text(WARNING)
    completed = mhalint("check", "--no-cache", "--add-noqa=legacy layout, see #12", ".", cwd=tmp_path)
    assert (completed.returncode, completed.stderr) == (0, "Added 1 noqa directive.\n")
    assert (tmp_path / "model.py").read_text().splitlines()[2] == (
        "attn = nn.MultiheadAttention(64, 8)  # noqa: MHA001 legacy layout, see #12")
    assert mhalint("check", "--no-cache", ".", cwd=tmp_path).returncode == 0  # the reason is no code
    refused = mhalint("check", "--add-noqa=E501 too", ".", cwd=tmp_path)
    assert refused.returncode == 2 and "does not start with a code" in refused.stderr
    named = tmp_path / "--add-noqa=x.py"  # after `--`, a path is a path
    named.write_text(WARNING)
    assert mhalint("check", "--no-cache", "--", str(named.name), cwd=tmp_path).returncode == 1


def test_per_file_ignores_on_the_command_line_replace_the_configurations(tmp_path: Path):
    tree(tmp_path, **{"model.py": WARNING, "other.py": WARNING,
                      "pyproject.toml": '[tool.mhalint.per-file-ignores]\n"other.py" = ["MHA001"]\n'})
    assert [line.split(":")[0] for line in lines_of("MHA001", mhalint("check", "--no-cache", ".",
                                                                       cwd=tmp_path).stdout)] == ["model.py"]
    given = mhalint("check", "--no-cache", "--per-file-ignores", "model.py:MHA001", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in lines_of("MHA001", given.stdout)] == ["other.py"]
    shown = mhalint("check", "--show-settings", "--per-file-ignores", "m*.py:MHA001,MHA004", ".", cwd=tmp_path)
    assert 'per-file-ignores    = {"m*.py" = ["MHA001", "MHA004"]}  # --per-file-ignores' in shown.stdout
    for wrong, message in (("model.py", "write PATTERN:CODES"), ("model.py:MHA999", "unknown rule code or prefix "
                                                                                      "'MHA999' in --per-file-ignores")):
        failed = mhalint("check", "--per-file-ignores", wrong, ".", cwd=tmp_path)
        assert failed.returncode == 2 and message in failed.stderr, failed.stderr


def test_watch_checks_again_on_each_change_until_ctrl_c(tmp_path: Path):
    import signal
    import threading

    tree(tmp_path, **{"model.py": INFO, "pyproject.toml": "[tool.mhalint]\n"})
    environment = {name: value for name, value in os.environ.items() if name not in ("NO_COLOR", "FORCE_COLOR")}
    process = subprocess.Popen([sys.executable, "-m", "mhalint", "check", "--watch", "."], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    out: list[str] = []
    err: list[str] = []
    readers = [threading.Thread(target=lambda stream=stream, lines=lines: lines.extend(stream), daemon=True)
               for stream, lines in ((process.stdout, out), (process.stderr, err))]
    for reader in readers:
        reader.start()

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 120  # a busy CI runner: generous
        while sum("Watching for file changes." in line for line in err) < count:
            assert process.poll() is None and time.monotonic() < deadline, (out, err)
            time.sleep(0.05)

    try:
        wait_for(1)
        assert out[-1].startswith("All checks passed!")
        (tmp_path / "model.py").write_text(WARNING)
        later = time.time() + 5  # a new modification time, whatever the file system's resolution
        os.utime(tmp_path / "model.py", (later, later))
        wait_for(2)
        assert any("File change detected..." in line for line in err)
        assert out[-1].startswith("Found 1 finding (1 file checked).") and any(": MHA001 [" in line for line in out)
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    assert code == 130 and "mhalint: interrupted\n" in err


def test_watch_refuses_what_would_write_or_end(tmp_path: Path):
    tree(tmp_path, **{"model.py": WARNING})
    refused = mhalint("check", "--watch", "--fix", ".", cwd=tmp_path)
    assert refused.returncode == 2 and "--watch checks and reports again on each change" in refused.stderr


def test_a_config_setting_nested_too_deeply_is_one_line_and_exit_two(tmp_path: Path):
    deep = mhalint("check", "--config", "select = " + "[" * 3000 + "]" * 3000, ".", cwd=tmp_path)
    assert deep.returncode == 2 and "its values are nested more deeply than mhalint reads" in deep.stderr
    assert len(deep.stderr.splitlines()) == 1
