"""Scaffold a new rule: every file a rule needs, each with the places to fill marked `TODO`.

Writes, under the repository root (or `--root`):
  mhalint/rules/<name>.py              the rule: messages, ruff-style docs, examples, a visitor to write
  tests/test_<code>.py                 its tests beyond the examples (they fail until they are written)
  examples/<code>_<name>_bad.py        a program the rule must flag, and its `_fixed.py` twin
  docs/experiments/<name>.py           the torch experiment behind the rule's figures
and adds the rule to pyproject.toml's entry points, the experiment to docs/experiments/README.md, a section for
its facts to docs/torch-facts.md and its page to mkdocs.yml's navigation. It refuses a code or a name already
taken and writes nothing then. CONTRIBUTING.md says what comes next; the script prints it too.

Usage:
    python scripts/add_rule.py MHA016 head-split-order --summary "..." --trigger "view"
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RULE = '''\
"""{code} {name}: {summary}"""

from __future__ import annotations

from mhalint import torchapi
from mhalint.finding import Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

# Every text the rule reports. The headline names the problem and the decisive evidence in at most 160
# characters, its {{fields}} filled from the keyword arguments of `self.report`; help is one line; a number in
# the explanation cites its torch experiment.
FOUND = Message(
    "TODO: the problem and the evidence that decides it, e.g. {{api}} gets {{what}}",
    help="TODO: what to do about it, in one line",
    explanation="""
    TODO: the torch behaviour, and what it costs in the experiment (docs/torch-facts.md#{anchor}).""")


class {klass}(Rule):
    """
    ## What it does
    TODO: what the rule flags, and what it follows to decide.

    ## Why is this bad?
    TODO: the torch behaviour, with the figure of docs/experiments/{module}.py (docs/torch-facts.md#{anchor}).

    ## Known problems
    TODO: what it cannot see, and what it leaves alone on purpose.

    ## Example
    ```python
    TODO: the bug
    ```

    ## Use instead
    ```python
    TODO: the correct code
    ```

    ## Fix safety
    No automatic fix. (Or "Safe: ..." or "Unsafe: ...", as the fixes of the invalid examples are.)

    ## References
    - docs/torch-facts.md#{anchor}
    """

    code = "{code}"
    name = "{name}"
    summary = "{summary}"
    triggers = (torchapi.trigger(r"{trigger}"),)
    acts_on_passed_values = False

    valid = (  # TODO: correct code that looks like the bug, each left alone, as Valid("""<indented code>""")
    )
    invalid = (  # TODO: the bug, each with its line, whole headline, severity and `fixed` source where it has a fix
    )

    def visit_Call(self, node: cst.Call) -> None:
        """TODO: ask mhalint.analysis what the call is and what reaches it (calls.construction, values.resolve,
        masks.MaskReader, tensors.ShapeReader) and report with `self.report(node, FOUND, severity=...,
        evidence=[...], **fields)`: an error only where the code establishes the bug, a warning where a name or an
        idiom suggests it."""
'''

TEST = '''\
"""{code} {name}: the cases its examples do not cover (the examples run in tests/test_rule_examples.py)."""

from mhalint.finding import Severity


def test_{function}_reports_the_bug_at_error(lint):
    found = lint("""
        TODO: the bug, with the evidence that establishes it
    """, select="{code}")
    assert [(f.code, f.severity) for f in found] == [("{code}", Severity.ERROR)]


def test_{function}_leaves_the_correct_twin_alone(lint):
    found = lint("""
        TODO: the same code, correct
    """, select="{code}")
    assert found == []
'''

BAD = '''\
"""{code} {name}: TODO a small runnable program with the bug, flagged by `mhalint check` (tests/test_examples.py)."""
'''

FIXED = '''\
"""{code} {name}: TODO the program of {code_lower}_{module}_bad.py, corrected; `mhalint check` finds nothing."""
'''

EXPERIMENT = '''\
"""{code}: TODO what this experiment measures with torch.

docs/torch-facts.md#{anchor}. TODO how long it takes, and whether it is deterministic.
"""

from _helpers import fact

A = "{anchor}"

# TODO: re-create the pitfall on small tensors and print each figure the docs cite, as
# fact(A, "<key>", <value>) (the key is the first column of a row of the section's table).
'''

FACTS = '''

<a id="{anchor}"></a>
## TODO: the torch behaviour behind {code} {name}

TODO: what torch does, with the source lines of torch 2.13 that do it, and the figures
`docs/experiments/{module}.py` prints.

| fact | value |
|---|---|
'''


def _paths(root: Path, code: str, module: str) -> dict[str, Path]:
    lower = code.lower()
    return {"rule": root / "mhalint" / "rules" / f"{module}.py", "test": root / "tests" / f"test_{lower}.py",
            "bad": root / "examples" / f"{lower}_{module}_bad.py",
            "fixed": root / "examples" / f"{lower}_{module}_fixed.py",
            "experiment": root / "docs" / "experiments" / f"{module}.py"}


def _refusal(root: Path, code: str, name: str, paths: dict[str, Path]) -> str | None:
    if not re.fullmatch(r"[A-Z]{1,4}\d{3}", code):
        return f"{code!r} is not a rule code (letters and three digits, such as MHA016)"
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name):
        return f"{name!r} is not a rule name (kebab-case, such as head-split-order)"
    entry_points = (root / "pyproject.toml").read_text(encoding="utf-8")
    if re.search(rf"^{code} = ", entry_points, re.MULTILINE):
        return f"{code} is taken (pyproject.toml registers it)"
    if re.search(rf'^\s*name = "{re.escape(name)}"', "".join(
            path.read_text(encoding="utf-8") for path in (root / "mhalint" / "rules").glob("*.py")), re.MULTILINE):
        return f"{name} is taken by a rule in mhalint/rules/"
    taken = [str(path.relative_to(root)) for path in paths.values() if path.exists()]
    return f"these files exist already: {', '.join(taken)}" if taken else None


def scaffold(root: Path, code: str, name: str, summary: str, trigger: str) -> list[Path]:
    """Write the rule's files and registrations under `root`; the paths written or changed. Raises ValueError,
    having written nothing, when the code, the name or a file is taken."""
    module = name.replace("-", "_")
    paths = _paths(root, code, module)
    refusal = _refusal(root, code, name, paths)
    if refusal:
        raise ValueError(refusal)
    fields = {"code": code, "code_lower": code.lower(), "name": name, "module": module, "anchor": name,
              "summary": summary.replace('"', "'"), "trigger": trigger, "function": module,
              "klass": "".join(part.capitalize() for part in name.split("-"))}
    texts = {"rule": RULE, "test": TEST, "bad": BAD, "fixed": FIXED, "experiment": EXPERIMENT}
    for key, template in texts.items():
        paths[key].write_text(template.format(**fields), encoding="utf-8")
    changed = [*paths.values()]
    changed.append(_append_after_last(root / "pyproject.toml", r'^[A-Z]+\d{3} = "mhalint\.rules\.',
                                      f'{code} = "mhalint.rules.{module}:{fields["klass"]}"'))
    changed.append(_append_after_last(root / "docs" / "experiments" / "README.md", r"^\| `\w+\.py` \|",
                                      f"| `{module}.py` | [{name}](../torch-facts.md#{name}): {code} |"))
    changed.append(_append_after_last(root / "mkdocs.yml", r"^      - [A-Z]+0\d\d [a-z-]+: rules/",
                                      f"      - {code} {name}: rules/{code}.md"))
    facts = root / "docs" / "torch-facts.md"
    facts.write_text(facts.read_text(encoding="utf-8") + FACTS.format(**fields), encoding="utf-8")
    changed.append(facts)
    return changed


def _append_after_last(path: Path, pattern: str, line: str) -> Path:
    """Insert `line` after the last line of `path` that matches `pattern` (the list the new entry joins)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(index for index, text in enumerate(lines) if re.match(pattern, text))
    lines.insert(last + 1, line + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


NEXT = """
Next:
  1. pip install -e .                      registers {code} (an entry point of pyproject.toml)
  2. fill every TODO, starting with the experiment: the figures the docs and messages cite come from it
  3. python -m pytest tests/test_{lower}.py tests/test_rule_examples.py -k {code}
  4. python scripts/docs.py                 writes docs/rules/{code}.md
  5. mhalint rule --all --output-format markdown, pasted into the README's rules table, and a paragraph in
     docs/pitfalls.md; then the whole suite, python -m pytest
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("code", help="the rule's code, such as MHA016")
    parser.add_argument("name", help="its name, in kebab-case, such as head-split-order")
    parser.add_argument("--summary", required=True, help="one line: what it flags (the rules table's column)")
    parser.add_argument("--trigger", required=True,
                        help="a word (a regular expression) the code must hold for a file to be parsed")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    options = parser.parse_args(argv)
    try:
        changed = scaffold(options.root, options.code, options.name, options.summary, options.trigger)
    except ValueError as error:
        print(f"add_rule: {error}; nothing written", file=sys.stderr)
        return 2
    for path in changed:
        print(f"wrote {path.relative_to(options.root)}")
    print(NEXT.format(code=options.code, lower=options.code.lower()), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
