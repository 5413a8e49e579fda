"""Every loaded rule's `valid` and `invalid` examples run as tests, so a rule's documentation cannot drift: the
static ones through the linter, the runtime ones under the runtime guard."""

from __future__ import annotations

import warnings

import pytest

from mhalint.cli import ruledocs
from mhalint.rule import load_rules, runtime_only

RULES = load_rules()


def _examples(kind: str):
    for code, rule in RULES.items():
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(code, example, id=f"{code}-{kind}-{index}")


def test_every_rule_has_examples():
    assert set(RULES) >= {"MHA001", "MHA002", "MHA003", "MHA004", "MHA101"}
    for code, rule in RULES.items():
        if not runtime_only(rule):
            assert rule.valid, f"{code} has no valid examples"
            assert rule.invalid, f"{code} has no invalid examples"
        if rule.guard is not None:
            assert rule.runtime_valid, f"{code} has a runtime check and no runtime valid examples"
            assert rule.runtime_invalid, f"{code} has a runtime check and no runtime invalid examples"


def _guarded(torch, code: str, example) -> list:
    """The guard's reports of `code` while the example runs (the example is this project's own code)."""
    import mhalint

    program = compile(example.code, f"<{code} runtime example>", "exec")
    if "flex_attention" in example.code:
        # flex_attention runs through dynamo, whose cache outlives the test that filled it: a frame compiled by
        # another test in this worker makes dynamo's recompilation check raise inside torch (torch 2.13:
        # guards.recompilation_reason_for_no_tensor_aliasing_guard), so the example starts from an empty cache
        torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mhalint.guard() as guard:
            exec(program, {"__name__": "__main__"})  # noqa: S102
    return [entry.report for entry in guard.reports() if entry.report.code == code]


@pytest.mark.parametrize(("code", "example"), list(_examples("runtime_valid")))
def test_runtime_valid_example_is_not_reported(torch, code, example):
    assert _guarded(torch, code, example) == []


@pytest.mark.parametrize(("code", "example"), list(_examples("runtime_invalid")))
def test_runtime_invalid_example_is_reported_at_its_line(torch, code, example):
    reports = _guarded(torch, code, example)
    assert reports, f"{code} was not reported for:\n{example.code}"
    assert reports[0].site.lineno == example.line
    assert example.message in reports[0].headline, reports[0].headline


@pytest.mark.parametrize(("code", "example"), list(_examples("valid")))
def test_valid_example_is_not_flagged(lint, code, example):
    found = lint(example.code, select=code)
    assert [f for f in found if f.code == code] == []
    # an internal error (MHA902) would also mean the rule never really looked at the example
    assert [f for f in found if f.code.startswith("MHA9")] == []


@pytest.mark.parametrize(("code", "example"), list(_examples("invalid")))
def test_invalid_example_is_flagged(lint, code, example):
    found = lint(example.code, select=code)
    assert [f for f in found if f.code.startswith("MHA9")] == []
    mine = [f for f in found if f.code == code]
    assert mine, f"{code} did not flag:\n{example.code}"
    first = mine[0]
    if example.line is not None:
        assert first.line == example.line
    if example.message is not None:
        assert example.message in first.message
    if example.headline is not None:
        assert first.message == example.headline
    if example.severity is not None:
        assert first.severity == example.severity


@pytest.mark.parametrize(("code", "example"), list(_examples("invalid")))
def test_invalid_example_is_pinned_whole(code, example):
    """Every built-in invalid example pins the whole headline of its first finding, its severity, and what `--fix
    --unsafe-fixes` makes of it (`fixed`, None where the rule offers no fix), as Fixit's examples do."""
    assert example.headline is not None and example.severity is not None, f"{code}: an example not pinned"
    _, fixed = ruledocs.example_outcome(RULES[code], example.code)
    assert fixed == example.fixed


def test_an_example_written_as_an_indented_block_is_the_module_it_shows():
    from mhalint.rule import Invalid, Valid

    block = Invalid("""
        import torch
        def f(x):
            return x
        """, line=3, fixed="""
        import torch
        def f(y):
            return y
        """)
    assert block.code == "import torch\ndef f(x):\n    return x\n"
    assert block.fixed == "import torch\ndef f(y):\n    return y\n"
    flat = "import torch\n\ndef f(x):\n    return x\n"  # as third-party rules write them: kept as it is
    assert Valid(flat).code == flat and Invalid(flat, fixed=flat).fixed == flat
