"""The runtime probe: each rule's experiment, the worker protocol, the CLI around it, and its failure paths.

Tests that run experiments need torch (`pytest.importorskip`). Worker starts cost about 2 s each (the torch import),
so the CLI runs over the examples are shared by a module-scoped fixture.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import PATIENT_PROBE

from mhalint import torchapi
from mhalint.cli.main import main
from mhalint.finding import CONFIRMED, NOT_CONFIRMED, PROBE_STATUSES, REPRODUCED, SKIPPED, Finding
from mhalint.probe import runner, support
from mhalint.probe.runner import ProbeLimits, probe_findings
from mhalint.rule import load_rules

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RULES = load_rules()
HANG_GUARD = 600  # seconds: only a hang is this slow; the tests assert outcomes, never how long they took

NUMBER = r"([0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)"
FINDING_LINE = re.compile(r"^(?P<path>\S+):(?P<line>\d+):(?P<column>\d+): (?P<code>[A-Z]+[0-9]+) "
                          r"\[(?P<severity>\w+)\] ")
PROBE_LINE = re.compile(r"^    probe (?P<status>confirmed|reproduced|not confirmed|skipped)(?: \(torch (?P<version>[^)]+)\))?: "
                        r"(?P<evidence>.+)$")
INSTALL_ERROR = "mhalint: error: the probe needs torch, which is not installed: pip install 'torch==2.13.0'"


def number(pattern: str, text: str) -> float:
    """The number that `pattern` (with one NUMBER group) captures in `text`."""
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in {text!r}"
    return float(match.group(1))


def mhalint(*args: str, cwd: Path = ROOT, env: dict | None = None, stdin: str | None = None,
            timeout: float = HANG_GUARD) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mhalint", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def worker(request: str | bytes, timeout: float = HANG_GUARD) -> subprocess.CompletedProcess:
    """`python -m mhalint.probe` fed `request` on stdin."""
    data = request.encode() if isinstance(request, str) else request
    completed = subprocess.run([sys.executable, "-m", "mhalint.probe"], cwd=ROOT, input=data, capture_output=True,
                               timeout=timeout)
    return subprocess.CompletedProcess(completed.args, completed.returncode, completed.stdout.decode(),
                                       completed.stderr.decode())


def messages(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def probed(stdout: str) -> list[tuple[re.Match, re.Match | None]]:
    """(finding line, the probe line under it or None) for every finding in concise output."""
    lines = stdout.splitlines()
    pairs = []
    for index, line in enumerate(lines):
        finding = FINDING_LINE.match(line)
        if finding:
            following = lines[index + 1] if index + 1 < len(lines) else ""
            pairs.append((finding, PROBE_LINE.match(following)))
    return pairs


def probe_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("    probe ")]


def by_code(stdout: str) -> dict[str, re.Match]:
    """The probe line of each finding, by rule code (one finding per code in these tests)."""
    pairs = probed(stdout)
    assert len({f["code"] for f, _ in pairs}) == len(pairs), stdout
    for finding, probe in pairs:
        assert probe is not None, f"no probe line under {finding.string}"
    return {finding["code"]: probe for finding, probe in pairs}


def no_traceback(completed: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stdout, completed.stdout


# ---- a plugin with experiments that hang or kill their process ------------------------------------------------------
PLUGIN = textwrap.dedent('''
    import os
    import signal
    import time

    import libcst as cst
    from mhalint.finding import CONFIRMED
    from mhalint.rule import Rule


    class _CallRule(Rule):
        """
        ## What it does
        Flags a call of the function named in `triggers` (a test rule).
        """

        def visit_Call(self, node):
            if isinstance(node.func, cst.Name) and node.func.value == self.triggers[0]:
                self.report(node, f"{self.triggers[0]}() found", arguments={"api": self.triggers[0]})


    class SlowProbe(_CallRule):
        code, name, summary, triggers = "XYZ101", "slow-probe", "an experiment that hangs", ("slow_site",)

        @staticmethod
        def probe(arguments, torch):
            time.sleep(3600)  # never answers: only a time limit ends it
            return CONFIRMED, "woke up"


    class CrashProbe(_CallRule):
        code, name, summary, triggers = "XYZ102", "crash-probe", "an experiment that kills its process", ("crash_site",)

        @staticmethod
        def probe(arguments, torch):
            os.kill(os.getpid(), signal.SIGKILL)
            return CONFIRMED, "unreachable"
''')


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict:
    """An environment in which the plugin above is an installed distribution (module + .dist-info)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "mhalint_probe_plugin.py").write_text(PLUGIN)
    dist = site / "mhalint_probe_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mhalint-probe-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mhalint.rules]\nXYZ101 = mhalint_probe_plugin:SlowProbe\n"
                                           "XYZ102 = mhalint_probe_plugin:CrashProbe\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path)


# ---- 1. each rule's experiment, in-process, from arguments shaped as the static side produces them ----------------
MHA001_MHA_BATCH_FIRST_DATA = {"api": torchapi.MHA, "embed_dim": 64, "num_heads": 8, "batch_first": False,
                               "layout": "batch-first"}
MHA001_MHA_SEQUENCE_FIRST_DATA = {"api": torchapi.MHA, "embed_dim": 64, "num_heads": 8, "batch_first": True,
                                  "layout": "sequence-first"}
