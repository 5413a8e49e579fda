"""The documentation users read is generated from the rules, and the rules keep the promises of their docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mhalint.cli import ruledocs
from mhalint.rule import DOC_SECTIONS, load_rules
from mhalint.run.engine import Checker

RULES = load_rules()
README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_rules_table_matches_the_rules():
    text = README.read_text()
    table = text.split(ruledocs.TABLE_START, 1)[1].split(ruledocs.TABLE_END, 1)[0].strip()
    assert table == ruledocs.markdown_table(RULES), (
        "README's rules table is out of date: paste the output of `mhalint rule --all --output-format markdown`")


def test_the_docs_have_a_paragraph_for_every_rule():
    """The static rules in docs/pitfalls.md, the guard's own (MHA1xx) in docs/guard.md."""
    text = "".join((README.parent / "docs" / page).read_text() for page in ("pitfalls.md", "guard.md"))
    for code, rule in RULES.items():
        assert re.search(rf"\*\*{code} {re.escape(rule.name)}\.\*\*", text), f"no docs paragraph for {code}"


@pytest.mark.parametrize("code", sorted(RULES))
def test_every_rule_documents_the_ruff_sections_in_order(code):
    sections = list(RULES[code].doc_sections())
    assert sections == list(DOC_SECTIONS), f"{code} has sections {sections}"


@pytest.mark.parametrize("code", sorted(RULES))
def test_fix_safety_section_matches_the_fixes_the_rule_offers(code):
    rule = RULES[code]
    promised = ruledocs.fix_availability(rule)
    offered = {f.fix.applicability for example in rule.invalid
               for f in Checker([rule]).check_source(example.code.encode(), "example.py") if f.fix is not None}
    if promised == "none":
        assert offered == set(), f"{code} says it has no fix but offers {offered}"
    else:
        assert offered == {promised}, f"{code} promises {promised} fixes; its invalid examples give {offered}"


# ------------------------------------------------------------------------------------- a README a stranger can follow
ROOT = README.parent


def _shell_lines(text: str) -> list[str]:
    """The lines of the README's sh, yaml and toml code blocks."""
    blocks = re.findall(r"```(?:sh|yaml|toml)\n(.*?)```", text, re.DOTALL)
    return [line for block in blocks for line in block.splitlines()]


def test_every_pip_install_that_can_pull_torch_pins_it():
    """An open range lets pip resolve torch to a multi-GB CUDA build; the facts were measured with 2.13.0."""
    installs = [line for line in _shell_lines(README.read_text()) if "pip install" in line]
    assert installs
    for line in installs:
        if re.search(r"torch|probe|\[test", line):
            assert "torch==2.13.0" in line, line
            assert not re.search(r"torch(?!==2\.13\.0)[<>=~!]", line), line


def test_mhalint_is_installed_from_the_repository_not_a_package_index():
    for line in _shell_lines(README.read_text()):
        assert not re.search(r"pip install\s+['\"]?mhalint\b(?!\s*@)", line), f"mhalint is on no index: {line}"


def test_readme_links_the_project_docs_and_they_exist():
    text = README.read_text()
    for document in ("docs/torch-facts.md", "docs/architecture.md", "docs/experiments/", "docs/pitfalls.md",
                     "docs/command-line.md", "docs/configuration.md", "docs/integrations.md", "docs/editor.md",
                     "docs/probe.md", "docs/guard.md", "docs/guarantees.md", "docs/performance.md",
                     "docs/precision.md", "docs/sweep.md", "CONTRIBUTING.md", "CHANGELOG.md"):
        assert f"]({document}" in text, f"README does not link {document}"
        assert (ROOT / document).exists()


MARKDOWN = [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_of_a_page_names_a_file_that_exists(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # code blocks hold no links
    targets = [target.split("#", 1)[0] for target in re.findall(r"\]\(([^)\s]+)\)", text)]
    missing = [target for target in targets
               if target and not re.match(r"[a-z]+:", target) and not (page.parent / target).exists()]
    assert not missing, f"{page.name} links to files that do not exist: {missing}"


def test_the_readme_is_a_front_page():
    """At most 250 lines, and no dated measurement or commit hash: figures live in docs/, history in CHANGELOG.md."""
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "a date in the README"
    hashes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text)
    assert not hashes, f"commit hashes in the README: {hashes}"


def test_readme_test_command_is_the_one_ci_runs():
    command = "pip install 'torch==2.13.0' -e '.[test,probe]' && python -m pytest"
    assert command in README.read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install --quiet 'torch==2.13.0' -e '.[test,probe]'" in ci and "\npython -m pytest" in ci


def _project() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_version_is_one_everywhere_and_the_changelog_records_it():
    import mhalint

    version = _project()["version"]
    assert mhalint.__version__ == version
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", (ROOT / "CHANGELOG.md").read_text(),
                     re.MULTILINE), f"CHANGELOG.md has no entry for {version}"


