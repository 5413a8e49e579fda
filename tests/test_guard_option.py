"""`--mhalint-guard` is a flag, so a test id after it is a test id (issue 16, item 15), through real pytest runs in
a subprocess (the installed `pytest11` entry point loads the plugin, as for a user)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# test_padded shows a pitfall the guard reports (a sample whose keys are all padding: MHA101); test_other none.
TESTS = """
import torch
import torch.nn as nn


def test_padded():
    mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(3, 5, 16)
    padding = torch.zeros(3, 5, dtype=torch.bool)
    padding[1] = True
    with torch.no_grad():
        mha(x, x, x, key_padding_mask=padding)


def test_other():
    pass
"""


@pytest.fixture
def suite(torch, pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_model=TESTS)
    return pytester


def test_flag_before_a_test_id_runs_that_test_with_the_guard(suite: pytest.Pytester):
    result = suite.runpytest_subprocess("--mhalint-guard", "test_model.py::test_padded", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, warnings=1)  # only test_padded ran, and the guard warned
    assert "invalid choice" not in result.stderr.str()
    result.stdout.fnmatch_lines(["*mhalint guard*", "MHA101 fully-masked-rows *1x*test_model.py:11*",
                                 "*(warn mode)"])


@pytest.mark.parametrize("option", ["--mhalint-guard-mode=error", "--mhalint-guard=error"])
def test_the_mode_turns_the_guard_on_in_that_mode(suite: pytest.Pytester, option: str):
    result = suite.runpytest_subprocess(option, "test_model.py::test_padded", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AttentionGuardError: MHA101 *", "*(error mode)"])


def test_an_error_mode_failure_points_at_the_users_line_not_the_guards(suite: pytest.Pytester):
    """The failing test's traceback shows the attention call in the test (then torch's frames of the module call),
    without mhalint's own."""
    result = suite.runpytest_subprocess("--mhalint-guard-mode=error", "test_model.py::test_padded",
                                        "-p", "no:cacheprovider", "--tb=long")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "mha(x, x, x, key_padding_mask=padding)" in output
    assert ">           mha(x, x, x, key_padding_mask=padding)\n\ntest_model.py:11: " in output
    assert "mhalint/guard" not in output and "mhalint\\guard" not in output, output


def test_flag_and_mode_together(suite: pytest.Pytester):
    result = suite.runpytest_subprocess("--mhalint-guard-mode", "error", "--mhalint-guard", "test_model.py",
                                        "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=1)


@pytest.mark.parametrize("option, message", [
    ("--mhalint-guard=loud", "argument --mhalint-guard: ignored explicit argument 'loud'"),
    ("--mhalint-guard-mode=loud", "argument --mhalint-guard-mode: invalid choice: 'loud'"),
])
def test_an_unknown_mode_is_refused(pytester: pytest.Pytester, option: str, message: str):
    pytester.makepyfile(test_trivial="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
