"""A check's findings printed in the chosen format: all at once, or file by file while the run goes on.

`concise`, `full` and `grouped` can be printed as each file's findings become final (the engine hands them over
in path order, so the output is the same as printed at the end), and a slow file then never hides the others';
`full`'s and `grouped`'s blocks stay separated by one empty line across files. The machine formats (json,
json-lines, sarif, github, junit, gitlab, pylint, rdjson, azure) are one document each and are printed whole.
`--statistics` prints one row per code instead of the findings.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Mapping, Sequence

from mhalint.cli.output import Output
from mhalint.finding import Finding
from mhalint.report import RenderOptions

if TYPE_CHECKING:
    from mhalint.rule import Rule

HUMAN = ("concise", "full", "grouped")  # the formats for people: a summary line ends them, and they can grow file
# by file; the blocks of those in BLOCKS stay one empty line apart across files
BLOCKS = ("full", "grouped")


class Printer:
    def __init__(self, module: str, output_format: str, rules: Mapping[str, type[Rule]], options: RenderOptions,
                 out: Output):
        self.format = output_format
        self._render = importlib.import_module(module).render
        self.rules = rules
        self.options = options
        self.out = out
        self._printed = False

    def findings(self, findings: Sequence[Finding]) -> None:
        """Print `findings`; a format in HUMAN may be called once per file, the others once in all."""
        text = self._render(findings, self.rules, self.options).rstrip("\n")
        if not text:
            return
        self.out.report(f"\n{text}" if self._printed and self.format in BLOCKS else text)
        self._printed = True

    def statistics(self, findings: Sequence[Finding]) -> None:
        """`--statistics`: a JSON array with the json format, ruff's table with the others."""
        from mhalint.report import statistics

        render = statistics.render_json if self.format == "json" else statistics.render
        text = render(findings, self.rules, self.options)
        if text:
            self.out.report(text)