MHA001_ENCODER_LAYER = {"api": torchapi.ENCODER_LAYER, "d_model": 64, "nhead": 8, "batch_first": False,
                        "layout": "batch-first"}
MHA002_SDPA_IGNORE = {"api": torchapi.SDPA, "parameter": "attn_mask", "convention": "keep", "polarity": "ignore",
                      "mask_expression": "torch.triu(torch.ones(L, L), diagonal=1)", "inverted_after": False}
MHA002_SDPA_UNREBUILDABLE = {**MHA002_SDPA_IGNORE, "mask_expression": "tokens == pad"}
MHA002_MHA_KEEP = {"api": torchapi.MHA, "parameter": "attn_mask", "convention": "ignore", "polarity": "keep",
                   "mask_expression": "torch.tril(torch.ones(L, L, dtype=torch.bool))", "inverted_after": False}
MHA003_MHA = {"api": torchapi.MHA, "embed_dim": 64, "num_heads": 8, "batch_first": True, "flag": "is_causal",
              "mask": "attn_mask"}
MHA003_DECODER_MEMORY = {"api": torchapi.DECODER_LAYER, "d_model": 64, "nhead": 8, "batch_first": True,
                         "flag": "memory_is_causal", "mask": "memory_mask"}
MHA003_FUNCTIONAL = {"api": torchapi.MHA_FORWARD_FN, "flag": "is_causal", "mask": "attn_mask"}
MHA004_MHA = {"api": torchapi.MHA, "embed_dim": 60, "num_heads": 5, "batch_first": True}
MHA004_ENCODER_LAYER = {"api": torchapi.ENCODER_LAYER, "d_model": 96, "nhead": 3, "batch_first": True}

STATIC_SIDE = [
    ("MHA001", MHA001_MHA_BATCH_FIRST_DATA, """
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(100, 64)
                self.attn = nn.MultiheadAttention(64, 8)
            def forward(self, tokens):
                B, L = tokens.shape
                x = self.emb(tokens)
                return self.attn(x, x, x)[0]
        """),
    ("MHA001", MHA001_MHA_SEQUENCE_FIRST_DATA, """
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def forward(self, x):  # x: (B, L, E)
                y = x.transpose(0, 1)
                return self.attn(y, y, y)[0]
        """),
    ("MHA001", MHA001_ENCODER_LAYER, """
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(100, 64)
                self.layer = nn.TransformerEncoderLayer(64, 8)
            def forward(self, tokens):
                B, L = tokens.shape
                return self.layer(self.emb(tokens))
        """),
    ("MHA002", MHA002_SDPA_IGNORE, """
        import torch
        import torch.nn.functional as F
        def f(q, L):
            future = torch.triu(torch.ones(L, L), diagonal=1)
            return F.scaled_dot_product_attention(q, q, q, attn_mask=future.bool())
        """),
    ("MHA002", MHA002_SDPA_UNREBUILDABLE, """
        import torch.nn.functional as F
        def f(q, tokens, pad):
            m = tokens == pad
            return F.scaled_dot_product_attention(q, q, q, attn_mask=m[:, None, None, :])
        """),
    ("MHA002", MHA002_MHA_KEEP, """
        import torch
        from torch import nn
        attn = nn.MultiheadAttention(8, 2, batch_first=True)
        def f(x, L):
            keep = torch.tril(torch.ones(L, L, dtype=torch.bool))
            return attn(x, x, x, attn_mask=keep)
        """),
    ("MHA003", MHA003_MHA, """
        import torch.nn as nn
        attn = nn.MultiheadAttention(64, 8, batch_first=True)
        def f(x):
            return attn(x, x, x, is_causal=True)
        """),
    ("MHA003", MHA003_DECODER_MEMORY, """
        import torch.nn as nn
        layer = nn.TransformerDecoderLayer(64, 8, batch_first=True)
        def f(x, m):
            return layer(x, m, memory_is_causal=True)
        """),
    ("MHA003", MHA003_FUNCTIONAL, """
        import torch.nn.functional as F
        def f(q, w, b, ow, ob):
            return F.multi_head_attention_forward(q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob, is_causal=True)
        """),
    ("MHA004", MHA004_MHA, """
        import torch.nn as nn
        attn = nn.MultiheadAttention(60, 5, batch_first=True)
        """),
    ("MHA004", MHA004_ENCODER_LAYER, """
        import torch.nn as nn
        layer = nn.TransformerEncoderLayer(d_model=96, nhead=3, batch_first=True)
        """),
]


@pytest.mark.parametrize(("code", "arguments", "source"), STATIC_SIDE,
                         ids=[f"{code}-{i}" for i, (code, _, _) in enumerate(STATIC_SIDE)])
def test_the_experiment_arguments_below_are_what_the_static_side_produces(code, arguments, source, lint):
    findings = [f for f in lint(source, min_severity="info") if f.code == code]
    assert [dict(f.arguments) for f in findings] == [arguments]


def run_probe(code: str, arguments: dict, torch) -> tuple[str, str]:
    torch.manual_seed(0)  # as the worker does before every site
    status, evidence = RULES[code].probe(dict(arguments), torch)
    assert isinstance(evidence, str) and evidence and "\n" not in evidence
    return status, evidence


