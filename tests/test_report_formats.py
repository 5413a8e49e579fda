"""The output formats: the exact structure of each, built from hand-made findings (with a fix and a probe result)
and from the engine's findings on real files; SARIF is validated against the official 2.1.0 schema."""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
import unicodedata
from pathlib import Path

import click
import jsonschema
import pytest

from mhalint import __version__
from mhalint.finding import CONFIRMED, SAFE, UNSAFE, Edit, Finding, Fix, ProbeResult, Severity
from mhalint.report import (
    RenderOptions,
    azure,
    concise,
    full,
    github,
    gitlab,
    grouped,
    json_lines,
    junit,
    pylint,
    rdjson,
    sarif,
)
from mhalint.report import json as json_report
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
SCHEMA_PATH = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"  # the OASIS schema (data/README.md)
RULES = load_rules()
FORMATS = (concise, json_report, json_lines, full, github, sarif, grouped, junit, gitlab, pylint, rdjson, azure)

SOURCE = "import torch.nn as nn\n\nattn = nn.MultiheadAttention(64, 8)\n"


def make(path: str = "model.py", **changes) -> Finding:
    """MHA001 on line 3 of SOURCE (`nn.MultiheadAttention(64, 8)` is columns 8-35), with an unsafe fix and a
    confirmed probe result."""
    fields = dict(
        path=path, line=3, column=8, code="MHA001", name="batch-first-default", severity=Severity.ERROR,
        message="nn.MultiheadAttention is built without batch_first: it reads (L, N, E)",
        end_line=3, end_column=36, evidence=("the constructor at line 3 has no batch_first argument",),
        explanation="These modules read every 3-D input as (L, N, E).\n\nSee docs/torch-facts.md#batch-first.",
        arguments=(("embed_dim", 64), ("num_heads", 8), ("batch_first", False)),
        fix=Fix((Edit(3, 35, 3, 35, ", batch_first=True"),), UNSAFE, "pass batch_first=True"),
        probe=ProbeResult(CONFIRMED, "sample 0 moved by 0.47 when only sample 1 changed", "2.13.0"))
    fields.update(changes)
    return Finding(**fields)


def example_findings() -> list[Finding]:
    result = Checker(list(RULES.values())).check_paths([EXAMPLES])
    assert result.findings, "the examples should produce findings"
    return result.findings


# ---------------------------------------------------------------------------------------------- every format


