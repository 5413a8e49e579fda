"""Each rule's documentation as a Markdown file the editor can open: a diagnostic's code links to it
(`codeDescription`), and the hover shows the same text. mhalint has no web site, and the documentation of a
plugin's rule lives in the plugin, so the files are written from the loaded rules, where the user's cache is
(`$XDG_CACHE_HOME/mhalint/rule-docs`, else `~/.cache/...`, else the temporary directory)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping

from mhalint import __version__
from mhalint.cli import ruledocs
from mhalint.run.diagnostics import ENGINE_CODES


class RuleDocs:
    def __init__(self, rules: Mapping[str, type], directory: Path | None = None):
        self.rules = rules
        self.directory = directory
        self._uris: dict[str, str | None] = {}

    def text(self, code: str) -> str | None:
        """The documentation of a rule or an engine code (`mhalint rule CODE`'s text), or None for another code."""
        if code in self.rules:
            return ruledocs.text(self.rules[code])
        return ruledocs.engine_text(code) if code in ENGINE_CODES else None

    def uri(self, code: str) -> str | None:
        """A file: URI of the code's documentation, written on first need; None where it cannot be written."""
        if code not in self._uris:
            text = self.text(code)
            self._uris[code] = _written(self._directory(), f"{code}.md", text) if text is not None else None
        return self._uris[code]

    def _directory(self) -> Path:
        if self.directory is None:
            cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            self.directory = Path(cache) / "mhalint" / "rule-docs" / __version__
        return self.directory


def _written(directory: Path, name: str, text: str) -> str | None:
    """The URI of `directory/name` holding `text` (written atomically, when it differs), falling back to the
    temporary directory when the cache cannot be written."""
    for folder in (directory, Path(tempfile.gettempdir()) / f"mhalint-rule-docs-{os.getuid()}" / __version__):
        path = folder / name
        try:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                folder.mkdir(parents=True, exist_ok=True)
                temporary = folder / f".{name}.{os.getpid()}.tmp"
                temporary.write_text(text, encoding="utf-8")
                os.replace(temporary, path)
            return path.as_uri()
        except (OSError, UnicodeError):
            continue
    return None
