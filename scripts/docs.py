"""Write the docs site's generated pages: docs/rules/index.md and one page per rule, from the rules themselves.

Run it after changing a rule's documentation, examples or fix; tests/test_docs.py fails while a page is stale.

Usage:
    python scripts/docs.py
"""

from __future__ import annotations

from pathlib import Path

from mhalint.cli import ruledocs
from mhalint.rule import load_rules

RULES_DIR = Path(__file__).resolve().parents[1] / "docs" / "rules"


def pages() -> dict[str, str]:
    """File name under docs/rules/ -> its text."""
    rules = load_rules()
    return {"index.md": ruledocs.rules_index(rules),
            **{f"{code}.md": ruledocs.page(rule) for code, rule in rules.items()}}


def main() -> None:
    RULES_DIR.mkdir(exist_ok=True)
    wanted = pages()
    for stale in set(path.name for path in RULES_DIR.glob("*.md")) - set(wanted):
        (RULES_DIR / stale).unlink()
    for name, text in wanted.items():
        (RULES_DIR / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(wanted)} pages to {RULES_DIR}")


if __name__ == "__main__":
    main()