@pytest.mark.parametrize("module", FORMATS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_format_has_the_same_render_signature(module):
    parameters = inspect.signature(module.render).parameters
    assert list(parameters) == ["findings", "rules", "options"]
    assert parameters["rules"].default is None
    assert parameters["options"].default == RenderOptions()


@pytest.mark.parametrize("module", FORMATS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_format_takes_the_rules_and_a_generator(module):
    findings = [make(), make(line=5, severity=Severity.INFO, fix=None, probe=None)]
    assert module.render(iter(findings), RULES) == module.render(findings, RULES)
    assert module.render(findings) == module.render(findings, None) or module is sarif  # sarif uses the rules


@pytest.mark.parametrize("module", (concise, json_lines, full, github, grouped, pylint, azure),
                         ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_line_formats_print_nothing_for_no_findings(module):
    assert module.render([], RULES) == ""


def test_concise_keeps_its_output():
    assert concise.render([make()], RULES).splitlines() == [
        "model.py:3:8: MHA001 [error] nn.MultiheadAttention is built without batch_first: it reads (L, N, E)",
        "    probe confirmed (torch 2.13.0): sample 0 moved by 0.47 when only sample 1 changed",
    ]


# ------------------------------------------------------------------------------------------------ json-lines


def test_json_lines_is_one_object_per_finding_round_tripping_through_from_dict():
    findings = [make(), make(path="a b/c.py", line=9, message="two\nlines, 50% \"quoted\"", fix=None, probe=None,
                             severity=Severity.INFO, evidence=(), arguments=())]
    text = json_lines.render(findings, RULES)
    lines = text.split("\n")
    assert len(lines) == 2
    for line, finding in zip(lines, findings):
        data = json.loads(line)
        assert data == finding.to_dict()
        back = Finding.from_dict(data)
        assert back.to_dict() == finding.to_dict()
        assert back.fix == finding.fix and back.probe == finding.probe and back.severity == finding.severity


def test_json_lines_carries_the_same_objects_as_json():
    findings = example_findings()
    assert [json.loads(line) for line in json_lines.render(findings).splitlines()] == \
        json.loads(json_report.render(findings))


# ---------------------------------------------------------------------------------------------------- github

GITHUB_LINE = re.compile(
    r"^::(?P<command>error|warning|notice) "
    r"file=(?P<file>[^,:]*),line=(?P<line>\d+),col=(?P<col>\d+)"
    r"(?:,endLine=(?P<end_line>\d+),endColumn=(?P<end_column>\d+))?"
    r",title=(?P<title>[^,:]*)"
    r"::(?P<message>[^\r\n]*)$")


def unescape(text: str) -> str:
    for escaped, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(escaped, char)
    return text


def test_github_line_has_file_position_end_and_title():
    line = github.render([make()], RULES)
    assert line == ("::error file=model.py,line=3,col=8,endLine=3,endColumn=36,title=MHA001 batch-first-default"
                    "::nn.MultiheadAttention is built without batch_first: it reads (L, N, E)")
    match = GITHUB_LINE.match(line)
    assert match and match["file"] == "model.py" and match["title"] == "MHA001 batch-first-default"


@pytest.mark.parametrize("severity, command", [(Severity.ERROR, "error"), (Severity.WARNING, "warning"),
                                               (Severity.INFO, "notice")])
def test_github_command_follows_severity(severity, command):
    assert github.render([make(severity=severity)]).startswith(f"::{command} file=")


def test_github_escapes_data_and_properties():
    finding = make(path="odd dir/a,b:c%d.py", name="weird,name:x", message="100% sure:\r\nsecond, line\nthird")
    line = github.render([finding])
    assert "\n" not in line and "\r" not in line
    assert line.endswith("::100%25 sure:%0D%0Asecond, line%0Athird")  # `:` and `,` stay as they are in the data
    assert "file=odd dir/a%2Cb%3Ac%25d.py," in line
    assert "title=MHA001 weird%2Cname%3Ax::" in line
    match = GITHUB_LINE.match(line)
    assert match, line
    assert unescape(match["file"]) == finding.path
    assert unescape(match["title"]) == "MHA001 weird,name:x"
    assert unescape(match["message"]) == finding.message


def test_github_omits_the_end_when_unknown_and_title_without_name():
    line = github.render([make(end_line=0, end_column=0, name="")])
    assert "endLine" not in line and "endColumn" not in line
    match = GITHUB_LINE.match(line)
    assert match and match["title"] == "MHA001" and match["end_line"] is None


def test_github_one_line_per_engine_finding_on_the_examples():
    findings = example_findings()
    lines = github.render(findings, RULES).splitlines()
    assert len(lines) == len(findings)
    for line, finding in zip(lines, findings):
        match = GITHUB_LINE.match(line)
        assert match, line
        assert match["command"] == github.COMMANDS[finding.severity]
        assert Path(unescape(match["file"])).is_file()
        assert (int(match["line"]), int(match["col"])) == (finding.line, finding.column)
        assert unescape(match["title"]) == f"{finding.code} {finding.name}"
        assert unescape(match["message"]) == finding.message


# ------------------------------------------------------------------------------------------------------ full


def write(tmp_path: Path, text: str, name: str = "model.py") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def test_full_frame_caret_help_and_probe(tmp_path: Path):
    path = write(tmp_path, SOURCE)
    assert full.render([make(path=path)], RULES) == "\n".join([
        "MHA001 [error] nn.MultiheadAttention is built without batch_first: it reads (L, N, E)",
        f" --> {path}:3:8",
        "  |",
        "1 | import torch.nn as nn",
        "2 |",
        "3 | attn = nn.MultiheadAttention(64, 8)",
        "  |        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "  |",
        "  = evidence: the constructor at line 3 has no batch_first argument",
        "help: pass batch_first=True",
        "note: this fix changes behaviour; `--fix` applies it only with `--unsafe-fixes`",
        "probe: confirmed (torch 2.13.0): sample 0 moved by 0.47 when only sample 1 changed",
    ]) + "\n"


def test_full_prints_the_explanation_only_when_asked(tmp_path: Path):
    path = write(tmp_path, SOURCE)
    finding = make(path=path)
    plain = full.render([finding], RULES)
    explained = full.render([finding], RULES, RenderOptions(explain=True))
    assert "explanation" not in plain and "(L, N, E)." not in plain
    assert explained.startswith(plain.rstrip("\n"))
    assert explained.rstrip("\n").splitlines()[-3:] == [
        "explanation:", "  These modules read every 3-D input as (L, N, E).", "  See docs/torch-facts.md#batch-first."]


def test_full_colour_styles_the_text_and_changes_nothing_else(tmp_path: Path):
    path = write(tmp_path, SOURCE)
    finding = make(path=path)
    plain = full.render([finding], RULES, RenderOptions(explain=True))
    coloured = full.render([finding], RULES, RenderOptions(explain=True, color=True))
    assert "\x1b[" not in plain
    assert "\x1b[31m" in coloured  # the error's code and caret in red, as ruff shows errors
    assert click.unstyle(coloured) == plain


def test_full_safe_fix_has_no_note_and_no_fix_no_help(tmp_path: Path):
    path = write(tmp_path, SOURCE)
    safe = full.render([make(path=path, fix=Fix((Edit(3, 35, 3, 35, "x"),), SAFE, "do it"), probe=None)])
    assert safe.splitlines()[-1] == "help: do it" and "note:" not in safe
    told = full.render([make(path=path, help="write batch_first=False if the data is (L, N, E)", probe=None)])
    assert "help: write batch_first=False if the data is (L, N, E)" in told.splitlines()  # the finding's own help
    bare = full.render([make(path=path, fix=None, probe=None, evidence=())])
    assert bare.splitlines()[-1] == "  |" and "help:" not in bare and "probe:" not in bare


def test_full_blocks_are_separated_by_an_empty_line(tmp_path: Path):
    path = write(tmp_path, SOURCE)
    text = full.render([make(path=path, fix=None, probe=None), make(path=path, code="MHA004", fix=None, probe=None)])
    blocks = text.split("\n\n")
    assert len(blocks) == 2 and blocks[1].startswith("MHA004 [error]")
    assert text.endswith("  = evidence: the constructor at line 3 has no batch_first argument\n")


def test_full_context_is_two_lines_each_side_with_a_right_aligned_gutter(tmp_path: Path):
    path = write(tmp_path, "".join(f"line{n} = {n}\n" for n in range(1, 21)))
    lines = full.render([make(path=path, line=10, column=1, end_line=10, end_column=7, fix=None, probe=None)]
                        ).splitlines()
    assert lines[1:] == [
        f"  --> {path}:10:1",
        "   |",
        " 8 | line8 = 8",
        " 9 | line9 = 9",
        "10 | line10 = 10",
        "   | ^^^^^^",
        "11 | line11 = 11",
        "12 | line12 = 12",
        "   |",
        "   = evidence: the constructor at line 3 has no batch_first argument",  # aligned with the gutter
    ]


def caret(text: str, number: int) -> tuple[str, int, int]:
    """The shown source line numbered `number` in a full block, and where its carets start and end."""
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if re.match(rf"^ *{number} \| ", line))
    gutter = lines[index].index("|") + 2
    shown, marks = lines[index][gutter:], lines[index + 1][gutter:]
    assert set(marks.strip()) == {"^"}, marks
    start = len(marks) - len(marks.lstrip())
    return shown, start, len(marks)


def test_full_tabs_do_not_shift_the_caret(tmp_path: Path):
    source_line = "\tif\tready:\tattn = nn.MultiheadAttention(64,\t8)\t# tabs"
    path = write(tmp_path, f"x = 1\n{source_line}\n")
    column = source_line.index("nn.") + 1
    end_column = source_line.index("8)") + 3
    text = full.render([make(path=path, line=2, column=column, end_line=2, end_column=end_column)])
    shown, start, end = caret(text, 2)
    assert "\t" not in text
    assert shown == source_line.expandtabs(full.TAB_SIZE)
    assert start == len(source_line[:column - 1].expandtabs(full.TAB_SIZE))
    assert end == len(source_line[:end_column - 1].expandtabs(full.TAB_SIZE))
    assert shown[start:end].startswith("nn.MultiheadAttention(64,") and shown[start:end].endswith(" 8)")


def cells(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def test_full_wide_characters_do_not_shift_the_caret(tmp_path: Path):
    source_line = 'title = "注意力机制"; attn = nn.MultiheadAttention("头", 8)  # 注释'
    path = write(tmp_path, source_line + "\n")
    column = source_line.index("nn.") + 1
    end_column = source_line.index(")") + 2
    finding = make(path=path, line=1, column=column, end_line=1, end_column=end_column)
    shown, start, end = caret(full.render([finding]), 1)
    assert shown == source_line
    assert start == cells(source_line[:column - 1]) == column - 1 + 5  # five wide characters before the span
    assert end - start == cells('nn.MultiheadAttention("头", 8)') == len('nn.MultiheadAttention("头", 8)') + 1


def test_full_long_lines_are_shown_whole_with_the_caret_far_right(tmp_path: Path):
    source_line = "x = [" + ", ".join(str(n) for n in range(150)) + "]; attn = nn.MultiheadAttention(64, 8)"
    path = write(tmp_path, source_line + "\n")
    column = source_line.index("nn.") + 1
    finding = make(path=path, line=1, column=column, end_line=1, end_column=len(source_line) + 1)
    shown, start, end = caret(full.render([finding]), 1)
    assert len(source_line) > 500 and shown == source_line
    assert (start, end) == (column - 1, len(source_line))


def test_full_control_characters_are_shown_one_cell_wide(tmp_path: Path):
    source_line = "\x0cattn = nn.MultiheadAttention(64, 8)"
    path = write(tmp_path, source_line + "\n")
    column = source_line.index("nn.") + 1
    finding = make(path=path, line=1, column=column, end_line=1, end_column=column + 28)
    shown, start, end = caret(full.render([finding]), 1)
    assert shown == "\u240c" + source_line[1:]
    assert shown[start:end] == "nn.MultiheadAttention(64, 8)"


def test_full_multiline_span_is_underlined_to_the_end_of_its_first_line(tmp_path: Path):
    path = write(tmp_path, "attn = nn.MultiheadAttention(\n    64, 8)\n")
    shown, start, end = caret(full.render([make(path=path, line=1, column=8, end_line=2, end_column=11)]), 1)
    assert shown[start:end] == "nn.MultiheadAttention(" and end == len(shown)


@pytest.mark.parametrize("column, end_line, end_column, expected", [
    (8, 0, 0, (7, 8)),  # no end: one caret
    (8, 3, 5, (7, 8)),  # an end before the start: one caret
    (99, 3, 120, (35, 36)),  # past the end of the line: one caret just after it
])
def test_full_degenerate_spans_get_one_caret(tmp_path: Path, column, end_line, end_column, expected):
    path = write(tmp_path, SOURCE)
    _, start, end = caret(full.render([make(path=path, column=column, end_line=end_line, end_column=end_column)]), 3)
    assert (start, end) == expected


def test_full_crlf_and_cr_line_endings(tmp_path: Path):
    for newline in ("\r\n", "\r"):
        path = write(tmp_path, SOURCE.replace("\n", newline))
        text = full.render([make(path=path)])
        assert "\r" not in text
        shown, start, end = caret(text, 3)
        assert shown[start:end] == "nn.MultiheadAttention(64, 8)"


def test_full_encoding_declaration_is_honoured(tmp_path: Path):
    path = tmp_path / "latin.py"
    path.write_bytes("# -*- coding: latin-1 -*-\nname = 'é'; attn = nn.MultiheadAttention(64, 8)\n".encode("latin-1"))
    column = len("name = 'é'; attn = ") + 1
    finding = make(path=str(path), line=2, column=column, end_line=2, end_column=column + 28)
    shown, start, end = caret(full.render([finding]), 2)
    assert shown[start:end] == "nn.MultiheadAttention(64, 8)"


@pytest.mark.parametrize("content", [None, b"\xff\xfe\x00bad", SOURCE.encode()])
def test_full_without_a_readable_line_omits_only_the_frame(tmp_path: Path, content):
    path = tmp_path / "gone.py"
    if content is not None:
        path.write_bytes(content)
    line = 3 if content != SOURCE.encode() else 40  # the file is shorter than the finding's line
    lines = full.render([make(path=str(path), line=line, end_line=line)]).splitlines()
    assert lines == [lines[0], f" --> {path}:{line}:8", " = evidence: the constructor at line 3 has no batch_first argument",
                     "help: pass batch_first=True", lines[4], lines[5]]
    assert lines[0].startswith("MHA001 [error] ") and lines[5].startswith("probe: confirmed (torch 2.13.0): ")


def test_full_reads_each_file_once(tmp_path: Path, monkeypatch):
    path = write(tmp_path, SOURCE)
    calls = []
    original = full._read_lines
    monkeypatch.setattr(full, "_read_lines", lambda p: calls.append(p) or original(p))
    full.render([make(path=path), make(path=path, line=1, end_line=1), make(path=str(tmp_path / "missing.py")),
                 make(path=str(tmp_path / "missing.py"))])
    assert calls == [path, str(tmp_path / "missing.py")]


def test_full_underlines_exactly_the_flagged_text_in_the_examples():
    findings = example_findings()
    text = full.render(findings, RULES)
    blocks = text.rstrip("\n").split("\n\n")
    assert len(blocks) == len(findings)
    for block, finding in zip(blocks, findings):
        source = Path(finding.path).read_text().splitlines()[finding.line - 1]
        shown, start, end = caret(block, finding.line)
        assert shown == source.expandtabs(full.TAB_SIZE)
        expected_end = finding.end_column - 1 if finding.end_line == finding.line else len(source)
        assert shown[start:end] == source[finding.column - 1:expected_end], finding


# ----------------------------------------------------------------------------------------------------- sarif


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    assert cls is jsonschema.Draft4Validator  # the schema declares draft-04
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def assert_valid(validator, log: dict) -> None:
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_sarif_validates_for_findings_with_fix_and_probe(validator):
    assert_valid(validator, json.loads(sarif.render([make(), make(code="MHA004", fix=None, probe=None)], RULES)))


def test_sarif_validates_for_the_examples_and_for_no_findings(validator):
    assert_valid(validator, json.loads(sarif.render(example_findings(), RULES)))
    empty = json.loads(sarif.render([], RULES))
    assert_valid(validator, empty)
    assert empty["runs"][0]["results"] == [] and empty["runs"][0]["tool"]["driver"]["rules"] == []


def test_sarif_validates_for_engine_diagnostics_and_without_rules(validator, tmp_path: Path):
    (tmp_path / "broken.py").write_text("import torch.nn as nn\ndef f(:\n    nn.MultiheadAttention(64, 8)\n")
    findings = Checker(list(RULES.values())).check_paths([tmp_path]).findings
    assert [f.code for f in findings] == ["MHA900"]
    log = json.loads(sarif.render(findings, RULES))
    assert_valid(validator, log)
    assert log["runs"][0]["tool"]["driver"]["rules"][0]["shortDescription"]["text"] == "could not parse this file"
    assert log["runs"][0]["tool"]["driver"]["rules"][0]["defaultConfiguration"]["level"] == "error"
    assert_valid(validator, json.loads(sarif.render([make()], None)))


@pytest.mark.parametrize("break_it", [
    lambda log: log.pop("version"),
    lambda log: log.pop("runs"),
    lambda log: log["runs"][0].pop("tool"),
    lambda log: log["runs"][0]["tool"]["driver"].pop("name"),
    lambda log: log["runs"][0]["tool"]["driver"]["rules"][0].pop("id"),
    lambda log: log["runs"][0]["tool"]["driver"]["rules"][0]["help"].pop("text"),
    lambda log: log["runs"][0]["results"][0].pop("message"),
    lambda log: log["runs"][0]["results"][0]["fixes"][0].pop("artifactChanges"),
    lambda log: log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"][0].pop("deletedRegion"),
    lambda log: log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].pop("startLine"),
    lambda log: log["runs"][0]["results"][0].update(level="info"),
    lambda log: log.update(version="2.0.0"),
], ids=["version", "runs", "tool", "driver.name", "rule.id", "help.text", "message", "artifactChanges",
        "deletedRegion", "startLine", "level-enum", "version-enum"])
def test_sarif_schema_rejects_a_broken_log(validator, break_it):
    log = json.loads(sarif.render([make()], RULES))
    assert_valid(validator, log)
    broken = copy.deepcopy(log)
    break_it(broken)
    assert not validator.is_valid(broken)


def test_sarif_structure(tmp_path: Path):
    finding = make(path="pkg/model.py")
    log = sarif.sarif_log([finding], RULES, root=tmp_path)
    assert log["$schema"] == sarif.SCHEMA_URI and log["version"] == "2.1.0"
    (run,) = log["runs"]
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": tmp_path.resolve().as_uri() + "/"}}
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("mhalint", __version__)
    assert driver["informationUri"].startswith("https://")
    rule = RULES["MHA001"]
    what = rule.doc_sections()["What it does"]
    assert driver["rules"] == [{
        "id": "MHA001",
        "name": "batch-first-default",
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": what, "markdown": what},
        "help": {"text": rule.documentation(), "markdown": rule.documentation()},
        "defaultConfiguration": {"level": "warning"},
    }]
    location = {"uri": "pkg/model.py", "uriBaseId": "%SRCROOT%"}
    assert run["results"] == [{
        "ruleId": "MHA001",
        "ruleIndex": 0,
        "level": "error",
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": {
            "artifactLocation": location,
            "region": {"startLine": 3, "startColumn": 8, "endLine": 3, "endColumn": 36}}}],
        "fixes": [{
            "description": {"text": "pass batch_first=True"},
            "artifactChanges": [{"artifactLocation": location, "replacements": [{
                "deletedRegion": {"startLine": 3, "startColumn": 35, "endLine": 3, "endColumn": 35},
                "insertedContent": {"text": ", batch_first=True"}}]}],
            "properties": {"applicability": "unsafe"},
        }],
        "properties": {
            "severity": "error",
            "evidence": ["the constructor at line 3 has no batch_first argument"],
            "help": "",
            "explanation": finding.explanation,
            "arguments": {"embed_dim": 64, "num_heads": 8, "batch_first": False},
            "name": "batch-first-default",
            "probe": {"status": "confirmed", "evidence": "sample 0 moved by 0.47 when only sample 1 changed",
                      "torch_version": "2.13.0"},
        },
    }]


