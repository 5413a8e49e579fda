"""Run mhalint over a sweep of public repositories and count what it says (issue 35).

The labelled corpus (benchmarks/realworld.py) measures precision on sites someone judged; the sweep measures how
much mhalint leaves undecided on code nobody picked for it: for MHA001, the share of findings that are decided,
(error + info) / all, since a warning means "the layout could not be established either way".

    python benchmarks/sweep.py [--root DIR] [--list benchmarks/sweep-repos.txt] [--extract]
                               [--mirror /work/.mirror] [--jsonl OUT] [--code MHA001] [--triage FILE]

The list holds one `owner/name commit` a line (# starts a comment). Each repository is checked in
`<root>/<owner>+<name>@<commit[:12]>`, exactly as a user runs mhalint:

    python -m mhalint check --no-cache --output-format json --min-severity info --exit-zero <tree>

with every rule at every severity. `--extract` first writes the trees that are not there yet from local git
snapshots, `<mirror>/<owner>+<name>/repo` (a bare or a working-tree git directory), with `git archive <commit>`.
The script never reaches the network: a repository with no snapshot holding its commit is reported as missing,
with what to fetch.

To reproduce the sweep from scratch: bring each listed repository into the mirror (in the project's sessions, the
`fetch` tool: `fetch github:owner/name`, which writes /work/.mirror/owner+name/repo; elsewhere
`git clone --bare https://github.com/owner/name <mirror>/owner+name/repo`), then run
`python benchmarks/sweep.py --extract --jsonl findings.jsonl`. The summary goes to standard output in a fixed
order, and --jsonl writes every finding as one JSON line (repo, commit, path relative to the repository, line,
column, code, severity, message), sorted, to compare with benchmarks/sweep-findings.jsonl or to sample for triage.

`--triage benchmarks/sweep-triage.jsonl` then lists what a person must judge by reading the code: every error of
`--code` and a sample of its warnings (`random.Random(35).sample`, 30, in the order of the sorted findings), each
with its judgement where the triage file has one for that site and severity, and the errors' precision so far
(judged `bug` / errors judged).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SEVERITIES = ("error", "warning", "info")
REPO_TIMEOUT = 900  # seconds for one repository: past it the repository is reported as failed
SAMPLE, SEED = 30, 35  # the warnings drawn for triage


@dataclass
class Repo:
    """One listed repository; its tree is named as benchmarks/realworld.py names the labelled corpus's."""

    name: str  # owner/name
    commit: str

    @property
    def slug(self) -> str:
        return self.name.replace("/", "+")

    def tree(self, root: Path) -> Path:
        return root / f"{self.slug}@{self.commit[:12]}"


@dataclass
class Sweep:
    """What the checked repositories gave, and the ones mhalint failed on (a crash or a timeout, with why)."""

    files: int = 0
    findings: list[dict] = field(default_factory=list)
    checked: list[Repo] = field(default_factory=list)
    failed: list[tuple[Repo, str]] = field(default_factory=list)


def read_list(path: Path) -> list[Repo]:
    repos = []
    for number, text in enumerate(path.read_text().splitlines(), 1):
        words = text.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2 or words[0].count("/") != 1 or len(words[1]) != 40:
            raise SystemExit(f"{path}:{number}: expected `owner/name <40-hex commit>`, got {text!r}")
        repos.append(Repo(words[0], words[1]))
    return repos


def snapshot(mirror: Path, repo: Repo) -> Path | None:
    """The git directory of the repository's local snapshot, if it holds the commit."""
    base = mirror / repo.slug / "repo"
    for git_dir in (base / ".git", base):
        if git_dir.is_dir() and subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e",
                                                f"{repo.commit}^{{commit}}"], capture_output=True).returncode == 0:
            return git_dir
    return None


def absent(git_dir: Path, commit: str) -> list[str]:
    """The files of the commit whose content the snapshot lacks (a snapshot may leave out its largest files)."""
    git = ["git", "--git-dir", str(git_dir)]
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", commit], capture_output=True, text=True, check=True).stdout
    blobs = {}
    for entry in filter(None, listing.split("\0")):
        info, path = entry.split("\t", 1)
        _, kind, sha = info.split()
        if kind == "blob":
            blobs.setdefault(sha, []).append(path)
    checked = subprocess.run([*git, "cat-file", "--batch-check"], input="\n".join(blobs) + "\n",
                             capture_output=True, text=True, check=True).stdout
    return sorted(path for line in checked.splitlines() if line.endswith(" missing") for path in blobs[line.split()[0]])


def extract(repo: Repo, git_dir: Path, root: Path) -> None:
    """Write the tree at the commit, less the files the snapshot lacks; through a temporary folder, so that an
    interrupted run leaves no half tree."""
    root.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=root, prefix=f".{repo.slug}."))
    try:
        lacking = absent(git_dir, repo.commit)
        if lacking:
            print(f"{repo.name}: the snapshot lacks {len(lacking)} files, left out: {', '.join(lacking[:3])}"
                  f"{', ...' if len(lacking) > 3 else ''}", file=sys.stderr)
        pathspec = ["--", ".", *(f":(exclude,literal){path}" for path in lacking)] if lacking else []
        archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", repo.commit, *pathspec],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        partial.rename(repo.tree(root))
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def mhalint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mhalint", *args], capture_output=True, text=True,
                          timeout=REPO_TIMEOUT)


