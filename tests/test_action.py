"""action.yml, the GitHub Action: its steps' commands run here as GitHub's runner would run them (bash -eo
pipefail, the inputs in the step's environment), on a scratch repository (issue 39 item 2)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

import mhalint

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
SCHEMA = json.loads((Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json").read_text())


def _step(name: str) -> dict:
    return next(step for step in ACTION["runs"]["steps"] if step.get("name") == name)


def _run(step: dict, cwd: Path, inputs: dict[str, str], path: str) -> subprocess.CompletedProcess:
    """The step's script as the runner runs it: `bash --noprofile --norc -eo pipefail`, its `env` with each
    `${{ inputs.X }}` replaced by the input given (else its default)."""
    assert step["shell"] == "bash"
    values = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()} | inputs
    env = {key: str(value) for key, value in step.get("env", {}).items()}
    for key, value in env.items():
        for name, given in values.items():
            value = value.replace("${{ inputs.%s }}" % name, given)
        assert "${{" not in value, value
        env[key] = value
    script = cwd.parent / "step.sh"
    script.write_text(step["run"])
    environment = {**os.environ, **env, "PATH": path, "GITHUB_ACTION_PATH": str(ROOT)}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=cwd,
                          env=environment, capture_output=True, text=True, timeout=300)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    root = tmp_path / "repository"
    (root / "src").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "mha001_batch_first_default_bad.py", root / "src" / "model.py")
    shutil.copy(ROOT / "examples" / "mha001_batch_first_default_fixed.py", root / "src" / "fixed.py")
    return root


def test_the_action_takes_args_version_and_src_and_pins_its_python():
    assert ACTION["runs"]["using"] == "composite"
    assert {"args", "version", "src", "sarif"} <= set(ACTION["inputs"])
    setup = ACTION["runs"]["steps"][0]
    assert setup["uses"].startswith("actions/setup-python@")
    assert setup["with"]["python-version"] == "${{ inputs.python-version }}"
    assert ACTION["inputs"]["python-version"]["default"] == "3.11"


@pytest.mark.parametrize(("version", "installed"), [
    ("", "{action}"),  # the action's own copy: the release its `uses:` ref names
    ("0.2.0", "mhalint @ git+{home}@v0.2.0"),
])
def test_the_install_step_installs_the_action_or_the_release_asked_for(repository, tmp_path, monkeypatch, version,
                                                                       installed):
    shims = tmp_path / "shims"
    shims.mkdir()
    python = shims / "python"  # records what pip is asked to install, instead of installing it
    python.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$RECORD"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    record = tmp_path / "record"
    monkeypatch.setenv("RECORD", str(record))
    done = _run(_step("Install mhalint"), repository, {"version": version}, f"{shims}:{os.environ['PATH']}")
    assert done.returncode == 0, done.stderr
    assert record.read_text().splitlines() == ["-m", "pip", "install", "--quiet",
                                               installed.format(action=ROOT, home=mhalint.HOME)]


def test_the_check_step_annotates_the_findings_writes_valid_sarif_and_fails(repository):
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # the mhalint this test suite runs
    done = _run(_step("Check"), repository, {"src": "src", "sarif": "mhalint.sarif"}, path)
    assert done.returncode == 1, done.stderr  # findings: the step fails, as `mhalint check` exits
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::")]
    assert len(annotations) == 1 and annotations[0].startswith("::error file=src/model.py,line=20,")
    assert "title=MHA001 batch-first-default::" in annotations[0]
    log = json.loads((repository / "mhalint.sarif").read_text())
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert [result["ruleId"] for run in log["runs"] for result in run["results"]] == ["MHA001"]


def test_the_check_step_passes_on_clean_code(repository):
    (repository / "src" / "model.py").unlink()
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    done = _run(_step("Check"), repository, {"src": "src"}, path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [line for line in done.stdout.splitlines() if line.startswith("::")]