@pytest.mark.parametrize("severity, level", [(Severity.ERROR, "error"), (Severity.WARNING, "warning"),
                                             (Severity.INFO, "note")])
def test_sarif_level_follows_severity(severity, level):
    (result,) = sarif.sarif_log([make(severity=severity)], RULES)["runs"][0]["results"]
    assert result["level"] == level and result["properties"]["severity"] == str(severity)


def test_sarif_without_fix_or_probe_and_a_deletion_fix():
    plain, deletion = sarif.sarif_log([
        make(fix=None, probe=None, end_line=0, end_column=0),
        make(line=4, fix=Fix((Edit(3, 1, 4, 1, ""),), SAFE, "remove the line"), probe=None),
    ], RULES)["runs"][0]["results"]
    assert "fixes" not in plain and "probe" not in plain["properties"]
    assert plain["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "startColumn": 8}
    assert deletion["fixes"][0]["artifactChanges"][0]["replacements"] == [
        {"deletedRegion": {"startLine": 3, "startColumn": 1, "endLine": 4, "endColumn": 1}}]
    assert "probe" not in deletion["properties"]


def test_sarif_rules_are_those_with_results_and_rule_index_points_at_them():
    findings = example_findings()
    driver = sarif.sarif_log(findings, RULES)["runs"][0]["tool"]["driver"]
    ids = [rule["id"] for rule in driver["rules"]]
    assert ids == sorted({f.code for f in findings})
    for result in sarif.sarif_log(findings, RULES)["runs"][0]["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


@pytest.mark.parametrize("path, uri", [
    ("examples/bad.py", "examples/bad.py"),
    ("./bad.py", "bad.py"),
    ("dir with space/ünï#.py", "dir%20with%20space/%C3%BCn%C3%AF%23.py"),
    ("../elsewhere/bad.py", "../elsewhere/bad.py"),
])
def test_sarif_relative_uris(tmp_path: Path, path, uri):
    location = sarif.sarif_log([make(path=path)], RULES, root=tmp_path)["runs"][0]["results"][0]["locations"][0]
    assert location["physicalLocation"]["artifactLocation"] == {"uri": uri, "uriBaseId": "%SRCROOT%"}


def test_sarif_absolute_paths_inside_and_outside_the_root(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    inside, outside = str(root / "sub" / "a.py"), str(tmp_path / "other" / "b.py")
    results = sarif.sarif_log([make(path=inside), make(path=outside)], RULES, root=root)["runs"][0]["results"]
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "sub/a.py", "uriBaseId": "%SRCROOT%"}
    assert results[1]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": Path(outside).resolve().as_uri()}


def test_sarif_render_uses_the_current_directory(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = json.loads(sarif.render([make(path=str(tmp_path / "m.py"))], RULES))
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "m.py"


# -------------------------------------------------------------------------------------------------- notebooks


def notebook_findings(tmp_path: Path) -> tuple[Path, list[Finding]]:
    path = tmp_path / "demo.ipynb"
    cells = [("markdown", "# Attention demo\n"),
             ("code", "%matplotlib inline\nimport torch.nn as nn\n"),
             ("code", "x = 1\n%time y = 2\nif x:\n\tattn = nn.MultiheadAttention(64, 8)\n")]
    path.write_text(json.dumps({
        "cells": [{"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True),
                   **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                  for kind, source in cells],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    findings = Checker(list(RULES.values())).check_paths([path]).findings
    assert [(f.code, f.cell, f.line, f.column) for f in findings] == [("MHA001", 3, 4, 9)]
    return path, findings


def test_full_shows_a_notebook_finding_in_its_cell(tmp_path: Path):
    path, findings = notebook_findings(tmp_path)
    lines = full.render(findings, RULES).splitlines()
    assert lines[1:8] == [
        f" --> {path}:cell 3:4:9",
        "  |",
        "2 | %time y = 2",  # as written, not as the comment mhalint parsed it as
        "3 | if x:",
        "4 |     attn = nn.MultiheadAttention(64, 8)",  # the tab expanded
        "  |" + " " * 12 + "^" * 28,  # "\tattn = " is 4 + 7 cells
        "  |",
    ]
    assert full.render([make(path=str(path), cell=9)]).splitlines()[1] == f" --> {path}:cell 9:3:8"  # no cell 9


def test_github_annotates_the_notebook_file_and_names_the_cell(tmp_path: Path):
    path, findings = notebook_findings(tmp_path)
    line = github.render(findings, RULES)
    assert line.startswith(f"::warning file={path},title=MHA001 batch-first-default::cell 3, line 4, column 9: ")
    assert "line=" not in line.split("::")[1]


def test_sarif_notebook_finding_has_no_region_but_says_where_in_the_cell(validator, tmp_path: Path):
    path, findings = notebook_findings(tmp_path)
    log = sarif.sarif_log(findings, RULES, root=tmp_path)
    assert_valid(validator, log)
    (result,) = log["runs"][0]["results"]
    notebook_location = {"artifactLocation": {"uri": "demo.ipynb", "uriBaseId": "%SRCROOT%"}}
    assert result["locations"] == [{"physicalLocation": notebook_location}]
    assert result["properties"]["cell"] == 3
    assert result["properties"]["region_in_cell"] == {"startLine": 4, "startColumn": 9, "endLine": 4,
                                                      "endColumn": 37}


def test_json_lines_round_trips_the_cell(tmp_path: Path):
    _, findings = notebook_findings(tmp_path)
    (line,) = json_lines.render(findings).splitlines()
    assert json.loads(line)["cell"] == 3 and Finding.from_dict(json.loads(line)).cell == 3


# ------------------------------------------------------------------------- the command line, once it is wired

try:
    from mhalint.cli.main import FORMATS as CLI_FORMATS
except ImportError:  # pragma: no cover
    CLI_FORMATS = {}


@pytest.mark.skipif("github" not in CLI_FORMATS, reason="cli.py does not offer the github format yet")
def test_cli_github_prints_one_annotation_per_finding():
    from click.testing import CliRunner

    from mhalint.cli.main import main

    old = os.getcwd()
    os.chdir(REPO)
    try:
        result = CliRunner().invoke(main, ["check", "--output-format", "github", "examples/"])
    finally:
        os.chdir(old)
    lines = [line for line in result.output.splitlines() if line.startswith("::")]
    assert lines and all(GITHUB_LINE.match(line) for line in lines)
    assert len(lines) == len(example_findings())
    assert result.exit_code == 1


@pytest.mark.skipif("sarif" not in CLI_FORMATS, reason="cli.py does not offer the sarif format yet")
def test_cli_sarif_output_is_valid(validator):
    from click.testing import CliRunner

    from mhalint.cli.main import main

    old = os.getcwd()
    os.chdir(REPO)
    try:
        result = CliRunner().invoke(main, ["check", "--output-format", "sarif", "examples/"])
    finally:
        os.chdir(old)
    assert_valid(validator, json.loads(result.stdout))
