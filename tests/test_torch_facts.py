"""docs/torch-facts.md: every anchor the repository cites exists, and the experiments in docs/experiments/ still
print the values its tables give (within the precision written there; the scheme is at the top of the doc)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from repository import repository_files

ROOT = Path(__file__).resolve().parents[1]
FACTS = ROOT / "docs" / "torch-facts.md"
EXPERIMENTS = ROOT / "docs" / "experiments"

# The sections the rules, probes and guard are written against; more may be added, none of these removed.
REQUIRED_ANCHORS = {
    "mha-reference", "positional-order", "entry-points", "batch-first", "mask-convention",
    "float-masks-are-additive", "is-causal-hint", "fast-path-conditions", "odd-heads-fast-path", "heads-dividing",
    "mask-repeat-layout", "need-weights", "sdpa-causal-and-mask", "fully-masked-rows", "sdpa-padding-broadcast",
    "nan-output", "dropout", "warnings-and-errors",
}
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
# A citation of a section from anywhere: the doc's file name, '#', then the anchor.
CITATION = re.compile(r"torch-facts\.md#([A-Za-z0-9_-]+)")
INTERNAL_LINK = re.compile(r"\]\(#([^)]+)\)")
# A table row: | `<anchor> <key>` | <value> | <script>.py |   (the value may hold `\|`, an escaped pipe)
ROW = re.compile(r"^\|\s*`([a-z0-9-]+) ([^`]+)`\s*\|(.*)\|\s*([A-Za-z0-9_]+\.py)\s*\|\s*$")
FACT_LINE = re.compile(r"^FACT ([a-z0-9-]+) (\S+) = (.*)$")
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def _text() -> str:
    return FACTS.read_text(encoding="utf-8")


def _anchors() -> list[str]:
    return ANCHOR.findall(_text())


def _rows() -> dict[str, tuple[str, str]]:
    """`<anchor> <key>` -> (the value as written, the experiment script)."""
    rows: dict[str, tuple[str, str]] = {}
    for line in _text().splitlines():
        found = ROW.match(line)
        if found:
            anchor, key, value, script = found.groups()
            name = f"{anchor} {key.strip()}"
            assert name not in rows, f"docs/torch-facts.md has two rows for `{name}`"
            rows[name] = (value.strip().replace("\\|", "|"), script)
    return rows


# ---------------------------------------------------------------------------------------------------- anchors

def test_the_doc_defines_every_required_section_once():
    anchors = _anchors()
    assert anchors, "docs/torch-facts.md defines no anchors"
    assert not REQUIRED_ANCHORS - set(anchors), f"missing sections: {sorted(REQUIRED_ANCHORS - set(anchors))}"
    duplicates = sorted({a for a in anchors if anchors.count(a) > 1})
    assert not duplicates, f"anchors defined twice: {duplicates}"
    for anchor in anchors:  # each explicit anchor stands right before the heading it names
        assert re.search(rf'<a id="{re.escape(anchor)}"></a>\n## ', _text()), f"no heading after anchor {anchor}"


def test_every_cited_anchor_exists():
    defined = set(_anchors())
    missing = []
    for name in repository_files():
        data = (ROOT / name).read_bytes()
        if b"\0" in data:  # binary
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            missing += [f"{name}:{number}: #{anchor}" for anchor in CITATION.findall(line) if anchor not in defined]
    assert not missing, "citations of sections docs/torch-facts.md does not have:\n" + "\n".join(missing)


def test_the_docs_own_links_resolve():
    defined = set(_anchors())
    broken = sorted(set(INTERNAL_LINK.findall(_text())) - defined)
    assert not broken, f"links to missing sections in docs/torch-facts.md: {broken}"


def test_every_table_row_names_a_section_and_an_existing_experiment():
    defined, rows = set(_anchors()), _rows()
    assert rows, "docs/torch-facts.md has no fact rows"
    for name, (value, script) in rows.items():
        assert name.split(" ")[0] in defined, f"row `{name}` names no section"
        assert (EXPERIMENTS / script).is_file(), f"row `{name}` names a missing experiment {script}"
        assert value, f"row `{name}` has no value"


def test_every_experiment_is_listed_in_its_readme():
    readme = (EXPERIMENTS / "README.md").read_text(encoding="utf-8")
    assert "pip install torch==2.13.0" in readme
    for script in _scripts(timing=True):
        assert f"`{script}`" in readme, f"docs/experiments/README.md does not list {script}"


# ---------------------------------------------------------------------------------------------------- values

def _scripts(timing: bool = False) -> list[str]:
    return sorted(p.name for p in EXPERIMENTS.glob("*.py")
                  if not p.name.startswith("_") and (timing or not p.name.startswith("timing_")))


def _number(text: str) -> float | None:
    return float(text) if re.fullmatch(NUMBER, text.strip()) else None


def _unwrap(spec: str) -> str:
    """The text of a value written as a markdown code span (`text`, or ``text with `ticks` ``), else the value."""
    span = re.fullmatch(r"(`+)(.*)\1", spec, re.S)
    if not span or any(len(run) == len(span[1]) for run in re.findall(r"`+", span[2])):
        return spec  # not one code span: a run as long as the fence would close it early
    inner = span[2]
    return inner[1:-1] if len(inner) > 2 and inner[0] == inner[-1] == " " else inner


def matches(spec: str, printed: str) -> bool:
    """Whether a printed value is what the doc's value says (the scheme at the top of docs/torch-facts.md)."""
    spec = _unwrap(spec)
    value = _number(printed)
    bound = re.fullmatch(rf"([<>])\s*({NUMBER})", spec)
    if bound:
        return value is not None and (value < float(bound[2]) if bound[1] == "<" else value > float(bound[2]))
    between = re.fullmatch(rf"({NUMBER})\s*\.\.\s*({NUMBER})", spec)
    if between:
        return value is not None and float(between[1]) <= value <= float(between[2])
    tolerance = re.fullmatch(rf"({NUMBER})\s*±\s*({NUMBER})", spec)
    if tolerance:
        return value is not None and abs(value - float(tolerance[1])) <= float(tolerance[2])
    if re.fullmatch(r"[-+]?\d+", spec):
        return value is not None and value == int(spec)
    if re.fullmatch(NUMBER, spec):  # one unit of the last written digit
        mantissa, _, exponent = spec.lower().partition("e")
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        unit = 10.0 ** (int(exponent or 0) - decimals)
        return value is not None and abs(value - float(spec)) <= unit * (1 + 1e-9)
    return printed == spec


