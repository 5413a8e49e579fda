"""Output formats: one module per format, each a `render(findings, rules=None) -> str`.

`rules` is `mhalint.rule.load_rules()` (code -> rule class); only the formats that describe rules (SARIF) use it,
the others accept and ignore it so the command line can call every format the same way. An empty string means
there is nothing to print.
"""
