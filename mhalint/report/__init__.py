"""Output formats: one module per format, each a `render(findings, rules=None, options=RenderOptions()) -> str`.

`rules` is `mhalint.rule.load_rules()` (code -> rule class); only the formats that describe rules (SARIF) use it.
`options` are the reader's choices that only the human-readable `full` format has a use for. The others accept
and ignore both, so the command line can call every format the same way. An empty string means there is nothing
to print.

What each format shows of a finding: `concise`, `github` and flake8 print its headline (at most 160 characters);
`full` the headline, a code frame, the evidence, the help line and the probe's result, and the explanation with
`--explain`; `json`, `json-lines` and `sarif` carry every field.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RenderOptions:
    explain: bool = False  # show each finding's explanation (the long why)
    color: bool = False  # style the text with ANSI escapes
