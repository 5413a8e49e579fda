"""Which files are worth parsing: a trigger pattern must match in code, not in a comment or a string.

Two costs shaped this module (measured on the 3.2M-line speed corpus, issue 7):
- One regex over a whole file is slow when its alternatives start with `\\b`: Python's regex engine then tries
  every position (6.9 s for 133 MB). Every match of a trigger contains a literal word (`Transformer`), and
  `bytes.find` skips to it (0.1 s for the same bytes); the full pattern then runs only on the lines around it.
- Most files that mention an attention API mention it in prose: a docstring saying "encoder-decoder Transformer",
  a comment naming `scaled_dot_product_attention`. No rule can act on prose, so those files are not parsed
  (200 of the 319 files that match somewhere, 230,000 of their 410,000 lines).

A trigger matches within one line, or within a bracket that the line holding its word opens and the next few lines
close (a call written over several lines: `masked_fill(\n    mask, -1e-9)`). A match inside an f-string or a
t-string counts as code when it may lie in a replacement field (`f"{F.scaled_dot_product_attention(q, k, v)}"`),
not in the text around the fields (an error message naming the API); a string or comment the lexer below cannot
close counts as code too, so every doubt ends in a parse.
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Iterable, Iterator

from mhalint.parse.source import has_wide_bom, line_starts

# Comments and string literals, in the order Python's tokenizer finds them: a quote inside a comment or a `#`
# inside a string never starts anything. The loops are unrolled ("normal* (special normal*)*") to stay fast.
_PROSE = re.compile(
    rb"#[^\r\n]*"
    rb'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    rb"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
    rb'|"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"'
    rb"|'[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*'",
    re.S,
)
_CODE_PREFIX = re.compile(rb"(?:[fFtT][A-Za-z]?|[A-Za-z][fFtT])\Z")  # f, rf, Ft...: an f- or t-string's prefix
_ZERO_WIDTH_OR_CLASS = set("bBsSwWdDAZ")
_QUANTIFIERS = set("?*+{")
_LINE_END = re.compile(rb"[\r\n]")
_CONTINUED = 4  # lines after an anchor's line searched too, while a bracket it opens is still open
_FIELD_MARKS = re.compile(rb"\{\{|\}\}|[{}'\"]")  # what opens or closes an f-string's replacement field


class Prefilter:
    """Decides from a file's bytes whether any of `patterns` (regular expressions) occurs in its code."""

    def __init__(self, patterns: Iterable[str]):
        self.patterns = sorted(set(patterns))
        self.regex = re.compile(b"|".join(f"(?:{pattern})".encode() for pattern in self.patterns)) \
            if self.patterns else None
        anchors = [anchor for pattern in self.patterns for anchor in anchors_of(pattern) or [None]]
        # None: some pattern has an alternative with no literal word, so every line must be searched.
        self.anchors = None if None in anchors else sorted({anchor.encode() for anchor in anchors})

    def matches(self, source: bytes) -> bool:
        """True when a pattern matches somewhere outside comments and non-f strings, or when the bytes are UTF-16
        or UTF-32, where no pattern can be seen (the parse then reports that Python cannot read the file)."""
        return has_wide_bom(source) or next(self.code_matches(source), None) is not None

    def code_matches(self, source: bytes) -> Iterator[re.Match[bytes]]:
        """The matches outside comments and non-f strings, in order."""
        if self.regex is None:
            return
        prose = _Prose(source)
        for start, end in self._lines(source):
            for match in self.regex.finditer(source, start, end):
                if not prose.covers(match.start()):
                    yield match

    def only_passed_as_values(self, source: bytes, syntax: ast.Module) -> bool:
        """True when every match in code lies in a name handed over as a value: a call's argument, an element of a list,
        tuple, set or dict, an operand of a comparison (`wrapper(F.scaled_dot_product_attention, ...)`, `isinstance(m,
        nn.MultiheadAttention)`). mhalint resolves calls through imports, aliases, base classes, instances built by
        calls and `functools.partial`, never through other such values. `syntax` is CPython's tree of `source` (UTF-8:
        ast columns count UTF-8 bytes)."""
        breaks = line_starts(source)
        points = []
        for match in self.code_matches(source):
            line = bisect.bisect_right(breaks, match.start())
            points.append((line, match.start() - breaks[line - 1]))
        # disjoint: a name or attribute holds no other passed value
        values = sorted(_passed_values(syntax, sorted({line for line, _ in points})))
        if not values:
            return False
        starts = [start for start, _ in values]
        for point in points:
            index = bisect.bisect_right(starts, point) - 1
            if index < 0 or not point < values[index][1]:
                return False
        return True

    def _lines(self, source: bytes):
        """The (start, end) of each stretch that may hold a match: the lines with an anchor word, each with the
        lines that continue a bracket it leaves open (up to _CONTINUED of them: a call written over several
        lines), overlapping stretches merged; or all of the source."""
        if self.anchors is None:
            yield 0, len(source)
            return
        lines: set[tuple[int, int]] = set()
        for anchor in self.anchors:
            found = source.find(anchor)
            end = 0  # the end of the previous match's line: this one's starts after it (searching back to the
            while found >= 0:  # file's start instead made a file of N matches take N^2 steps)
                start = max(source.rfind(b"\n", end, found), source.rfind(b"\r", end, found)) + 1
                end = _LINE_END.search(source, found)
                end = len(source) if end is None else end.start()
                lines.add((start, _continued(source, found, end)))
                found = source.find(anchor, end)
        merged: list[list[int]] = []
        for start, end in sorted(lines):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        yield from map(tuple, merged)