def check(repo: Repo, tree: Path, sweep: Sweep) -> None:
    """Check one tree with the command line a user runs; its findings get paths relative to the tree."""
    try:
        listed = mhalint("check", "--show-files", str(tree))
        run = mhalint("check", "--no-cache", "--output-format", "json", "--min-severity", "info", "--exit-zero",
                      str(tree))
    except subprocess.TimeoutExpired:
        sweep.failed.append((repo, f"timed out after {REPO_TIMEOUT} s"))
        return
    if run.returncode != 0 or listed.returncode != 0:
        tail = (run.stderr or listed.stderr).strip().splitlines()[-1:] or ["no output"]
        sweep.failed.append((repo, f"exit {run.returncode or listed.returncode}: {tail[0]}"))
        return
    sweep.files += len(listed.stdout.splitlines())
    sweep.checked.append(repo)
    for finding in json.loads(run.stdout):
        sweep.findings.append({
            "repo": repo.name, "commit": repo.commit, "path": Path(finding["path"]).relative_to(tree).as_posix(),
            "line": finding["line"], "column": finding["column"], "code": finding["code"],
            "severity": finding["severity"], "message": finding["message"]})


def summary(sweep: Sweep, code: str) -> str:
    counts = collections.Counter((f["code"], f["severity"]) for f in sweep.findings)
    lines = [f"{'code':<8}{'error':>8}{'warning':>9}{'info':>7}{'all':>7}"]
    for name in sorted({c for c, _ in counts}):
        row = [counts[name, severity] for severity in SEVERITIES]
        lines.append(f"{name:<8}{row[0]:>8}{row[1]:>9}{row[2]:>7}{sum(row):>7}")
    error, warning, info = (counts[code, severity] for severity in SEVERITIES)
    total = error + warning + info
    share = f"{(error + info) / total:.1%}" if total else "n/a"
    lines.append(f"{code} share decided, (error + info) / all: {error + info}/{total} = {share}")
    lines.append(f"repositories: {len(sweep.checked)} checked, {len(sweep.failed)} failed; files: {sweep.files}; "
                 f"findings: {len(sweep.findings)}")
    lines.extend(f"failed: {repo.name} {repo.commit}: {reason}" for repo, reason in sweep.failed)
    return "\n".join(lines)


def triage(findings: list[dict], judged: list[dict], code: str) -> str:
    """Every error of `code` and a seeded sample of its warnings, with the judgements `judged` holds for them."""
    def key(row: dict) -> tuple:
        return row["repo"], row["path"], row["line"], row["code"], row["severity"]

    verdicts = {key(row): row["judgement"] for row in judged}
    errors = [f for f in findings if f["code"] == code and f["severity"] == "error"]
    warnings = [f for f in findings if f["code"] == code and f["severity"] == "warning"]
    drawn = random.Random(SEED).sample(warnings, min(SAMPLE, len(warnings)))
    lines = [f"{f['severity']:<8} {verdicts.get(key(f), 'TO JUDGE'):<9} {f['repo']} {f['path']}:{f['line']}"
             for f in errors + drawn]
    bugs = [verdicts.get(key(f)) == "bug" for f in errors if key(f) in verdicts]
    lines.append(f"errors: {len(errors)}, judged {len(bugs)}, bugs {sum(bugs)}"
                 + (f" (precision {sum(bugs) / len(bugs):.2f})" if bugs else ""))
    counts = collections.Counter(verdicts.get(key(f), "TO JUDGE") for f in drawn)
    lines.append(f"warnings sampled: {len(drawn)} of {len(warnings)}: "
                 + ", ".join(f"{name} {n}" for name, n in sorted(counts.items())))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = Path(__file__).parent
    parser.add_argument("--root", type=Path, default=Path("/tmp/mhalint-sweep"), help="the extracted trees")
    parser.add_argument("--list", type=Path, default=here / "sweep-repos.txt", help="owner/name commit, a line")
    parser.add_argument("--extract", action="store_true", help="write missing trees from the local snapshots")
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"), help="where the snapshots are")
    parser.add_argument("--jsonl", type=Path, help="write every finding here, one JSON object a line")
    parser.add_argument("--code", default="MHA001", help="the code whose share decided is printed")
    parser.add_argument("--triage", type=Path, help="list the errors and sampled warnings to judge, with this "
                                                    "file's judgements")
    options = parser.parse_args(argv)

    sweep, missing = Sweep(), []
    for repo in read_list(options.list):
        tree = repo.tree(options.root)
        if not tree.is_dir() and options.extract:
            git_dir = snapshot(options.mirror, repo)
            if git_dir is not None:
                extract(repo, git_dir, options.root)
        if not tree.is_dir():
            missing.append(repo)
            continue
        check(repo, tree, sweep)
        print(f"{repo.name}: {sum(f['repo'] == repo.name for f in sweep.findings)} findings", file=sys.stderr)

    sweep.findings.sort(key=lambda f: (f["repo"], f["path"], f["line"], f["column"], f["code"], f["message"]))
    if options.jsonl:
        options.jsonl.write_text("".join(json.dumps(f) + "\n" for f in sweep.findings))
    print(summary(sweep, options.code))
    if options.triage:
        judged = [json.loads(line) for line in options.triage.read_text().splitlines() if line.strip()]
        print(triage(sweep.findings, judged, options.code))
    for repo in missing:
        if options.extract:
            print(f"missing: {repo.name} {repo.commit}: no snapshot holds the commit under {options.mirror}; bring it "
                  f"with `fetch github:{repo.name}` (or `git clone --bare https://github.com/{repo.name} "
                  f"{options.mirror / repo.slug / 'repo'}`) and run again")
        else:
            print(f"missing: {repo.name} {repo.commit}: no tree at {repo.tree(options.root)}; run with --extract")
    return 1 if missing or sweep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
