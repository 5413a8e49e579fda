"""Notebooks are checked cell by cell: findings point at `notebook.ipynb:cell N:line:col`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mhalint.cli.main import main
from mhalint.parse.notebook import Notebook


def notebook(path: Path, *cells: tuple[str, str]) -> Path:
    path.write_text(json.dumps({
        "cells": [{"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True),
                   **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                  for kind, source in cells],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_finding_points_at_cell_line_and_column(tmp_path: Path):
    path = notebook(tmp_path / "demo.ipynb",
                    ("markdown", "# Attention demo\n"),
                    ("code", "import torch.nn as nn\n"),
                    ("code", "x = 1\nattn = nn.MultiheadAttention(64, 8)\n"))
    result = run("check", str(path))
    assert result.output.startswith(f"{path}:cell 3:2:8: MHA001 ")
    detailed = run("check", "--output-format", "full", str(path))
    assert "evidence: the constructor at cell 3 line 2" in detailed.output  # lines in evidence name the cell
    assert result.exit_code == 1


def test_json_output_carries_the_cell(tmp_path: Path):
    path = notebook(tmp_path / "demo.ipynb", ("code", "import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\n"))
    finding = json.loads(run("check", "--output-format", "json", str(path)).output)[0]
    assert (finding["path"], finding["cell"], finding["line"], finding["column"]) == (str(path), 1, 2, 8)


def test_full_format_frames_the_cell_as_written(tmp_path: Path):
    """The code frame shows the finding's own cell, magics as the user wrote them, with the caret under the call."""
    path = notebook(tmp_path / "demo.ipynb",
                    ("markdown", "# Attention demo\n"),
                    ("code", "import torch.nn as nn\n%time x = 1\nattn = nn.MultiheadAttention(64, 8)\n"))
    lines = run("check", "--output-format", "full", str(path)).output.splitlines()
    assert f" --> {path}:cell 2:3:8" in lines
    frame = lines[lines.index(f" --> {path}:cell 2:3:8") + 1:]
    assert frame[1:5] == ["1 | import torch.nn as nn", "2 | %time x = 1", "3 | attn = nn.MultiheadAttention(64, 8)",
                          "  |        " + "^" * len("nn.MultiheadAttention(64, 8)")]


def test_magics_and_shell_lines_do_not_break_parsing_or_columns(tmp_path: Path):
    path = notebook(tmp_path / "demo.ipynb",
                    ("code", "%matplotlib inline\n!pip install einops\nimport torch.nn as nn\n"),
                    ("code", "files = !ls\n  %time y = 2\nattn = nn.MultiheadAttention(64, 8)\n"),
                    ("code", "%%bash\necho this is not python (\n"))
    result = run("check", str(path))
    assert [line.split(": ")[0] for line in result.output.splitlines()[:-1]] == [f"{path}:cell 2:3:8"]
    assert "MHA900" not in result.output


def test_noqa_inside_a_cell(tmp_path: Path):
    path = notebook(tmp_path / "demo.ipynb",
                    ("code", "import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)  # noqa: MHA001\n"))
    assert run("check", str(path)).exit_code == 0


def test_invalid_notebook_is_reported_and_the_rest_still_checked(tmp_path: Path):
    (tmp_path / "broken.ipynb").write_text("{not json")
    (tmp_path / "model.py").write_text("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\n")
    result = run("check", str(tmp_path))
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{tmp_path / 'broken.ipynb'}:1:1: MHA901 [error] could not read this file: not a "
                               f"valid notebook")
    assert lines[1].startswith(f"{tmp_path / 'model.py'}:2:8: MHA001")
    assert result.exit_code == 1


def test_syntax_error_in_a_cell_is_located_in_that_cell(tmp_path: Path):
    path = notebook(tmp_path / "demo.ipynb", ("code", "import torch.nn as nn\n"),
                    ("code", "nn.MultiheadAttention(\n"))
    result = run("check", str(path))
    assert f"{path}:cell 2:" in result.output and "MHA900" in result.output


def test_line_map_covers_every_joined_line():
    raw = json.dumps({"cells": [{"cell_type": "code", "source": ["a = 1\n", "b = 2"]},
                                {"cell_type": "raw", "source": ["ignored"]},
                                {"cell_type": "code", "source": "c = 3\n"}]}).encode()
    parsed = Notebook.parse(raw)
    assert parsed.source == "a = 1\nb = 2\nc = 3\n"
    assert parsed.cells == ((1, 1), (1, 2), (3, 1))


# ---- issue 16: cell magics whose body is Python, and fixes (through the real command line, in a subprocess) -----
IMPORTS = "import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n"
DISCARDS = "y = attn(q, q, q)[0]\n"  # MHA007, with a safe fix: need_weights=False


def mhalint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def reported(completed: subprocess.CompletedProcess, path: Path) -> list[str]:
    """`cell N:line:col: CODE` of each finding."""
    return [line[len(f"{path}:"):].split(" [")[0] for line in completed.stdout.splitlines()
            if line.startswith(f"{path}:")]


@pytest.mark.parametrize("magic", ["%%time", "%%timeit -n 3 -r 1", "%%capture output", "%%prun -s cumulative"])
def test_a_cell_magic_whose_body_is_python_is_checked(tmp_path: Path, magic: str):
    path = notebook(tmp_path / "nb.ipynb", ("code", IMPORTS), ("code", f"{magic}\nq = 1\n{DISCARDS}"))
    assert reported(mhalint(str(path), cwd=tmp_path), path) == ["cell 2:3:5: MHA007"]


