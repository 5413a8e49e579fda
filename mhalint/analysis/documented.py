"""What the code documents: shapes in docstrings (Google, numpy, Sphinx), shape comments and jaxtyping
annotations, and the meaning of a mask's values in a parameter's docstring entry.

Each reader returns the axis names of one tensor, in order (`["B", "L", "E"]`), or None; `names.roles_of_names`
says what they hold. Only a group of names counts, never a lone word, and a text that shows a conversion
(`NLD -> LND`, `(B, L, E) to (L, B, E)`) documents its result.
"""

from __future__ import annotations

import re

from mhalint.analysis.axes import Role
from mhalint.analysis.names import roles_of_names

_GROUP = re.compile(r"[\[(]([^\[\]()]*(?:\([^()]*\)[^\[\]()]*)*)[\])]")
_TIMES = re.compile(r"\b([A-Za-z_]\w*(?:\s*[x×]\s*[A-Za-z_]\w*){2,3})\b")
_COMPACT = re.compile(r"\b([A-Z]{3,4})\b")
_PLAIN_LIST = re.compile(r"^[\s#:]*(?:(?:shape|size)\s*(?:is|[-:=])\s*)?"
                         r"([A-Za-z_][\w*]*(?:\s*,\s*[A-Za-z_][\w*]*){2,3})\s*$", re.IGNORECASE)
_JAXTYPING = re.compile(r"^(?:Float|Int|Bool|Shaped|Num|Real|Integer|Inexact|Complex|TensorType)\[")


def shape_in_text(text: str, least: int = 3) -> list[str] | None:
    """The axis names a comment or docstring line gives: `(B, L, E)`, `[bs, HxW, C]`, `Tensor shape [B, L, N]`,
    `B x L x E`, `QxNxC`, `npoints x batch x channel` (words that name an axis), `NLE`, or a bare `nq, bs, d_model`
    (also after `shape -` or `shape:`). A bracketed group needs `least` names: two are common prose (`(int, optional)`)
    except in a parameter's own entry, where `(N, S)` is its shape."""
    text = re.split(r"->|→|\bto\b", text)[-1]
    for group in _GROUP.findall(text):
        names = _split(group, least)
        if names is not None:
            return names
    for product in _TIMES.findall(text):
        names = [part.strip() for part in re.split(r"\s*[x×]\s*", product)]
        if all(len(name) <= 3 for name in names) or set(roles_of_names(names)) - {Role.UNKNOWN}:
            return names  # `QxNxC`, `npoints x batch x channel`; not `matrix x vector x ...` prose
    plain = _PLAIN_LIST.match(text)
    if plain:
        return [name.strip() for name in plain[1].split(",")]
    compact = [word for word in _COMPACT.findall(text) if _axis_letters(word)]
    if len(compact) == 1:
        return list(compact[0])
    return None


def _axis_letters(word: str) -> bool:
    """`NLD`, `NCHW`: distinct letters that each name an axis; an acronym (`DETR`, `RGB`, `CNN`) is not a shape."""
    return len(set(word)) == len(word) and Role.UNKNOWN not in roles_of_names(list(word))


def _split(group: str, least: int) -> list[str] | None:
    names = [name.strip() for name in re.split(r",(?![^()]*\))", group)]
    if not least <= len(names) <= 5 or any(not name for name in names):
        return None
    names = [name.split("=")[0].strip().split()[-1] if " " in name and "(" not in name else name for name in names]
    if not all(re.fullmatch(r"[A-Za-z_][\w]*|[0-9]+|\(?[A-Za-z_]\w*(?:\s*[*x×]\s*[A-Za-z_]\w*|\s+[A-Za-z_]\w*)+\)?",
                            name) for name in names) or all(name.isdigit() for name in names):
        return None  # a size may be a number (`(B, 1)`); a group of numbers only is not a shape of names
    return names


def in_docstring(docstring: str, parameter: str) -> tuple[list[str], str] | None:
    """The names a docstring gives `parameter`, and the line that says so."""
    for number, text in enumerate(entry(docstring, parameter)):
        names = shape_in_text(text, least=2)
        if names is not None:
            return names, (parameter + text if number == 0 else text).strip()
    return None