@pytest.mark.parametrize(("spec", "printed", "expected"), [
    ("0.466", "0.466103", True), ("0.466", "0.4681", False), ("1.517e-01", "0.151732", True),
    ("1.517e-01", "0.1519", False), ("< 1e-5", "5.96046e-08", True), ("< 1e-5", "0.01", False),
    ("> 0.1", "4.44", True), ("0", "0", True), ("0", "0.0", True), ("0", "1e-08", False),
    ("1.22 .. 1.25", "1.23", True), ("1.22 .. 1.25", "1.3", False), ("0.5 ± 0.1", "0.55", True),
    ("(10, 4, 4)", "(10, 4, 4)", True), ("True", "False", False), ("`a b`", "a b", True),
    ("`` say `x` ``", "say `x`", True), ("`a ``b`` c`", "a ``b`` c", True), ("`a` and `b`", "`a` and `b`", True),
    ("`True`", "True", True), ("`1.5`", "1.5", True),
])
def test_the_value_scheme(spec, printed, expected):
    assert matches(spec, printed) is expected


@pytest.fixture(name="run_experiment", scope="session")
def run_experiment_fixture(torch):
    """`run_experiment(script)` -> {returncode, stdout, stderr}, as `python docs/experiments/SCRIPT` gives them;
    through tests/experiment_server.py where os.fork exists, so that this worker imports torch once."""
    if not hasattr(os, "fork"):
        def run(script: str) -> dict:
            done = subprocess.run([sys.executable, str(EXPERIMENTS / script)], cwd=ROOT, capture_output=True,
                                  text=True, timeout=600)
            return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
        yield run
        return
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("experiment_server.py")),
                               str(EXPERIMENTS)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(script: str) -> dict:
        server.stdin.write(script + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
        assert answer, f"tests/experiment_server.py stopped (exit code {server.poll()})"
        return json.loads(answer)
    try:
        yield run
    finally:
        server.stdin.close()
        server.wait(timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("script", _scripts())
def test_the_experiment_prints_what_the_doc_says(script, run_experiment):
    result = run_experiment(script)
    assert result["returncode"] == 0, f"{script} failed:\n{result['stderr'][-3000:]}"
    printed = {}
    for line in result["stdout"].splitlines():
        found = FACT_LINE.match(line)
        if found:
            printed[f"{found[1]} {found[2]}"] = found[3].strip()
    assert printed, f"{script} printed no FACT lines"
    rows = _rows()
    problems = []
    for name, value in printed.items():
        if name not in rows:
            problems.append(f"`{name}` = {value}: no row in docs/torch-facts.md")
        elif rows[name][1] != script:
            problems.append(f"`{name}`: the doc names {rows[name][1]}, but {script} prints it")
        elif not matches(rows[name][0], value):
            problems.append(f"`{name}`: the doc says {rows[name][0]!r}, {script} printed {value!r}")
    for name, (_, owner) in rows.items():
        if owner == script and name not in printed:
            problems.append(f"`{name}`: in docs/torch-facts.md but {script} no longer prints it")
    assert not problems, f"{script} and docs/torch-facts.md disagree:\n" + "\n".join(problems)
