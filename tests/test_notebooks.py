"""Notebooks are checked cell by cell: findings point at `notebook.ipynb:cell N:line:col`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mhalint.cli import main
from mhalint.notebook import Notebook


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