def test_mha001_batch_first_data_into_a_sequence_first_mha_is_confirmed(torch):
    status, evidence = run_probe("MHA001", MHA001_MHA_BATCH_FIRST_DATA, torch)
    assert status == CONFIRMED, evidence
    assert "fed batch-first data to a module with batch_first=False" in evidence
    assert 0.05 < number(rf"moved sample 0's output by {NUMBER}", evidence) < 10
    assert "N=4, L=10, E=64, h=8" in evidence
    assert "the attention weights came out (10, 4, 4)" in evidence  # (L, N, N): a softmax over the batch


def test_mha001_batch_first_data_into_a_batch_first_mha_is_not_confirmed(torch):
    status, evidence = run_probe("MHA001", {**MHA001_MHA_BATCH_FIRST_DATA, "batch_first": True}, torch)
    assert status == NOT_CONFIRMED, evidence
    assert "stayed put" in evidence
    assert number(rf"max change {NUMBER}", evidence) < 1e-6
    assert "(10, 4, 4)" not in evidence


def test_mha001_sequence_first_data_into_a_batch_first_mha_is_confirmed(torch):
    status, evidence = run_probe("MHA001", MHA001_MHA_SEQUENCE_FIRST_DATA, torch)
    assert status == CONFIRMED, evidence
    assert "fed sequence-first data to a module with batch_first=True" in evidence
    assert 0.05 < number(rf"moved sample 0's output by {NUMBER}", evidence) < 10
    assert "(10, 4, 4)" in evidence


def test_mha001_transformer_encoder_layer_bad_and_fixed(torch):
    status, evidence = run_probe("MHA001", MHA001_ENCODER_LAYER, torch)
    assert status == CONFIRMED, evidence
    assert 0.05 < number(rf"moved sample 0's output by {NUMBER}", evidence) < 10
    assert "attention weights" not in evidence  # the layer returns no weights: no shape tell claimed
    status, evidence = run_probe("MHA001", {**MHA001_ENCODER_LAYER, "batch_first": True}, torch)
    assert status == NOT_CONFIRMED, evidence
    assert number(rf"max change {NUMBER}", evidence) < 1e-6


def test_mha001_without_layout_evidence_says_what_it_assumed(torch):
    arguments = {k: v for k, v in MHA001_MHA_BATCH_FIRST_DATA.items() if k != "layout"}
    status, evidence = run_probe("MHA001", arguments, torch)
    assert status == REPRODUCED, evidence  # the layout is the pitfall's premise, assumed: nothing about the site
    assert evidence.startswith("reproduced with assumed batch-first data"), evidence
    assert 0.05 < number(rf"moved sample 0's output by {NUMBER}", evidence) < 10


def test_mha002_ignore_mask_into_sdpa_is_rebuilt_and_confirmed(torch):
    status, evidence = run_probe("MHA002", MHA002_SDPA_IGNORE, torch)
    assert status == CONFIRMED, evidence
    assert "mask rebuilt from `torch.triu(torch.ones(L, L), diagonal=1)`" in evidence
    assert "stood in" not in evidence
    assert 0.1 < number(rf"\(the inverse\) by {NUMBER}", evidence) < 20


def test_mha002_mask_already_in_sdpa_convention_is_not_confirmed(torch):
    status, evidence = run_probe("MHA002", {**MHA002_SDPA_IGNORE, "polarity": "keep"}, torch)
    assert status == NOT_CONFIRMED, evidence
    assert "already in F.scaled_dot_product_attention's convention" in evidence
    assert "rebuilt" in evidence


def test_mha002_unrebuildable_mask_is_only_reproduced_naming_its_stand_in(torch):
    status, evidence = run_probe("MHA002", MHA002_SDPA_UNREBUILDABLE, torch)
    assert status == REPRODUCED, evidence
    assert evidence.startswith("reproduced with assumed True = ignore padding mask (lengths 6, 4, 3, 2) in place "
                               "of `tokens == pad`: "), evidence
    assert "`tokens == pad` could not be rebuilt" in evidence
    assert "a padding mask stood in" in evidence
    assert 0.1 < number(rf"\(the inverse\) by {NUMBER}", evidence) < 20


def test_mha002_keep_mask_into_mha_is_confirmed(torch):
    status, evidence = run_probe("MHA002", MHA002_MHA_KEEP, torch)
    assert status == CONFIRMED, evidence
    assert evidence.startswith("nn.MultiheadAttention with the mask as written")
    assert "mask rebuilt from `torch.tril(torch.ones(L, L, dtype=torch.bool))`" in evidence
    assert 0.1 < number(rf"\(the inverse\) by {NUMBER}", evidence) < 20
    status, evidence = run_probe("MHA002", {**MHA002_MHA_KEEP, "polarity": "ignore"}, torch)
    assert status == NOT_CONFIRMED, evidence


def test_mha003_is_causal_without_mask_on_mha_is_confirmed(torch):
    status, evidence = run_probe("MHA003", MHA003_MHA, torch)
    assert status == CONFIRMED, evidence
    assert "equals the unmasked output" in evidence
    assert number(rf"\(diff {NUMBER}\)", evidence) < 1e-5
    assert 0.1 < number(rf"is {NUMBER} away from the causal one", evidence) < 20
    assert "in training it raises: Need attn_mask if specifying the is_causal hint" in evidence
    assert "N=4, L=10, E=64, h=8" in evidence


