"""mhalint's built-in rules, one module per pitfall (installed as the package `mhalint.rules`).

They are registered through the `mhalint.rules` entry-point group in pyproject.toml, exactly as a third-party
plugin registers its rules; nothing in the engine imports them by name.
"""