def _continued(source: bytes, anchor: int, end: int) -> int:
    """The end of the anchor's line (`end`), or of the last line of the bracket the anchor's line opens and leaves
    open, if that closes within _CONTINUED more lines (else of the last of them). Brackets in strings and comments
    count too: that can only widen the stretch searched."""
    depth, lines = _depth(source[anchor:end]), 0
    while depth > 0 and lines < _CONTINUED and end < len(source):
        start = end + (2 if source.startswith(b"\r\n", end) else 1)
        found = _LINE_END.search(source, start)
        end = len(source) if found is None else found.start()
        depth += _depth(source[start:end])
        lines += 1
    return end


def _depth(text: bytes) -> int:
    return text.count(b"(") + text.count(b"[") + text.count(b"{") - text.count(b")") - text.count(b"]") \
        - text.count(b"}")


def _passed_values(syntax: ast.Module, lines: list[int]) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
    """The (start, end) (line, column) spans of names and attributes handed over as values, looking only into
    nodes that span one of `lines` (sorted): walking all of a large file's tree cost more than the check saved."""
    stack: list[ast.AST] = [syntax]
    tables: set[int] = set()  # dicts indexed or named, whose values mhalint reads (`{"a": A, ...}[kind](...)`)
    unpacked: set[int] = set()  # `MHA, Layer = nn.MultiheadAttention, nn.TransformerEncoderLayer`: aliases
    while stack:
        node = stack.pop()
        stack.extend(child for child in ast.iter_child_nodes(node) if _spans_a_line(child, lines))
        if isinstance(node, ast.Subscript | ast.Assign) and isinstance(node.value, ast.Dict):
            tables.add(id(node.value))
        if isinstance(node, ast.Assign) and any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets):
            unpacked.add(id(node.value))
        if isinstance(node, ast.Call):
            # `partial(nn.MultiheadAttention, ...)` is a constructor mhalint follows, not a value handed over
            first = 1 if _is_partial(node.func) else 0
            candidates = [*node.args[first:], *(keyword.value for keyword in node.keywords)]
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            candidates = node.elts if id(node) not in unpacked else []
        elif isinstance(node, ast.Dict):
            candidates = [*(key for key in node.keys if key is not None),
                          *(node.values if id(node) not in tables else ())]
        elif isinstance(node, ast.Compare):
            candidates = [node.left, *node.comparators]
        else:
            continue
        for value in candidates:
            if isinstance(value, ast.Starred):
                value = value.value
            if isinstance(value, (ast.Name, ast.Attribute)):
                yield (value.lineno, value.col_offset), (value.end_lineno, value.end_col_offset)


def _is_partial(func: ast.AST) -> bool:
    return (isinstance(func, ast.Name) and func.id == "partial") or (isinstance(func, ast.Attribute)
                                                                     and func.attr == "partial")