def test_mha003_with_the_mask_given_is_not_confirmed(torch):
    status, evidence = run_probe("MHA003", {**MHA003_MHA, "mask_given": True}, torch)
    assert status == NOT_CONFIRMED, evidence
    assert number(rf"and {NUMBER} from the causal one", evidence) < 1e-5
    assert number(rf"the output is {NUMBER} from the unmasked output", evidence) > 0.1


def test_mha003_memory_is_causal_on_a_decoder_layer_raises(torch):
    status, evidence = run_probe("MHA003", MHA003_DECODER_MEMORY, torch)
    assert status == CONFIRMED, evidence
    assert "raises in training and in inference" in evidence
    assert "Need attn_mask if specifying the is_causal hint" in evidence


def test_mha003_functional_multi_head_attention_forward_raises(torch):
    status, evidence = run_probe("MHA003", MHA003_FUNCTIONAL, torch)
    assert status == REPRODUCED, evidence  # the call's own sizes are not read: stand-ins run
    assert evidence.startswith("reproduced with assumed embed_dim=16 and num_heads=2 (the call's sizes are not "
                               "read): the call raises: Need attn_mask if specifying the is_causal hint"), evidence


def test_mha004_odd_heads_skip_the_mha_fast_path(torch):
    original = torch._native_multi_head_attention
    status, evidence = run_probe("MHA004", MHA004_MHA, torch)
    assert status == CONFIRMED, evidence
    assert "the fused kernel torch._native_multi_head_attention ran 0 times with num_heads=5" in evidence
    even = int(number(r"time\(s\) with ([0-9]+) heads", evidence))
    assert even % 2 == 0 and 60 % even == 0
    assert number(rf"and {NUMBER} time\(s\) with", evidence) >= 1
    assert torch._native_multi_head_attention is original


def test_mha004_even_heads_are_not_confirmed(torch):
    status, evidence = run_probe("MHA004", {**MHA004_MHA, "embed_dim": 64, "num_heads": 8}, torch)
    assert status == NOT_CONFIRMED, evidence
    assert number(rf"ran {NUMBER} time\(s\) with 8 heads", evidence) >= 1


def test_mha004_odd_heads_skip_the_encoder_layer_fused_kernel(torch):
    original = torch._transformer_encoder_layer_fwd
    status, evidence = run_probe("MHA004", MHA004_ENCODER_LAYER, torch)
    assert status == CONFIRMED, evidence
    assert "the fused kernel torch._transformer_encoder_layer_fwd ran 0 times with nhead=3" in evidence
    assert number(rf"and {NUMBER} time\(s\) with", evidence) >= 1
    assert torch._transformer_encoder_layer_fwd is original


def test_mha004_restores_the_kernel_when_the_experiment_fails(torch, monkeypatch):
    original = torch._native_multi_head_attention

    def failing_run(module, api, x, **kwargs):
        assert torch._native_multi_head_attention is not original  # the counter is in place while it runs
        raise RuntimeError("forward failed")

    monkeypatch.setattr(support, "run", failing_run)
    with pytest.raises(RuntimeError, match="forward failed"):
        RULES["MHA004"].probe(dict(MHA004_MHA), torch)
    assert torch._native_multi_head_attention is original


def test_mha004_large_odd_head_count_is_never_reported_as_not_confirmed(torch, lint):
    arguments = {"api": torchapi.MHA, "embed_dim": 520, "num_heads": 65, "batch_first": True}
    assert dict(lint("import torch.nn as nn\nattn = nn.MultiheadAttention(520, 65, batch_first=True)\n",
                     select="MHA004")[0].arguments) == arguments
    status, evidence = run_probe("MHA004", arguments, torch)
    assert status in (CONFIRMED, SKIPPED), evidence


# ---- 2. end to end through the CLI ---------------------------------------------------------------------------------
BAD_EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in EXAMPLES.glob("*_bad.py"))


@pytest.fixture(scope="module")
def examples_run(torch, probed_examples):
    """`check --probe` over every bad example (one worker), and the time it took (run once: conftest.py)."""
    assert probed_examples.completed.args[3:] == ["check", "--probe", *PATIENT_PROBE, *BAD_EXAMPLES]
    return probed_examples.completed, probed_examples.seconds


def test_check_probe_confirms_every_bad_example(examples_run, torch):
    completed, _ = examples_run
    no_traceback(completed)
    assert completed.returncode == 1, completed.stderr
    pairs = probed(completed.stdout)
    assert {"MHA001", "MHA002", "MHA003", "MHA004"} <= {f["code"] for f, _ in pairs}
    for finding, probe in pairs:
        if RULES[finding["code"]].probe is None:  # a rule without an experiment: nothing to confirm
            assert probe is None, probe.string
            continue
        assert probe is not None, f"no probe line under {finding.string}"
        # MHA002's mask (`tokens == PAD_ID`) and MHA010's causal mask are not rebuilt: stand-ins run, and say so
        outcome = "reproduced" if finding["code"] in ("MHA002", "MHA010") else "confirmed"
        assert probe.string.startswith(f"    probe {outcome} (torch {torch.__version__}): "), probe.string
        assert re.search(r"\b[0-9]+(?:\.[0-9]+)?\b", probe["evidence"]), probe.string
    summary = f"Found {len(pairs)} findings ({len(BAD_EXAMPLES)} files checked)."
    assert completed.stdout.splitlines()[-1].startswith(summary)
    statuses = [probe["status"] for _, probe in pairs if probe is not None]
    counts = ", ".join(f"{statuses.count(status)} {status}" for status in PROBE_STATUSES)
    assert completed.stdout.splitlines()[-1].endswith(f" Probe: {counts}.")  # the summary counts each outcome
    evidence = {f["code"]: p["evidence"] for f, p in pairs}
    assert "(10, 4, 4)" in evidence["MHA001"]
    assert "a padding mask stood in" in evidence["MHA002"]  # `tokens == PAD_ID` has no size to rebuild
    assert "equals the unmasked output" in evidence["MHA003"]
    assert "_transformer_encoder_layer_fwd ran 0 times with nhead=5" in evidence["MHA004"]


