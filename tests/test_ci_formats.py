"""The formats CI systems read, in ruff's shapes for the same finding (issue 39 item 3): junit (validated against
a JUnit XSD), gitlab (GitLab's Code Quality schema), rdjson (reviewdog's schema), pylint, azure and grouped."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import xmlschema
from click.testing import CliRunner
from test_report_formats import EXAMPLES, RULES, example_findings, make

from mhalint import HOME
from mhalint.cli.main import main
from mhalint.finding import Severity
from mhalint.report import azure, gitlab, grouped, junit, pylint, rdjson

SCHEMAS = Path(__file__).resolve().parent / "data"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _notebook():
    return make(path="nb.ipynb", cell=2, line=4, column=3, fix=None)


def test_pylint_is_path_line_code_and_message():
    assert pylint.render([make(), _notebook()], RULES).splitlines() == [
        "model.py:3: [MHA001] nn.MultiheadAttention is built without batch_first: it reads (L, N, E)",
        "nb.ipynb:1: [MHA001] cell 2, line 4, column 3: nn.MultiheadAttention is built without batch_first: it "
        "reads (L, N, E)"]


def test_azure_logs_an_issue_per_finding_escaped_as_the_agent_reads_it():
    lines = azure.render([make(), make(path="a;b].py", severity=Severity.INFO, message="50% of\nit")]).splitlines()
    assert lines[0] == ("##vso[task.logissue type=error;sourcepath=model.py;linenumber=3;columnnumber=8;code=MHA001;]"
                        "nn.MultiheadAttention is built without batch_first: it reads (L, N, E)")
    assert lines[1] == ("##vso[task.logissue type=warning;sourcepath=a%3Bb%5D.py;linenumber=3;columnnumber=8;"
                        "code=MHA001;]50%AZP25 of%0Ait")


def test_grouped_prints_each_file_once_with_aligned_positions():
    found = [make(), make(line=12, column=10, fix=None), make(path="other.py", line=7, column=1, fix=None)]
    assert grouped.render(found, RULES, grouped.RenderOptions(unsafe_fixes=True)) == (
        "model.py:\n"
        "   3:8  MHA001 [error] [*] nn.MultiheadAttention is built without batch_first: it reads (L, N, E)\n"
        "  12:10 MHA001 [error] nn.MultiheadAttention is built without batch_first: it reads (L, N, E)\n"
        "\n"
        "other.py:\n"
        "  7:1 MHA001 [error] nn.MultiheadAttention is built without batch_first: it reads (L, N, E)\n")


def test_junit_has_a_suite_per_file_and_a_failing_case_per_finding():
    found = [make(), make(line=12, column=10), make(path="pkg/other.py")]
    root = ET.fromstring(junit.render(found, RULES))
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("errors")) == ("testsuites", "3", "3", "0")
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures"), s.get("package")) for s in suites] == [
        ("model.py", "2", "2", "mhalint"), ("pkg/other.py", "1", "1", "mhalint")]
    case = suites[1].find("testcase")
    assert (case.get("name"), case.get("classname")) == ("mhalint.MHA001", "pkg/other")
    failure = case.find("failure")
    assert failure.get("message") == make().message
    assert failure.text == f"line 3, col 8, {make().message}"


def test_junit_without_findings_is_one_passing_case():
    root = ET.fromstring(junit.render([], RULES))
    [suite] = root.findall("testsuite")
    [case] = suite.findall("testcase")
    assert (root.get("tests"), root.get("failures")) == ("1", "0")
    assert (case.get("name"), case.get("classname"), case.find("failure")) == ("No errors found", "mhalint", None)


def test_gitlab_fingerprints_are_unique_in_a_report_and_stable_across_runs(monkeypatch):
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    found = [make(), make(line=12), make(path="other.py")]
    issues = json.loads(gitlab.render(found, RULES))
    assert len({issue["fingerprint"] for issue in issues}) == 3
    assert issues == json.loads(gitlab.render(found, RULES))
    assert issues[0] == {"check_name": "MHA001", "description": f"MHA001: {make().message}", "severity": "major",
                         "fingerprint": issues[0]["fingerprint"],
                         "location": {"path": "model.py", "positions": {"begin": {"line": 3, "column": 8},
                                                                        "end": {"line": 3, "column": 36}}}}
    moved = json.loads(gitlab.render([make(line=30, end_line=30)], RULES))  # an edit above it moves it
    assert moved[0]["fingerprint"] == issues[0]["fingerprint"]


def test_gitlab_paths_are_relative_to_the_project_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CI_PROJECT_DIR", str(tmp_path))
    [issue] = json.loads(gitlab.render([make(path=str(tmp_path / "src" / "model.py"))], RULES))
    assert issue["location"]["path"] == "src/model.py"


def test_rdjson_carries_the_fix_as_suggestions_and_the_rules_page():
    document = json.loads(rdjson.render([make(), _notebook()], RULES))
    assert document["source"] == {"name": "mhalint", "url": HOME}
    first, notebook = document["diagnostics"]
    assert first["code"] == {"value": "MHA001", "url": f"{HOME}/blob/main/docs/rules/MHA001.md"}
    assert first["severity"] == "ERROR"
    assert first["suggestions"] == [{"range": {"start": {"line": 3, "column": 35}, "end": {"line": 3, "column": 35}},
                                     "text": ", batch_first=True"}]
    assert notebook["location"]["range"]["start"] == {"line": 1, "column": 1} and "suggestions" not in notebook


@pytest.mark.parametrize("name", ["junit", "gitlab", "pylint", "rdjson", "azure", "grouped"])
def test_every_ci_format_runs_from_the_command_line(name):
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", name, str(EXAMPLES)])
    assert result.exit_code == 1, result.output
    assert "MHA001" in result.output
    human = name == "grouped"
    assert result.output.rstrip().splitlines()[-1].startswith("Found ") is human  # only the human format sums up


def test_the_examples_render_in_every_ci_format_alike():
    """Each format says, for every finding of the examples, where it is and its code."""
    found = example_findings()
    lines = pylint.render(found, RULES).splitlines()
    assert len(lines) == len(found)
    assert len(json.loads(gitlab.render(found, RULES))) == len(found)
    assert len(json.loads(rdjson.render(found, RULES))["diagnostics"]) == len(found)
    assert len(azure.render(found, RULES).splitlines()) == len(found)
    assert len(ET.fromstring(junit.render(found, RULES)).findall("testsuite/testcase")) == len(found)


def test_junit_validates_against_the_junit_schema():
    schema = xmlschema.XMLSchema(SCHEMAS / "junit.xsd")
    for found in ([], [make(), make(path="pkg/other.py", message="a < b & c")], example_findings()):
        schema.validate(junit.render(found, RULES))


def test_gitlab_validates_against_gitlabs_code_quality_schema():
    schema = json.loads((SCHEMAS / "gitlab-codequality.schema.json").read_text())  # one issue's: the report is a list
    for found in ([], [make(), _notebook()], example_findings()):
        report = json.loads(gitlab.render(found, RULES))
        assert isinstance(report, list) and len(report) == len(found)
        for issue in report:
            jsonschema.validate(issue, schema)


def test_rdjson_validates_against_reviewdogs_schema():
    schema = json.loads((SCHEMAS / "rdjson-DiagnosticResult.json").read_text())
    for found in ([], [make(), _notebook()], example_findings()):
        jsonschema.validate(json.loads(rdjson.render(found, RULES)), schema)