def test_the_pre_commit_example_pins_this_versions_tag():
    rev = re.search(r"^\s+rev: (\S+)", (ROOT / "docs" / "integrations.md").read_text(), re.MULTILINE)
    assert rev, "the pre-commit snippet names no rev"
    assert rev[1] == "v" + _project()["version"]


def test_every_install_line_and_hook_uses_the_declared_home():
    import mhalint

    home = _project()["urls"]["Repository"]
    assert mhalint.HOME == home
    texts = {path.name: path.read_text() for path in [README, *sorted((ROOT / "docs").glob("*.md"))]}
    used = [(name, url) for name, text in texts.items()
            for url in re.findall(r"git\+(https?://[^\s\"'@]+)", text) + re.findall(r"^\s+- repo: (\S+)", text, re.M)
            if url != "local"]
    assert used, "no install line or pre-commit repo found"
    assert [(name, url) for name, url in used if url != home] == []
    action = "/".join(home.rstrip("/").split("/")[-2:]) + "@v" + _project()["version"]
    uses = [(name, found) for name, text in texts.items() for found in re.findall(r"uses: (mhalint/\S+)", text)]
    assert ("README.md", action) in uses and [found for _, found in uses if found != action] == []
    assert not [name for name, text in texts.items() if "this repository's URL" in text]


def test_mhalint_version_prints_the_version():
    import json

    from click.testing import CliRunner

    import mhalint
    from mhalint.cli.main import main

    assert CliRunner().invoke(main, ["version"]).output == f"mhalint {mhalint.__version__}\n"
    shown = json.loads(CliRunner().invoke(main, ["version", "--output-format", "json"]).output)
    assert shown == {"version": mhalint.__version__, "home": mhalint.HOME}


def test_the_readme_first_run_shows_what_mhalint_prints():
    import subprocess
    import sys

    shown = re.search(r"```\n(MHA001 \[error\].*?)```", README.read_text(), re.DOTALL)
    assert shown, "the README shows no finding in full"
    run = subprocess.run([sys.executable, "-m", "mhalint", "check", "--output-format", "full",
                          "examples/mha001_batch_first_default_bad.py"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith(shown[1]), "the README's first run is not what `mhalint check` prints today"


def test_the_generated_rule_pages_are_current():
    """docs/rules/ is written by scripts/docs.py from the rules: a page that differs is stale."""
    import runpy

    generator = runpy.run_path(str(ROOT / "scripts" / "docs.py"))
    pages = generator["pages"]()
    written = {path.name: path.read_text(encoding="utf-8") for path in (ROOT / "docs" / "rules").glob("*.md")}
    assert set(written) == set(pages), "docs/rules/ holds other pages than the rules give: run python scripts/docs.py"
    stale = [name for name, text in pages.items() if written[name] != text]
    assert not stale, f"stale pages {stale}: run python scripts/docs.py"


def test_the_site_navigation_lists_every_page():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md")]
    missing = [page for page in pages if not re.search(rf":?\s{re.escape(page)}$", nav, re.MULTILINE)]
    assert not missing, f"mkdocs.yml's nav leaves out {missing}"


def test_the_readmes_ruff_table_is_what_mhalint_check_has():
    from click.testing import CliRunner

    from mhalint.cli.main import main

    text = README.read_text()
    rows = [line for line in text[text.index("| present | absent |"):].splitlines()[2:] if line.startswith("| ")]
    assert rows, "no ruff table in the README"
    present = [flag for row in rows for flag in re.findall(r"`(--[a-z-]+)`", row.split(" | ")[0])]
    absent = [flag for row in rows for flag in re.findall(r"`(--[a-z-]+)[ =`]", row.split(" | ")[1])]
    options = CliRunner().invoke(main, ["check", "--help"], terminal_width=200).output
    offered = set(re.findall(r"(--[a-z-]+)", options))
    assert len(present) > 20 and [flag for flag in present if flag not in offered] == []
    assert [flag for flag in absent if flag in offered] == []
