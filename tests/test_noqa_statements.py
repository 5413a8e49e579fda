"""`# noqa` directives read from the top-level statements that mention noqa, each tokenized alone, are those
of tokenizing the whole file (mhalint.run.noqa with statement lines, as the engine calls it)."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from mhalint.finding import Finding, Severity
from mhalint.parse.positions import first_lines
from mhalint.run import noqa

STATEMENTS = [
    "import os  # noqa: F401\n",
    "x = 1\n",
    "a = 1; b = 2  # noqa: MHA001\n",
    "s = '# noqa: MHA002 in a string'\n",
    'doc = """\nnot a directive # noqa: MHA003\n"""  # noqa: MHA004\n',
    "# a comment between statements  # noqa: MHA005\n",
    "\n",
    "@decorate  # noqa: MHA006\ndef f(x):\n    # noqa: MHA007 in the body\n    return x  # NOQA\n",
    "class A:\n    def g(self):\n        y = (1,\n             2)  # noqa:MHA008,MHA009\n        return y\n",
    "value = 1 + \\\n    2  # noqa\n",
    "f'{x}'  # noqa: MHA010\n",
    "if x:\n    pass\nelse:  # noqa: MHA011\n    pass\n",
]


def _whole_and_by_statement(source: str):
    whole = noqa._scan(source).directives
    by_statement = noqa._directives_by_statement(source, first_lines(ast.parse(source)))
    return whole, by_statement


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=8), st.sampled_from(["\n", "\r\n"]),
       st.booleans())
def test_directives_by_statement_are_those_of_the_whole_file(statements, newline, final_newline):
    source = "".join(statements).replace("\n", newline)
    if not final_newline:
        source = source.rstrip("\r\n")
    whole, by_statement = _whole_and_by_statement(source)
    assert by_statement == whole


def test_suppression_and_unused_directives_do_not_depend_on_how_the_file_is_read():
    source = "".join(STATEMENTS)
    findings = [Finding("m.py", 3, 1, "MHA001", severity=Severity.ERROR, message="m"),
                Finding("m.py", 14, 5, "MHA007", severity=Severity.ERROR, message="m")]
    enabled = {f"MHA00{number}" for number in range(1, 10)}
    whole = noqa.suppress(findings, source, path="m.py", enabled=enabled)
    by_statement = noqa.suppress(findings, source, path="m.py", enabled=enabled,
                                 statement_lines=first_lines(ast.parse(source)))
    assert [f.to_dict() for f in by_statement] == [f.to_dict() for f in whole]
    assert "MHA001" not in {f.code for f in whole} and any(f.code == noqa.UNUSED_NOQA for f in whole)
