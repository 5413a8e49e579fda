"""Hand-written attention on real code (issue 36): the labelled sites of benchmarks/handwritten-labels.jsonl,
scored as benchmarks/realworld.py scores the labelled corpus.

Each label names a public repository, a commit, a file and a line: a confirmed bug (a maintainer's fix commit, an
issue thread; the buggy parent is the commit) or a correct look-alike. Their trees are written first, where they
are not there yet, from local git snapshots (`<mirror>/<owner>+<name>/repo`, as benchmarks/sweep.py reads them:
the `fetch` tool's /work/.mirror, or `git clone --bare https://github.com/owner/name`); a label whose snapshot is
missing is counted as a missing file and named.

Usage:
    python benchmarks/handwritten.py [--labels benchmarks/handwritten-labels.jsonl] [--root /tmp/mhalint-handwritten]
                                     [--mirror /work/.mirror]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import realworld
import sweep


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, default=here / "handwritten-labels.jsonl")
    parser.add_argument("--root", type=Path, default=Path("/tmp/mhalint-handwritten"), help="the extracted trees")
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"), help="where the snapshots are")
    options = parser.parse_args(argv)
    labels = [json.loads(line) for line in options.labels.read_text().splitlines() if line.strip()]
    repos = {(label["repo"], label["commit"]) for label in labels}
    for name, commit in sorted(repos):
        repo = sweep.Repo(name, commit)
        if repo.tree(options.root).is_dir():
            continue
        git_dir = sweep.snapshot(options.mirror, repo)
        if git_dir is None:
            print(f"{name}@{commit[:12]}: no snapshot holds the commit; fetch it (`fetch github:{name}`)",
                  file=sys.stderr)
            continue
        sweep.extract(repo, git_dir, options.root)
    return realworld.main([str(options.labels), "--root-dir", str(options.root)])


if __name__ == "__main__":
    sys.exit(main())