@pytest.mark.parametrize("magic", ["%%bash", "%%writefile model.py", "%%html", "%%script python"])
def test_other_cell_magics_stay_skipped(tmp_path: Path, magic: str):
    path = notebook(tmp_path / "nb.ipynb", ("code", IMPORTS), ("code", f"{magic}\n{DISCARDS}"))
    completed = mhalint(str(path), cwd=tmp_path)
    assert completed.returncode == 0 and reported(completed, path) == [], completed.stdout


def nbformat_notebook(path: Path, indent, ensure_ascii: bool, end: str) -> str:
    """A notebook as Jupyter writes it: metadata, outputs, non-ASCII text, a `source` as a list of lines and one as
    a string, a `%%time` cell with a line magic."""
    document = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Démo – attention\n"]},
        {"cell_type": "code", "execution_count": 1, "metadata": {"tags": ["setup"]},
         "outputs": [{"name": "stdout", "output_type": "stream", "text": ["prêt ✓\n"]}],
         "source": IMPORTS.splitlines(keepends=True)},
        {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
         "source": ["%%time\n", "%matplotlib inline\n", "q = 1\n", DISCARDS.rstrip("\n")]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": "z = 2\n" + DISCARDS},
    ], "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(document, indent=indent, ensure_ascii=ensure_ascii) + end
    path.write_text(text, encoding="utf-8")
    return text


LAYOUTS = [pytest.param(1, False, "\n", id="nbformat"), pytest.param(2, True, "", id="indent-2-ascii"),
           pytest.param(None, False, "", id="one-line")]


@pytest.mark.parametrize(("indent", "ensure_ascii", "end"), LAYOUTS)
def test_fix_edits_only_the_cells_and_keeps_the_json_layout(tmp_path: Path, indent, ensure_ascii: bool, end: str):
    path = tmp_path / "nb.ipynb"
    before = nbformat_notebook(path, indent, ensure_ascii, end)
    completed = mhalint("--fix", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Fixed 2 findings." in completed.stdout
    assert path.read_text(encoding="utf-8") == before.replace(
        '"y = attn(q, q, q)[0]"', '"y = attn(q, q, q, need_weights=False)[0]"').replace(
        'y = attn(q, q, q)[0]\\n"', 'y = attn(q, q, q, need_weights=False)[0]\\n"')
    assert before.count("y = attn(q, q, q)[0]") == 2  # both forms of `source` were there to fix


def test_diff_shows_each_changed_cell_and_writes_nothing(tmp_path: Path):
    path = tmp_path / "nb.ipynb"
    before = nbformat_notebook(path, 1, False, "\n")
    completed = mhalint("--diff", str(path), cwd=tmp_path)
    assert completed.returncode == 1
    assert completed.stdout.startswith(
        f"--- {path}:cell 3\n+++ {path}:cell 3\n@@ -1,4 +1,4 @@\n %%time\n %matplotlib inline\n q = 1\n"
        f"-y = attn(q, q, q)[0]\n+y = attn(q, q, q, need_weights=False)[0]\n"
        f"--- {path}:cell 4\n+++ {path}:cell 4\n@@ -1,2 +1,2 @@\n z = 2\n"
        f"-y = attn(q, q, q)[0]\n+y = attn(q, q, q, need_weights=False)[0]\n"), completed.stdout
    assert path.read_text(encoding="utf-8") == before


def test_a_notebook_whose_json_layout_cannot_be_kept_is_not_rewritten(tmp_path: Path):
    path = tmp_path / "nb.ipynb"
    before = nbformat_notebook(path, 1, False, "\n").replace('"nbformat": 4', '"nbformat" :  4')
    path.write_text(before, encoding="utf-8")
    completed = mhalint("--fix", str(path), cwd=tmp_path)
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [
        f"mhalint: error: cannot fix {path}: its JSON layout is not one mhalint can write back unchanged; nothing "
        f"was written"]
    assert path.read_text(encoding="utf-8") == before


def test_a_read_only_notebook_is_refused_like_any_file(tmp_path: Path):
    path = tmp_path / "nb.ipynb"
    before = nbformat_notebook(path, 1, False, "\n")
    path.chmod(0o444)
    completed = mhalint("--fix", str(path), cwd=tmp_path)
    assert completed.returncode == 2 and "the file is read-only (mode 444)" in completed.stderr
    assert path.read_text(encoding="utf-8") == before


def test_add_noqa_edits_the_cells_of_a_notebook(tmp_path: Path):
    path = notebook(tmp_path / "demo.ipynb",
                    ("code", "%matplotlib inline\nimport torch.nn as nn\n"),
                    ("markdown", "# attention\n"),
                    ("code", "files = !ls\nattn = nn.MultiheadAttention(64, 8)\n"))
    before = json.loads(path.read_text())
    added = mhalint("--add-noqa=legacy", str(path), cwd=tmp_path)
    assert (added.returncode, added.stderr) == (0, "Added 1 noqa directive.\n")
    after = json.loads(path.read_text())
    assert after["cells"][2]["source"] == ["files = !ls\n",
                                           "attn = nn.MultiheadAttention(64, 8)  # noqa: MHA001 legacy\n"]
    assert after["cells"][:2] == before["cells"][:2] and after["metadata"] == before["metadata"]
    assert mhalint(str(path), cwd=tmp_path).returncode == 0