def test_check_probe_on_the_fixed_examples_has_nothing_to_probe():
    completed = mhalint("check", "--probe", *sorted(str(p) for p in EXAMPLES.glob("*_fixed.py")))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert probe_lines(completed.stdout) == []
    assert completed.stdout.startswith("All checks passed!")


@pytest.mark.slow
def test_probe_command_on_saved_json_gives_the_same_probe_lines(examples_run, tmp_path: Path):
    expected = probe_lines(examples_run[0].stdout)
    assert len(expected) >= 4
    saved = mhalint("check", "--output-format", "json", *BAD_EXAMPLES)
    assert saved.returncode == 1, saved.stderr
    findings = json.loads(saved.stdout)
    assert len(findings) == len(probed(examples_run[0].stdout)) and all(f["probe"] is None for f in findings)
    report = tmp_path / "findings.json"
    report.write_text(saved.stdout)

    from_file = mhalint("probe", *PATIENT_PROBE, str(report))
    no_traceback(from_file)
    assert from_file.returncode == 1, from_file.stderr
    assert probe_lines(from_file.stdout) == expected
    assert from_file.stdout.splitlines()[-1].startswith(f"Probed {len(findings)} findings.")

    from_stdin = mhalint("probe", "-", stdin=saved.stdout)
    no_traceback(from_stdin)
    assert from_stdin.returncode == 1, from_stdin.stderr
    assert probe_lines(from_stdin.stdout) == expected
    assert [f.string for f, _ in probed(from_stdin.stdout)] == [f.string for f, _ in probed(from_file.stdout)]


# ---- 3. the probe never imports or executes the user's code --------------------------------------------------------
VICTIM = '''\
import torch
import torch.nn.functional as F
from torch import nn

MARKER = {marker!r}
open(MARKER, "w").write("ran at import")

attn = nn.MultiheadAttention(64, 8)


def attend(q, L):
    future = torch.triu(torch.ones(L, open(MARKER, "w").write("ran in a mask") + L - 13), diagonal=1).bool()
    return F.scaled_dot_product_attention(q, q, q, attn_mask=future)


if __name__ == "__main__":
    open(MARKER, "w").write("ran as __main__")
'''


