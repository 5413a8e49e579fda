"""Parsing a new version of a document by keeping the top-level statements of the previous tree that the edit did
not touch: an editor's keystroke changes one statement of a 1,000-line file, and libcst's parse of the whole file
is the largest single cost of checking it again.

The text between the previous version's unchanged first and last statements (the statements whose text lies in
the common prefix and the common suffix of the two versions) is parsed alone, after a `pass` line that stands for
the statements before it, and the tree is put together from the kept statements and the new ones. The result is
used only when it must equal a full parse of the new text:
- the new statements generate exactly the text they were parsed from, under the module's defaults;
- the defaults (indentation, line ending, encoding) are settled by text the edit did not touch;
- no comment or blank line at a seam is indented (libcst could give it to the block before the seam);
- CPython's tree of the new text has the same top-level statements, starting on the same lines.
Anything else is parsed whole. Every statement's generated code, with its nodes' positions, is kept
(mhalint.parse.positions.Generated), so that a kept statement is not generated again either.
"""

from __future__ import annotations

from dataclasses import dataclass

from mhalint.parse.lazy import cst
from mhalint.parse.positions import Generated, generate, statement_starts
from mhalint.parse.source import line_starts


@dataclass
class _Version:
    text: str
    module: cst.Module
    header: str  # the module's text before its first statement
    bounds: list[int]  # the offset where each statement's text starts, then where the footer starts
    first_block: int  # the index of the first statement with an indented block (where the indentation is set)


class Reparser:
    """One document's trees, version after version. `generated` holds each current statement's generated code."""

    def __init__(self) -> None:
        self._last: _Version | None = None
        self.generated: dict[cst.CSTNode, Generated] = {}
        self.reused = 0  # statements kept by the last parse (for tests and benchmarks)

    def parse(self, text: str, statement_lines: list[int]) -> cst.Module:
        """The tree of `text` (ParserSyntaxError as `cst.parse_module` raises it); `statement_lines` are the
        first lines of its top-level statements in CPython's tree (mhalint.parse.positions.first_lines)."""
        version = self._reparse(text, statement_lines) if self._last is not None else None
        if version is not None:
            self._last = version
            return version.module
        self.reused = 0
        module = cst.parse_module(text)
        self.generated = {statement: generate(statement, module) for statement in module.body}
        self._last = self._version(text, module)  # None when its pieces do not give back the text: parsed whole
        return module

    def _version(self, text: str, module: cst.Module) -> _Version | None:
        """Where each statement's text lies, when the header, the statements' generated code and the footer put
        together are the text (not so for a file without a final line break, whose last one is dropped)."""
        pieces = [self.generated[statement].text for statement in module.body]
        header, footer = _lines(module, module.header), _lines(module, module.footer)
        if header + "".join(pieces) + footer != text:
            return None
        bounds = [len(header)]
        for piece in pieces:
            bounds.append(bounds[-1] + len(piece))
        return _Version(text, module, header, bounds, _first_block(module.body))

    def _reparse(self, text: str, statement_lines: list[int]) -> _Version | None:
        last = self._last
        body = list(last.module.body)
        prefix = _common_prefix(last.text, text)
        suffix = _common_suffix(last.text, text, min(len(last.text), len(text)) - prefix)
        kept_before = max((index for index in range(len(body) + 1) if last.bounds[index] <= prefix), default=0)
        first_after = min((index for index in range(kept_before, len(body) + 1)
                           if last.bounds[index] >= len(last.text) - suffix), default=len(body))
        if kept_before == 0 or last.text.count("\n", 0, last.bounds[kept_before]) < 2:
            return None  # the header, the encoding declaration or the first line ending may have changed
        start = last.bounds[kept_before]
        end = len(text) - (len(last.text) - last.bounds[first_after])  # the kept statements after it, and footer
        if first_after == len(body):
            end = len(text)  # the footer is parsed again with the new statements
        try:  # after a line that stands for the statements before, in the module's own line ending
            part = cst.parse_module("pass" + last.module.default_newline + text[start:end])
        except cst.ParserSyntaxError:
            return None
        new = list(part.body[1:])
        kept_after = body[first_after:]
        after_seam = _leading(new[0]) if new else _leading(kept_after[0]) if kept_after else part.footer
        if part.header or (kept_after and part.footer) or not _unindented(after_seam) or \
                (kept_after and not _unindented(_leading(kept_after[0]))):
            return None
        if kept_before <= last.first_block < first_after and not (
                any(map(_has_block, new)) and part.default_indent == last.module.default_indent):
            return None  # the statement that settled the indentation is gone, and another may settle it otherwise
        if last.first_block >= first_after and any(map(_has_block, new)) and \
                part.default_indent != last.module.default_indent:
            return None  # a new first indented block settles it otherwise
        module = last.module.with_changes(body=[*body[:kept_before], *new, *kept_after],
                                          footer=last.module.footer if kept_after else part.footer,
                                          has_trailing_newline=last.module.has_trailing_newline if kept_after
                                          else part.has_trailing_newline)
        generated = {statement: self.generated[statement] for statement in (*body[:kept_before], *kept_after)}
        offset = start
        for statement in new:
            generated[statement] = generate(statement, module)
            if not text.startswith(generated[statement].text, offset):
                return None
            offset += len(generated[statement].text)
        footer = text[offset:end] if not kept_after else ""
        if footer != (_lines(module, module.footer) if not kept_after else ""):
            return None
        starts = statement_starts(module.body, statement_lines)
        lines = line_starts(text)
        self.generated = generated
        version = self._version(text, module)
        if version is None or starts is None or [lines[line - 1] for line in starts] != version.bounds[:-1]:
            return None
        self.reused = kept_before + len(kept_after)
        return version


def _lines(module: cst.Module, lines) -> str:
    """The text of the module's header or footer (the blank and comment lines before its first statement or
    after its last)."""
    return "".join(generate(line, module).text for line in lines)


def _first_block(body) -> int:
    return next((index for index, statement in enumerate(body) if _has_block(statement)), len(body))


def _has_block(statement: cst.CSTNode) -> bool:
    """Whether the statement holds an indented block (the first one in a file sets its default indentation)."""
    return isinstance(getattr(statement, "body", None), cst.IndentedBlock)


def _leading(statement: cst.CSTNode) -> list:
    """The blank and comment lines a statement begins with (before its decorators, and between them and it)."""
    lines = list(statement.leading_lines)
    decorators = getattr(statement, "decorators", ())
    if decorators:
        lines += list(decorators[0].leading_lines)
    return lines


def _unindented(lines) -> bool:
    """Whether the blank and comment lines at a seam all start at column 0: an indented one could belong, in a
    full parse, to the footer of the block before the seam."""
    return all(not line.whitespace.value for line in lines)


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix, by halving (string comparison in C, not a Python loop)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    low, high = 0, max(limit, 0)
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle:len(a) - low] == b[len(b) - middle:len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low
