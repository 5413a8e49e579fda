"""benchmarks/sweep.py extracts each listed repository at its commit from a local mirror, checks it with mhalint,
prints the counts and MHA001's share decided, and writes every finding as a JSON line (issue 35). The mirror here is
a temporary git repository: no network and no /work/.mirror."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]

ENCODERS = '''import torch.nn as nn


class BatchFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 64)
        self.attn = nn.MultiheadAttention(64, 8)

    def forward(self, tokens):  # tokens: (batch, seq)
        x = self.embed(tokens)
        return self.attn(x, x, x, need_weights=False)[0]


class SequenceFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 64)
        self.attn = nn.MultiheadAttention(64, 8)

    def forward(self, tokens):  # tokens: (batch, seq)
        x = self.embed(tokens).transpose(0, 1)
        return self.attn(x, x, x, need_weights=False)[0]


class Unknown(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 8)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]
'''
HEADS = "import torch.nn as nn\n\nlayer = nn.TransformerEncoderLayer(d_model=64, nhead=6, batch_first=True)\n"
LATER = "import torch.nn as nn\n\nattn = nn.MultiheadAttention(64, 8)\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def _sweep(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep.py"), "--mirror", str(tmp_path / "mirror"),
                           "--root", str(tmp_path / "trees"), "--list", str(tmp_path / "list.txt"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_the_sweep_counts_the_findings_of_the_listed_commit_and_names_what_is_missing(tmp_path: Path):
    repo = tmp_path / "mirror" / "acme+attn" / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "encoders.py").write_text(ENCODERS)
    (repo / "heads.py").write_text(HEADS)
    (repo / "README.md").write_text("nn.MultiheadAttention(64, 8)\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "swept")
    commit = _git(repo, "rev-parse", "HEAD")
    (repo / "later.py").write_text(LATER)  # after the listed commit: never swept
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "later")
    (tmp_path / "list.txt").write_text(f"# a comment\nacme/attn {commit}\n\nacme/absent {'0' * 40}\n")

    first = _sweep(tmp_path, "--extract", "--jsonl", str(tmp_path / "findings.jsonl"))
    assert first.returncode == 1, first.stderr  # one repository is missing
    lines = first.stdout.splitlines()
    assert lines[:3] == [
        "code       error  warning   info    all",
        "MHA001         1        1      1      3",
        "MHA005         1        0      0      1",
    ]
    assert "MHA001 share decided, (error + info) / all: 2/3 = 66.7%" in lines
    assert "repositories: 1 checked, 0 failed; files: 2; findings: 4" in lines
    assert any(line.startswith(f"missing: acme/absent {'0' * 40}: no snapshot") and "fetch github:acme/absent" in line
               for line in lines)

    findings = [json.loads(line) for line in (tmp_path / "findings.jsonl").read_text().splitlines()]
    assert [(f["path"], f["line"], f["code"], f["severity"]) for f in findings] == [
        ("heads.py", 3, "MHA005", "error"),
        ("models/encoders.py", 8, "MHA001", "error"),
        ("models/encoders.py", 19, "MHA001", "info"),
        ("models/encoders.py", 29, "MHA001", "warning"),
    ]
    assert all(set(f) == {"repo", "commit", "path", "line", "column", "code", "severity", "message"} and
               f["repo"] == "acme/attn" and f["commit"] == commit for f in findings)

    # Without --extract the tree already written is checked again, with the same output.
    (tmp_path / "list.txt").write_text(f"acme/attn {commit}\n")
    again = _sweep(tmp_path, "--jsonl", str(tmp_path / "again.jsonl"), "--code", "MHA005")
    assert again.returncode == 0, again.stderr
    assert "MHA005 share decided, (error + info) / all: 1/1 = 100.0%" in again.stdout
    assert (tmp_path / "again.jsonl").read_text() == (tmp_path / "findings.jsonl").read_text()

    # --triage lists the error and the warning (the whole sample, one), with the judgements the file has.
    error = {"repo": "acme/attn", "path": "models/encoders.py", "line": 8, "code": "MHA001", "severity": "error"}
    (tmp_path / "triage.jsonl").write_text(json.dumps({**error, "judgement": "bug", "reason": "B, L, E"}) + "\n")
    judged = _sweep(tmp_path, "--triage", str(tmp_path / "triage.jsonl"))
    assert judged.stdout.splitlines()[-4:] == [
        "error    bug       acme/attn models/encoders.py:8",
        "warning  TO JUDGE  acme/attn models/encoders.py:29",
        "errors: 1, judged 1, bugs 1 (precision 1.00)",
        "warnings sampled: 1 of 1: TO JUDGE 1",
    ]


def test_a_tree_not_extracted_is_reported_with_the_option_that_extracts_it(tmp_path: Path):
    (tmp_path / "list.txt").write_text(f"acme/attn {'a' * 40}\n")
    run = _sweep(tmp_path)
    assert run.returncode == 1
    assert f"missing: acme/attn {'a' * 40}: no tree at {tmp_path / 'trees' / ('acme+attn@' + 'a' * 12)}; " \
           "run with --extract" in run.stdout
    assert "repositories: 0 checked, 0 failed; files: 0; findings: 0" in run.stdout