def entry(docstring: str, parameter: str) -> list[str]:
    """A parameter's entry in a docstring: the line that starts with its name (`x (Tensor): ...`,
    `x : torch.Tensor`, `:param x: ...`, after the name) and the more indented lines under it (numpy style puts
    the shape there, Hugging Face the mask's values); a bullet may precede the name (`- tgt: nq, bs, d_model`)."""
    lines = docstring.expandtabs().splitlines()
    start = re.compile(rf"^\s*(?:[-*+•]\s+)?(?::param\s+(?:\w+\s+)?|:type\s+)?{re.escape(parameter)}\b"
                       r"\s*(?:\(|:|-|$)")
    for number, line in enumerate(lines):
        if not start.match(line):
            continue
        indent = len(line) - len(line.lstrip())
        block = [line.split(parameter, 1)[1]]
        for following in lines[number + 1:]:
            if not following.strip() or len(following) - len(following.lstrip()) <= indent:
                break
            block.append(following)
        return block
    return []


# A mask's values stated in words: "1 for tokens that are not masked", "a ``True`` value indicates that the
# corresponding key will be ignored", "True = attend", "0 for padding".
_STATEMENT = re.compile(r"(?<![\w.,(\[])[`'\"*]*(?P<value>1|true|0|false)[`'\"*]*"
                        r"(?:\s*=\s*|\s+(?:values?\s+)?(?:for|means?|indicates?|marks?|at|where|denotes?|is|are)\b)"
                        r"(?P<rest>(?:(?!\b(?:1|true|0|false)\b)[^.;\n]){0,80})", re.IGNORECASE)
_MEANING = re.compile(r"(?P<keep>not\s+(?:be\s+)?masked|unmasked|non-?pad\w*)"
                      r"|(?P<drop>not\s+(?:be\s+)?(?:attended|attend|used|kept|allowed)|ignored?|masked|pad\w*|"
                      r"excluded|invalid|hidden|blocked)"
                      r"|(?P<keep2>attend\w*|valid|real|kept|keep|visible|actual|allowed)", re.IGNORECASE)


def stated_convention(lines: list[str]) -> tuple[bool, str] | None:
    """(True when True/1 means take part, the sentence) from what a mask's documentation says its values mean;
    None when it says nothing, or its statements disagree."""
    found: set[bool] = set()
    sentence = ""
    for line in lines:
        for statement in _STATEMENT.finditer(line):
            meaning = _MEANING.search(statement["rest"])
            if meaning is None:
                continue
            truthy = statement["value"].lower() in ("1", "true")
            found.add(truthy == (meaning["drop"] is None))
            sentence = sentence or line.strip()
    return (found.pop(), sentence) if len(found) == 1 else None
def sole_input(docstring: str) -> tuple[list[str], str] | None:
    """A class docstring's `Inputs:` (or `Input:`) section with exactly one entry that gives a shape: it documents
    the one tensor `forward` takes (`- **input** (batch, seq_len, ncols): rows`)."""
    lines = docstring.expandtabs().splitlines()
    for number, line in enumerate(lines):
        if not re.fullmatch(r"\s*Inputs?\s*:?\s*", line):
            continue
        indent = len(line) - len(line.lstrip())
        found = []
        for following in lines[number + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            names = shape_in_text(following) if following.strip() else None
            if names is not None:
                found.append((names, following.strip()))
        return found[0] if len(found) == 1 else None
    return None


def in_annotation(annotation: str) -> list[str] | None:
    """jaxtyping `Float[Tensor, "batch seq dim"]` and torchtyping `TensorType["batch", "seq", "dim"]` ->
    ["batch", "seq", "dim"]."""
    if not _JAXTYPING.match(annotation.strip()):
        return None
    quoted = re.findall(r"""["']([^"']+)["']""", annotation)
    words = quoted[0].split() if len(quoted) == 1 else quoted  # jaxtyping: one string; torchtyping: one each
    names = [re.sub(r"^[*#_.]+", "", name.strip()) for name in words]
    return names if len(names) >= 2 else None
