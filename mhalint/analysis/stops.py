"""Where the shape reader stopped, in the project's terms: what a warning says is missing.

When the roles of a tensor cannot be read, the reader records the places its trace ended (a parameter no caller
fills, a call it cannot follow, an item of an iterable it cannot read, two pieces of evidence that disagree), so a
rule can say what is missing instead of "nothing shows". Each `Stop` gives a short `phrase` for a headline and a
`sentence` for the evidence; their text is built only when asked (most traces that stop are never reported).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from mhalint.analysis import axes
from mhalint.finding import shorten

_CODE = 48  # the longest code a phrase quotes


@dataclass(frozen=True)
class Shown:
    """One piece of layout evidence, as a conflict names it: its code, place and the layout it shows."""

    code: str
    place: str
    kind: str


PRIORITY = ("conflict", "parameter", "item", "opaque")  # the most telling first


class Stop:
    """One place a trace ended. `kind` is parameter, conflict, item or opaque."""

    def __init__(self, kind: str, reader, node=None, name: str = "", owner: str = "", detail: str = "",
                 shown: tuple[Shown, ...] = ()):
        self.kind, self._reader, self._node, self.name, self.owner = kind, reader, node, name, owner
        self.detail, self.shown = detail, shown

    @cached_property
    def code(self) -> str:
        return shorten(self._reader.ctx.code(self._node), _CODE) if self._node is not None else ""

    @cached_property
    def place(self) -> str:
        return axes.place(self._reader.ctx.line(self._node), self._reader.file) if self._node is not None else ""

    @property
    def _where(self) -> str:
        return "the project" if self._reader.ctx.project is not None else "this file"

    def phrase(self, room: int = 90) -> str:
        """What is missing, for a headline, in at most about `room` characters: "the data, `tgt`, is a parameter of
        `Decoder.forward` with no caller found in this file" (the method alone when the class leaves no room)."""
        if self.kind == "parameter":
            method = self.owner.rpartition(".")[2]
            for text in (f"the data, `{self.name}`, is a parameter of `{owner}` with no caller found in {self._where}"
                         for owner in (self.owner, method)):
                if len(text) <= room:
                    return text
            return f"the data, `{self.name}`, is a parameter of `{method}` with no caller found"
        if self.kind == "conflict":
            first, second = self.shown
            budget = room - len("`` and `` disagree on the data's layout")
            short, long_ = sorted((first.code, second.code), key=len)
            kept = {short: shorten(short, max(16, budget // 2))}
            kept[long_] = shorten(long_, max(16, budget - len(kept[short])))
            return f"`{kept[first.code]}` and `{kept[second.code]}` disagree on the data's layout"
        if self.kind == "item":
            return f"the data is `{self.name}`, an item of `{shorten(self.code, 32)}` ({self.place})"
        return f"the axes of `{shorten(self.code, 40)}` ({self.place}) are not known"

    @property
    def sentence(self) -> str:
        """The same, with its place and why, for the evidence."""
        if self.kind == "parameter":
            return shorten(f"`{self.name}` at {self.place} is a parameter of `{self.owner}`: no call in "
                           f"{self._where} passes it, and no comment, docstring or annotation gives its shape", 160)
        if self.kind == "conflict":
            first, second = self.shown
            return shorten(f"`{shorten(first.code, 50)}` at {first.place} shows {first.kind} data but "
                           f"`{shorten(second.code, 50)}` at {second.place} shows {second.kind}: the layout is "
                           f"unknown", 160)
        if self.kind == "item":
            return shorten(f"`{self.name}` is an item of `{self.code}` at {self.place}" +
                           (f", {self.detail}" if self.detail else ", whose items' axes are not known"), 160)
        return shorten(f"the trace stops at `{self.code}` at {self.place}" +
                       (f": {self.detail}" if self.detail else ""), 160)
