"""Hostile settings (issue 34): mhalint runs on untrusted repositories, so whatever their mhalint.toml, the command
line or an editor's options say, the outcome is a run or a one-line error (exit 2; the server: a message and the
defaults), never a traceback. Every numeric setting has one range (mhalint/configuration/schema.py) that all three enforce."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from invoke import invoke

from mhalint.configuration import config, schema
from mhalint.server.options import KNOWN, ClientOptions, OptionsError

TRIGGER = "import torch.nn as nn\nattn = nn.MultiheadAttention(60, 5)\n"  # a finding: the rules and budgets run
EXAMPLES = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# What TOML and JSON can hold: ints of any size, floats with nan and inf, strings, nested lists and tables.
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
_SCALARS = st.booleans() | st.integers() | st.floats() | _TEXT
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                       max_leaves=6)
_PROBE = st.dictionaries(st.sampled_from([key.split(".")[1] for key in schema.NUMBERS if key.startswith("probe.")]),
                         _VALUES | st.integers() | st.floats(), min_size=1)
_NEAR_BOUNDS = st.sampled_from([number for entry in schema.NUMBERS.values()
                                for number in (entry.low, entry.high, entry.high + 1, -entry.low, 10**400)])


def toml(value) -> str:
    """`value` as a TOML inline value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(map(toml, value)) + "]"
    return "{" + ", ".join(f"{toml(key)} = {toml(item)}" for key, item in value.items()) + "}"


def in_range(key: str, value) -> bool:
    """Whether `value` is a number of the schema's kind within its range, as the test reads the table."""
    number = schema.NUMBERS[key]
    kinds = int if number.kind is int else int | float
    return isinstance(value, kinds) and not isinstance(value, bool) and number.low <= value <= number.high


def assert_used_or_refused_in_one_line(result, *, refused: bool) -> None:
    """Exit 0 or 1 (no findings, findings), or exit 2 with one line on stderr; exit 2 when `refused`."""
    assert result.exit_code in ((2,) if refused else (0, 1, 2)), (result.exit_code, result.stderr)
    if result.exit_code == 2:
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("mhalint: error: "), result.stderr


@pytest.fixture(scope="module")
def folder():
    with tempfile.TemporaryDirectory() as name:
        (Path(name) / "model.py").write_text(TRIGGER)
        yield Path(name)


# ---- the issue's examples ----


@pytest.mark.parametrize(("body", "says"), [
    ("[probe]\nmemory = 9223372036854775807\n", "`probe.memory` must be a whole number of MB from 256 to "),
    ("[probe]\ntotal-timeout = 1e308\n", "`probe.total-timeout` must be a number of seconds from 1 to "),
    ("[probe]\ntimeout = nan\n", "`probe.timeout` must be a number of seconds from 0.1 to 3,600 (got nan)"),
    ("file-time-limit = inf\n", "`file-time-limit` must be a number of seconds from 0.1 to 86,400 (got inf)"),
    (f"file-memory-limit = {10**400}\n", "`file-memory-limit` must be a whole number of MB from 1 to 1,048,576 "
                                         "(got an integer of 1,329 bits)"),
    ("select = " + "[" * 3000 + "]" * 3000 + "\n", "nested more deeply than mhalint reads"),
])
def test_the_issues_hostile_files_are_one_line_errors(tmp_path: Path, body: str, says: str):
    (tmp_path / "model.py").write_text(TRIGGER)
    (tmp_path / "mhalint.toml").write_text(body)
    for args in (("--show-settings",), ()):
        result = invoke("check", "--no-cache", *args, "model.py", cwd=tmp_path)
        assert_used_or_refused_in_one_line(result, refused=True)
        assert says in result.stderr


@pytest.mark.parametrize(("option", "value"), [("--probe-total-timeout", "1e308"), ("--probe-timeout", "nan"),
                                               ("--probe-memory", "9223372036854775807"), ("--jobs", "0")])
def test_the_issues_hostile_options_are_usage_errors(folder: Path, option: str, value: str):
    result = invoke("check", "--show-settings", option, value, "model.py", cwd=folder)
    assert result.exit_code == 2
    [error] = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert error.startswith(f"Error: Invalid value for '{option}': must be ")


# ---- any value, for every key ----


@EXAMPLES
@given(table=st.dictionaries(st.sampled_from(config.KNOWN_KEYS) | _TEXT, _VALUES | _NEAR_BOUNDS, min_size=1,
                             max_size=3),
       probe=st.none() | _PROBE)
def test_any_configuration_is_used_or_refused_in_one_line(folder: Path, table: dict, probe: dict | None):
    if probe is not None:
        table["probe"] = probe
    (folder / "mhalint.toml").write_text("".join(f"{toml(key)} = {toml(value)}\n" for key, value in table.items()))
    numbers = {**table, **{f"probe.{key}": value for key, value in (probe or {}).items()}}
    refused = any(not in_range(key, value) for key, value in numbers.items() if key in schema.NUMBERS)
    result = invoke("check", "--no-cache", ".", cwd=folder)
    assert_used_or_refused_in_one_line(result, refused=refused)


_OPTIONS = {"--probe-timeout": "probe.timeout", "--probe-total-timeout": "probe.total-timeout",
            "--probe-memory": "probe.memory", "--jobs": "jobs"}


@EXAMPLES
@given(option=st.sampled_from(sorted(_OPTIONS)),
       value=st.integers().map(str) | st.floats().map(str) | _NEAR_BOUNDS.map(str) | _TEXT)
def test_any_option_value_is_used_within_its_range_or_refused(tmp_path_factory, option: str, value: str):
    folder = tmp_path_factory.mktemp("options")
    result = invoke("check", "--show-settings", f"{option}={value}", cwd=folder)
    assert result.exit_code in (0, 2), result.stderr
    if result.exit_code == 2:  # click's usage error: usage lines, then one line that says what is wrong
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
        assert len(errors) == 1 and errors[0].startswith(f"Error: Invalid value for '{option}': must be "), errors
        return
    key = _OPTIONS[option]
    [shown] = [line for line in result.stdout.splitlines() if line.split(" = ")[0].strip() == key]
    assert in_range(key, json.loads(shown.split(" = ")[1].split("  #")[0]))


_JSON = st.recursive(st.none() | _SCALARS,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                     max_leaves=6)


@EXAMPLES
@example({"debounce": 10**400})
@example({"debounce": 1e300})
@given(raw=st.dictionaries(st.sampled_from([*KNOWN, "minSeverity", "extendSelect"]), _JSON | _NEAR_BOUNDS,
                           max_size=3) | _JSON)
def test_any_client_options_are_used_within_range_or_refused_in_one_line(raw):
    try:
        options = ClientOptions.parse(raw)
    except OptionsError as error:
        assert len(str(error).splitlines()) == 1 and len(str(error)) < 400
        return
    assert raw is None or isinstance(raw, dict)
    if raw and "debounce" in raw:
        assert in_range("debounce", raw["debounce"])
    assert 0 <= options.debounce <= schema.NUMBERS["debounce"].high / 1000
