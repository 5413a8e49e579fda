"""Code actions: each finding's fix as a quick fix (a safe one preferred, an unsafe one labelled as changing
behaviour), "add `# noqa: CODE`" for the finding's line, and "fix all safe fixes in this file"
(`source.fixAll.mhalint`, as ruff names its own)."""

from __future__ import annotations

from typing import Iterable, Sequence

from lsprotocol import types

from mhalint.finding import SAFE, Finding
from mhalint.run import noqa
from mhalint.run.diagnostics import ENGINE_CODES, INTERNAL_ERROR
from mhalint.server.convert import replacement
from mhalint.server.diagnostics import Placed
from mhalint.server.session import Source

FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.mhalint"
FIX_ALL_TITLE = "mhalint: apply all safe fixes"


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether the client asked for actions of `kind` (`only` lists kinds and their parents, as `source`)."""
    return not only or any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


def quick_fixes(findings: Iterable[Finding], placed: Placed,
                diagnostics: dict[Finding, types.Diagnostic]) -> list[types.CodeAction]:
    """For each finding: its fix, then the noqa directive."""
    actions = []
    for finding in findings:
        diagnostic = [diagnostics[finding]] if finding in diagnostics else None
        if finding.fix is not None:
            safe = finding.fix.applicability == SAFE
            lines = placed.lines(finding.cell)
            safety = "" if safe else ", unsafe: changes behaviour"
            actions.append(types.CodeAction(
                title=f"mhalint: {finding.fix.title} ({finding.code}){safety}",
                kind=types.CodeActionKind.QuickFix, diagnostics=diagnostic, is_preferred=safe,
                edit=types.WorkspaceEdit(changes={placed.uri(finding.cell): [lines.text_edit(edit)
                                                                             for edit in finding.fix.edits]})))
        noqa_edit = _noqa(finding, placed)
        if noqa_edit is not None:
            actions.append(types.CodeAction(
                title=f"mhalint: add `# noqa: {finding.code}` on line {finding.line}",
                kind=types.CodeActionKind.QuickFix, diagnostics=diagnostic,
                edit=types.WorkspaceEdit(changes={placed.uri(finding.cell): [noqa_edit]})))
    return actions


def _noqa(finding: Finding, placed: Placed) -> types.TextEdit | None:
    """The edit that adds the finding's code to its line's directive, as `mhalint check --add-noqa` does; None for
    the engine's own reports (a file that does not parse is fixed, not silenced) and for a line that cannot end
    in a comment."""
    if finding.code in ENGINE_CODES and finding.code != INTERNAL_ERROR:
        return None
    text = placed.lines(finding.cell).text
    new_text, added = noqa.add_directives(text, [finding])
    return replacement(text, new_text, placed.encoding) if added else None


def fix_all(placed: Placed, fixed: Source | None, data: object = None) -> types.CodeAction:
    """The fix-all action: with its edit when `fixed` is given (the document with every safe fix applied), else
    to be resolved later (`data` says which document and version)."""
    edit = None
    if fixed is not None:
        changes: dict[str, list[types.TextEdit]] = {}
        if placed.source.is_notebook:
            for number, text in fixed.cells.items():
                if text != placed.source.cells[number] and number in placed.cell_uris:
                    changes[placed.cell_uris[number]] = [replacement(placed.source.cells[number], text,
                                                                     placed.encoding)]
        else:
            changes[placed.source.key] = [replacement(placed.source.text, fixed.text, placed.encoding)]
        edit = types.WorkspaceEdit(changes=changes)
    return types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL, edit=edit, data=data)
