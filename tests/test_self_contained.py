"""The repository is self-contained: no file points at the `shared/` folder that only development machines have
(its documents, corpus, schemas, experiments and seed). What the tests need from there is copied under tests/data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from repository import repository_files

ROOT = Path(__file__).resolve().parents[1]
# The parent's shared folder anywhere, or a path into one of its folders (case-sensitive, as paths are). Spelled in
# pieces so that this file does not match itself.
SHARED = "shared"
FOLDERS = ("docs", "corpus", "schemas", "torch-experiments", "seed")
OUTSIDE = re.compile(rf"\.\./{SHARED}|{SHARED}/(?:{'|'.join(map(re.escape, FOLDERS))})")


def test_no_file_points_outside_the_repository():
    offenders = []
    for name in repository_files():
        data = (ROOT / name).read_bytes()
        if b"\0" in data:  # binary
            continue
        text = data.decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not offenders, "files that point at the shared/ folder, which only development machines have:\n" + \
        "\n".join(offenders)


@pytest.mark.parametrize(("text", "found"), [
    (f"see ../{SHARED}/x", True),
    (f"({SHARED}/docs/torch-attention-facts.md)", True),
    (f"{SHARED}/corpus/README.md", True),
    (f"{SHARED}/schemas/sarif-schema-2.1.0.json", True),
    (f"{SHARED}/torch-experiments/run.py", True),
    (f"`{SHARED}/seed`", True),
    (f"{SHARED.title()}/Docs", False),
    (f"{SHARED}/hooks", False),
    (f"a {SHARED} docs folder", False),
])
def test_the_pattern(text, found):
    assert bool(OUTSIDE.search(text)) is found