def _spans_a_line(node: ast.AST, lines: list[int]) -> bool:
    first = getattr(node, "lineno", None)
    if first is None:  # operators, `arguments`, comprehensions: no position of their own
        return True
    index = bisect.bisect_left(lines, first)
    return index < len(lines) and lines[index] <= node.end_lineno


class _Prose:
    """The comment and string spans of a source, found lazily (only files with a candidate match pay)."""

    def __init__(self, source: bytes):
        self.source = source
        self._starts: list[int] | None = None
        self._spans: list[tuple[int, int]] = []

    def covers(self, offset: int) -> bool:
        if self._starts is None:
            self._spans = [match.span() for match in _PROSE.finditer(self.source)]
            self._starts = [start for start, _ in self._spans]
        index = bisect.bisect_right(self._starts, offset) - 1
        if index < 0 or offset >= self._spans[index][1]:
            return False
        start = self._starts[index]
        if self.source[start] == ord("#") or not _CODE_PREFIX.search(self.source[max(0, start - 2):start]):
            return True
        quotes = 3 if self.source[start + 1:start + 3] == self.source[start:start + 1] * 2 else 1
        return _in_literal_text(self.source[start + quotes:offset])


def _in_literal_text(before: bytes) -> bool:
    """Whether the end of `before`, the start of an f-string's body, is in the text between its replacement
    fields: every `{` that opens a field is closed (`{{` and `}}` are literal braces). A quote inside a field may
    hold braces of its own, and an unbalanced `}` is not Python's: both count as code."""
    depth = 0
    for mark in _FIELD_MARKS.finditer(before):
        text = mark.group()
        if text in (b"{{", b"}}") and depth == 0:
            continue
        if text[0] == ord("{"):
            depth += len(text)
        elif text[0] == ord("}"):
            depth -= len(text)
            if depth < 0:
                return False
        elif depth:  # a quote inside a field
            return False
    return depth == 0


def anchors_of(pattern: str) -> list[str] | None:
    """A literal word that every match of each top-level alternative of `pattern` contains, or None when some
    alternative has none that this small reader of regular expressions can prove (inline flags, escapes it does
    not know, a word only inside a group): the caller then searches every line."""
    if re.search(r"\(\?[aiLmsux-]", pattern):  # inline flags change what a literal matches
        return None
    anchors = []
    for alternative in _top_level_alternatives(pattern):
        runs = _literal_runs(alternative)
        if not runs:
            return None
        anchors.append(max(runs, key=len))
    return anchors


def _top_level_alternatives(pattern: str) -> list[str]:
    alternatives, depth, start, index = [], 0, 0, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = _class_end(pattern, index)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            alternatives.append(pattern[start:index])
            start = index + 1
        index += 1
    alternatives.append(pattern[start:])
    return alternatives


def _literal_runs(alternative: str) -> list[str]:
    """Runs of word characters outside groups and classes that a match must contain; none at all when the
    alternative has an escape this reader does not decode."""
    whole_group = re.fullmatch(r"\(\?:(.*)\)", alternative, re.S)
    if whole_group and _top_level_alternatives(whole_group.group(1)) == [whole_group.group(1)]:
        alternative = whole_group.group(1)
    runs, run, depth, index = [], "", 0, 0
    while index < len(alternative):
        char = alternative[index]
        if char in _QUANTIFIERS and depth == 0:
            run = run[:-1]  # the character before a quantifier may be absent or repeated
        if char == "{":
            closing = alternative.find("}", index)
            index = len(alternative) if closing < 0 else closing + 1
        elif char == "\\":
            escaped = alternative[index + 1:index + 2]
            if escaped.isalnum() and escaped not in _ZERO_WIDTH_OR_CLASS:
                return []  # \x41, \1, \N{...}: not worth reading; no anchor
            index += 2
        elif char == "[":
            index = _class_end(alternative, index)
        elif char.isalnum() or char == "_":
            if depth == 0:
                run += char
                index += 1
                continue
            index += 1
        else:
            depth += {"(": 1, ")": -1}.get(char, 0)
            index += 1
        runs.append(run)
        run = ""
    runs.append(run)
    return [run for run in runs if run]


def _class_end(pattern: str, start: int) -> int:
    """The index just after the character class that opens at `start`."""
    index = start + 1
    if pattern[index:index + 1] == "^":
        index += 1
    if pattern[index:index + 1] == "]":
        index += 1
    while index < len(pattern) and pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    return index + 1