@pytest.fixture
def victim(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "MARKER"
    path = project / "victim.py"
    path.write_text(VICTIM.format(marker=str(marker)))
    return path, marker


@pytest.mark.slow
def test_check_probe_does_not_run_the_checked_file(victim, torch):
    path, marker = victim
    completed = mhalint("check", "--probe", "victim.py", cwd=path.parent)  # the worker runs in that directory too
    no_traceback(completed)
    assert completed.returncode == 1, completed.stderr
    assert not marker.exists(), marker.read_text()
    probes = by_code(completed.stdout)
    assert {"MHA001", "MHA002"} <= set(probes)
    assert probes["MHA001"]["status"] == REPRODUCED, probes["MHA001"].string  # no layout evidence in the file
    # the mask's construction calls open(): the evaluator refuses it instead of running it, and a stand-in runs
    assert probes["MHA002"]["status"] == REPRODUCED, probes["MHA002"].string
    assert "could not be rebuilt (`open` is not an allowed function)" in probes["MHA002"]["evidence"]


def test_the_worker_request_carries_no_path_and_no_source_line(victim, torch, monkeypatch):
    path, marker = victim
    started: list[tuple] = []
    sent: list[str] = []
    real_popen = runner.subprocess.Popen

    class RecordingPopen(real_popen):
        def __init__(self, args, *rest, **kwargs):
            started.append((list(args), kwargs.get("cwd")))
            super().__init__(args, *rest, **kwargs)

        def communicate(self, input=None, timeout=None):
            if input is not None:
                sent.append(input)
            return super().communicate(input, timeout)

    monkeypatch.setattr(runner.subprocess, "Popen", RecordingPopen)
    monkeypatch.chdir(path.parent)
    result = CliRunner().invoke(main, ["check", "--probe", "--select", "MHA001,MHA002", "victim.py"])
    assert result.exit_code == 1, result.output
    assert not marker.exists()
    assert len(started) == 1 and len(sent) == 1
    argv, _ = started[0]
    assert "mhalint.probe" in argv

    request_text = sent[0]
    request = json.loads(request_text)
    assert set(request) == {"site_timeout", "sites"}
    assert [site["code"] for site in request["sites"]] == ["MHA001", "MHA002"]
    for site in request["sites"]:
        assert set(site) == {"id", "code", "arguments"}
        assert all(isinstance(v, str | int | float | bool | type(None)) for v in site["arguments"].values())
    for forbidden in (str(path), str(path.parent), "victim", str(marker)):
        assert forbidden not in request_text and not any(forbidden in a for a in argv), forbidden
    for line in path.read_text().splitlines():
        if line.strip():
            assert json.dumps(line.strip())[1:-1] not in request_text, line
    # Source text travels only as MHA002's mask expression (by design: the evaluator rebuilds it without running
    # it, as the test above shows); nothing else names anything of the user's code.
    expressions = [site["arguments"].pop("mask_expression") for site in request["sites"]
                   if "mask_expression" in site["arguments"]]
    assert expressions == ['torch.triu(torch.ones(L, open(MARKER, "w").write("ran in a mask") + L - 13), diagonal=1)']
    assert "MARKER" not in json.dumps(request) and "attend" not in json.dumps(request)
    assert "probe reproduced" in result.output  # MHA002's mask stood in: its construction was not run


@pytest.mark.slow
def test_the_worker_does_not_import_modules_from_the_working_directory(victim, torch):
    path, marker = victim
    for module in ("json", "torch"):
        (path.parent / f"{module}.py").write_text(f"open({str(marker)!r}, 'a').write('{module}.py ran\\n')\n")
    code = ("import os, sys\n"
            "sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]  # the parent as a console script\n"
            "from mhalint.cli.main import main\n"
            "sys.argv[0] = 'mhalint'\n"
            "main()\n")
    completed = subprocess.run([sys.executable, "-c", code, "check", "--probe", "victim.py"], cwd=path.parent,
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 1, completed.stderr
    assert not marker.exists(), marker.read_text()
    assert by_code(completed.stdout)["MHA001"]["status"] == REPRODUCED  # no layout evidence in the file


# ---- 4. time limits -------------------------------------------------------------------------------------------------
SELECT = "MHA001,MHA004,XYZ"  # the rules these files are about (new rules cannot add sites)
SLOW_FILE = "import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\nslow_site()\n" \
            "odd = nn.MultiheadAttention(60, 5, batch_first=True)\n"


@pytest.mark.slow
def test_a_site_over_its_time_limit_is_skipped_and_the_others_still_run(tmp_path: Path, plugin_env, torch):
    (tmp_path / "model.py").write_text(SLOW_FILE)
    # The slow experiment never answers, so a result at all shows that its limit stopped it (the subprocess
    # timeout is only a guard against a hang); the limit leaves the quick ones room on a loaded machine.
    completed = mhalint("check", "--probe", "--select", SELECT, "--probe-timeout", "5", "model.py", cwd=tmp_path,
                        env=plugin_env, timeout=HANG_GUARD)
    no_traceback(completed)
    assert completed.returncode == 1, completed.stderr
    probes = by_code(completed.stdout)
    assert set(probes) == {"MHA001", "XYZ101", "MHA004"}
    assert probes["XYZ101"]["status"] == SKIPPED
    assert probes["XYZ101"]["evidence"] == "the experiment took longer than 5 s and was stopped"
    assert probes["MHA001"]["status"] == REPRODUCED and probes["MHA004"]["status"] == CONFIRMED  # after the slow one


def test_the_total_time_limit_skips_every_site_and_keeps_the_findings(tmp_path: Path, plugin_env, torch):
    (tmp_path / "model.py").write_text(SLOW_FILE)
    completed = mhalint("check", "--probe", "--select", SELECT, "--probe-total-timeout", "1", "model.py", cwd=tmp_path,
                        env=plugin_env, timeout=HANG_GUARD)
    no_traceback(completed)
    assert completed.returncode == 1, completed.stderr
    probes = by_code(completed.stdout)
    assert set(probes) == {"MHA001", "XYZ101", "MHA004"}
    stopped = "the probe run took longer than its limit of 1 s and was stopped"
    for code in ("XYZ101", "MHA004"):  # the hanging site and the one after it
        assert probes[code]["status"] == SKIPPED, probes[code].string
        assert probes[code]["evidence"] == stopped
    # The site before may have been answered in time on a fast machine; if not, it has the same reason.
    assert probes["MHA001"]["status"] == REPRODUCED or probes["MHA001"]["evidence"] == stopped, probes["MHA001"].string
    assert completed.stdout.splitlines()[-1].startswith("Found 3 findings (1 file checked).")


@pytest.mark.slow
def test_the_total_time_limit_keeps_the_results_streamed_before_it(plugin_env, examples_run, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", plugin_env["PYTHONPATH"])
    # room for the torch import and the first experiment: the examples run did those and more
    limit = max(3, math.ceil(2 * examples_run[1]))
    findings = [Finding("model.py", 2, 8, "MHA001", "m", arguments=tuple(MHA001_MHA_BATCH_FIRST_DATA.items())),
                Finding("model.py", 3, 1, "XYZ101", "m", arguments=(("api", "slow_site"),)),
                Finding("model.py", 4, 7, "MHA004", "m", arguments=tuple(MHA004_MHA.items()))]
    rules = {**RULES, "XYZ101": type("SlowStub", (), {"probe": staticmethod(lambda arguments, torch: None)})}
    results = probe_findings(findings, rules, ProbeLimits(site_timeout=HANG_GUARD, total_timeout=limit))
    assert [f.code for f in results] == ["MHA001", "XYZ101", "MHA004"]
    assert results[0].probe.status == CONFIRMED, results[0].probe
    for late in results[1:]:
        assert late.probe.status == SKIPPED
        assert late.probe.evidence == f"the probe run took longer than its limit of {limit} s and was stopped"


# ---- 5. no torch ----------------------------------------------------------------------------------------------------
HIDE_TORCH = textwrap.dedent('''
    import importlib.machinery
    import importlib.util
    import sys

    class NoTorch(importlib.machinery.PathFinder):
        """The path finder, blind to torch: as if it were not installed."""

        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                return None
            return super().find_spec(name, path, target)

    sys.meta_path[sys.meta_path.index(importlib.machinery.PathFinder)] = NoTorch
    assert importlib.util.find_spec("torch") is None
    from mhalint.cli.main import main
    sys.argv[0] = "mhalint"
    main()
''')


def without_torch(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HIDE_TORCH, *args], cwd=ROOT, input=stdin, capture_output=True,
                          text=True, timeout=60)


def test_check_probe_without_torch_is_a_one_line_error():
    bad = "examples/mha001_batch_first_default_bad.py"
    completed = without_torch("check", "--probe", bad)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.splitlines() == [INSTALL_ERROR]
    no_traceback(completed)

    static = without_torch("check", bad)
    assert static.returncode == 1, static.stderr
    assert static.stderr == ""
    assert [f["code"] for f, _ in probed(static.stdout)] == ["MHA001"]
    assert probe_lines(static.stdout) == []


def test_probe_command_without_torch_is_the_same_one_line_error():
    saved = mhalint("check", "--output-format", "json", "examples/mha001_batch_first_default_bad.py")
    completed = without_torch("probe", "-", stdin=saved.stdout)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.splitlines() == [INSTALL_ERROR]


# ---- 6. a worker that dies -----------------------------------------------------------------------------------------
def test_a_worker_killed_mid_run_skips_the_remaining_sites(tmp_path: Path, plugin_env, torch):
    (tmp_path / "model.py").write_text("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\ncrash_site()\n"
                                       "odd = nn.MultiheadAttention(60, 5, batch_first=True)\n")
    completed = mhalint("check", "--probe", "--select", SELECT, "model.py", cwd=tmp_path, env=plugin_env, timeout=60)
    no_traceback(completed)
    assert completed.returncode == 1, completed.stderr
    probes = by_code(completed.stdout)
    assert set(probes) == {"MHA001", "XYZ102", "MHA004"}
    assert probes["MHA001"]["status"] == REPRODUCED  # answered before the crash: kept
    for code in ("XYZ102", "MHA004"):
        assert probes[code]["status"] == SKIPPED, probes[code].string
        assert probes[code]["evidence"].startswith("the probe process was killed by signal 9"), probes[code].string
    assert completed.stdout.splitlines()[-1].startswith("Found 3 findings (1 file checked).")


def test_a_worker_that_cannot_import_torch_under_its_memory_cap_skips_every_site(torch):
    completed = mhalint("check", "--probe", "--select", "MHA001,MHA004", "--probe-memory", "256",
                        "examples/mha001_batch_first_default_bad.py", "examples/mha004_odd_num_heads_bad.py", timeout=60)
    no_traceback(completed)
    assert completed.returncode == 1, completed.stderr
    pairs = probed(completed.stdout)
    assert [f["code"] for f, _ in pairs] == ["MHA001", "MHA004"]
    for _, probe in pairs:
        assert probe is not None and probe["status"] == SKIPPED, completed.stdout
        assert probe["evidence"].startswith(("torch cannot be imported: ", "the probe process was killed by signal",
                                             "the probe process exited with code")), probe.string
    assert completed.stdout.splitlines()[-1].startswith("Found 2 findings (2 files checked).")


# ---- 7. malformed worker input --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("request_text", "reason"), [
    ("not json", "malformed probe request: Expecting value: line 1 column 1 (char 0)"),
    ("", "malformed probe request: Expecting value: line 1 column 1 (char 0)"),
    ("{}", 'malformed probe request: expected an object with a "sites" list'),
    ("[]", 'malformed probe request: expected an object with a "sites" list'),
    ('{"sites": "x"}', 'malformed probe request: expected an object with a "sites" list'),
    ('{"sites": [{"id": "x"}]}', "malformed probe request: every site needs an integer id"),
    ('{"sites": [5]}', "malformed probe request: every site needs an integer id"),
    ('{"sites": [], "site_timeout": 0}', "malformed probe request: site_timeout must be a number of seconds "
                                         "between 0 and 3600"),
    ('{"sites": [], "site_timeout": "5"}', "malformed probe request: site_timeout must be a number of seconds "
                                           "between 0 and 3600"),
    (json.dumps({"sites": [{"id": i} for i in range(10_001)]}), "malformed probe request: more than 10000 sites"),
], ids=["not-json", "empty", "no-sites", "array", "sites-not-list", "string-id", "site-not-object",
        "zero-timeout", "string-timeout", "too-many-sites"])
