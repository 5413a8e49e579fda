"""The places a finding's sentences name, so that a reader can go there: `line 12` of the finding's own file,
`cell 3 line 4` of its notebook, `train.py:8` of another file of the project.

Rules and analyses write a place in these three ways only (another file through `Project.display`, a notebook's
cell through `Notebook.locate`); the notebook relabels the first kind, and the language server turns all three
into an editor's related locations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LINE = re.compile(r"\bline (\d+)\b")  # a line of the finding's own file (of the joined module, in a notebook)
_PLACE = re.compile(r"\bcell (?P<cell>\d+) line (?P<cell_line>\d+)\b"
                    r"|(?<![\w/\\.])(?P<file>[\w.\-/\\]+\.pyi?):(?P<file_line>\d+)\b"
                    r"|\bline (?P<line>\d+)\b")


@dataclass(frozen=True)
class Place:
    """A 1-based line, in the finding's own file unless `path` (another file, as the sentence writes it: relative
    to the current directory or to the finding's file's directory) or `cell` (a notebook's 1-based cell) says."""

    line: int
    path: str | None = None
    cell: int | None = None


def places(text: str) -> list[Place]:
    """Every place `text` names, in the order it names them."""
    found = []
    for match in _PLACE.finditer(text):
        if match["cell"] is not None:
            found.append(Place(int(match["cell_line"]), cell=int(match["cell"])))
        elif match["file"] is not None:
            found.append(Place(int(match["file_line"]), path=match["file"]))
        else:
            found.append(Place(int(match["line"])))
    return found