def test_malformed_requests_are_refused_in_one_line_before_torch_is_imported(request_text, reason):
    completed = worker(request_text, timeout=HANG_GUARD)
    no_traceback(completed)
    assert completed.returncode == 2
    assert messages(completed.stdout) == [{"error": reason}]


def test_malformed_sites_are_skipped_with_a_reason_and_the_rest_still_run(torch):
    sites = [
        {"id": 1, "code": "MHA001", "arguments": {"a": [1, 2]}},
        {"id": 2, "code": "XYZ999", "arguments": {}},
        {"id": 3, "code": 5, "arguments": {}},
        {"id": 4, "code": "MHA001"},
        {"id": 5, "code": "MHA001", "arguments": {}},
        {"id": 6, "code": "MHA002", "arguments": {**MHA002_SDPA_IGNORE,
                                                   "mask_expression": "__import__('os').system('exit 1')"}},
        {"id": 7, "code": "MHA001", "arguments": MHA001_MHA_BATCH_FIRST_DATA},
    ]
    completed = worker(json.dumps({"site_timeout": 20, "sites": sites}), timeout=60)
    no_traceback(completed)
    assert completed.returncode == 0, completed.stderr
    header, *results = messages(completed.stdout)
    assert header == {"torch": torch.__version__}
    by_id = {r["id"]: r for r in results}
    assert sorted(by_id) == [1, 2, 3, 4, 5, 6, 7]
    malformed = "malformed site: needs a string code and an arguments object of plain values"
    assert by_id[1] == {"id": 1, "status": SKIPPED, "evidence": malformed}
    assert by_id[2] == {"id": 2, "status": SKIPPED, "evidence": "XYZ999 has no probe experiment"}
    assert by_id[3] == {"id": 3, "status": SKIPPED, "evidence": malformed}
    assert by_id[4] == {"id": 4, "status": SKIPPED, "evidence": malformed}
    assert by_id[5] == {"id": 5, "status": SKIPPED, "evidence": "the experiment could not run: KeyError: 'api'"}
    assert by_id[6]["status"] == REPRODUCED  # a padding mask stood in for the one that could not be rebuilt
    assert "could not be rebuilt (`__import__` is not an allowed function)" in by_id[6]["evidence"]
    assert by_id[7]["status"] == CONFIRMED


DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_json_is_refused_in_one_line_by_the_worker():
    completed = worker(DEEP, timeout=HANG_GUARD)
    no_traceback(completed)
    assert completed.returncode == 2
    assert [m["error"].startswith("malformed probe request: ") for m in messages(completed.stdout)] == [True]


def test_deeply_nested_json_is_a_usage_error_for_the_probe_command():
    completed = mhalint("probe", "-", stdin=DEEP, timeout=HANG_GUARD)
    no_traceback(completed)
    assert completed.returncode == 2
    assert len(completed.stderr.splitlines()) == 1
    assert completed.stderr.startswith("mhalint: error: <stdin> is not a JSON list of mhalint findings")


def test_probe_command_refuses_a_file_that_is_not_findings():
    completed = mhalint("probe", "-", stdin="not json", timeout=HANG_GUARD)
    no_traceback(completed)
    assert completed.returncode == 2
    assert len(completed.stderr.splitlines()) == 1
    assert completed.stderr.startswith("mhalint: error: <stdin> is not a JSON list of mhalint findings")


# ---- honesty: confirmed only when every input the experiment rebuilt came from the site (issue 35 item 13) --------
@pytest.mark.parametrize(("code", "arguments", "assumed"), [
    pytest.param("MHA002", MHA002_SDPA_IGNORE, None, id="mha002-mask-rebuilt"),
    pytest.param("MHA002", {**MHA002_SDPA_IGNORE, "mask_expression": "make_causal_mask(x)"},
                 "True = ignore padding mask (lengths 6, 4, 3, 2) in place of `make_causal_mask(x)`",
                 id="mha002-mask-from-a-project-function"),
    pytest.param("MHA001", MHA001_MHA_BATCH_FIRST_DATA, None, id="mha001-sizes-known"),
    pytest.param("MHA001", {k: v for k, v in MHA001_MHA_BATCH_FIRST_DATA.items() if k != "embed_dim"},
                 "embed_dim=64", id="mha001-embed-dim-unknown"),
    pytest.param("MHA001", {"api": torchapi.MHA, "batch_first": False, "layout": "batch-first"},
                 "num_heads=8 and embed_dim=64", id="mha001-sizes-unknown"),
])
def test_the_probe_confirms_only_the_sites_own_inputs_and_names_each_stand_in(torch, code, arguments, assumed):
    status, evidence = run_probe(code, arguments, torch)
    if assumed is None:
        assert status == CONFIRMED and not evidence.startswith("reproduced"), evidence
    else:
        assert status == REPRODUCED, evidence
        assert evidence.startswith(f"reproduced with assumed {assumed}: "), evidence


def test_one_verdict_names_every_assumption_in_order():
    from mhalint.probe.support import Rebuilt

    rebuilt = Rebuilt()
    assert rebuilt.verdict("it moved") == (CONFIRMED, "it moved")
    for what in ("batch_first=True", "nhead=8", "batch_first=True", "d_model=64"):
        rebuilt.assume(what)
    assert rebuilt.verdict("it moved") == (REPRODUCED, "reproduced with assumed batch_first=True, nhead=8 and "
                                                       "d_model=64: it moved")
    assert rebuilt.outcome(False, "it stayed") == (NOT_CONFIRMED, "it stayed")


def test_no_rule_decides_confirmed_or_reproduced_itself():
    """The verdict is support.Rebuilt's: a rule records what it assumed, never writes the status."""
    rules = Path(__file__).resolve().parents[1] / "rules"
    deciding = [path.name for path in rules.glob("*.py")
                if re.search(r"(?<!NOT_)\b(CONFIRMED|REPRODUCED)\b", path.read_text())]
    assert deciding == []
