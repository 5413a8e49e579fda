"""What each axis of a tensor holds: the abstract value the layout analysis computes, and its transfer functions.

A `Shape` is a tuple of `Axis`; each axis has a role (batch, sequence, ...) and the `Evidence` that gave it the
role. Evidence has a strength: ESTABLISHED (a shape unpacking, a producer with a known layout, a documented shape)
or NAMED (a size's name alone, `bsz`). A role without evidence is UNKNOWN. The transfer functions move axes as
torch moves them and never invent a role: an axis whose origin they cannot follow becomes unknown, and an
operation whose result they cannot compute gives None (unknown rank).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Role(enum.Enum):
    BATCH = "batch"
    SEQUENCE = "sequence"  # tokens, time steps, queries, flattened spatial positions
    EMBEDDING = "embedding"  # features, channels, model dimension
    HEADS = "heads"
    SPATIAL = "spatial"  # one of height, width (not yet flattened into a sequence)
    UNKNOWN = "unknown"


class Strength(enum.IntEnum):
    NAMED = 1  # a name alone: at most a warning
    ESTABLISHED = 2  # provenance: enough for an error


@dataclass(frozen=True)
class Evidence:
    """Why an axis has its role: the code that says so (`B, T, C = x.shape`), its line, and a phrase."""

    code: str
    line: int
    reason: str
    strength: Strength
    file: str = ""  # another file of the project, as evidence names it; "" for the file being checked

    @property
    def place(self) -> str:
        return place(self.line, self.file)

    def sentence(self) -> str:
        return f"`{self.code}` at {self.place}: {self.reason}"


def place(line: int, file: str = "") -> str:
    """`line 12` in the file being checked, `train.py:12` in another."""
    return f"{file}:{line}" if file else f"line {line}"


@dataclass(frozen=True)
class Axis:
    role: Role = Role.UNKNOWN
    evidence: Evidence | None = None
    size: str | None = None  # the size expression, as written, where the code names it

    @property
    def known(self) -> bool:
        return self.role is not Role.UNKNOWN and self.evidence is not None


UNKNOWN_AXIS = Axis()
OPEN = Axis(Role.UNKNOWN, None, "...")  # a last axis standing for zero or more axes of unknown roles
Shape = tuple[Axis, ...]


def unknown(rank: int) -> Shape:
    return (UNKNOWN_AXIS,) * rank


def _index(dim: int, rank: int) -> int | None:
    index = dim + rank if dim < 0 else dim
    return index if 0 <= index < rank else None


def padded(shape: Shape, rank: int) -> Shape | None:
    """At least `rank` axes: an open end gives unknown ones (and stays open); a closed shape must have them."""
    if shape and shape[-1] is OPEN:
        body = shape[:-1]
        return body + unknown(max(0, rank - len(body))) + (OPEN,)
    return shape if len(shape) >= rank else None


def transpose(shape: Shape, first: int, second: int) -> Shape | None:
    i, j = _index(first, len(shape)), _index(second, len(shape))
    if i is None or j is None:
        return None
    axes = list(shape)
    axes[i], axes[j] = axes[j], axes[i]
    return tuple(axes)


def permute(shape: Shape, order: list[int]) -> Shape | None:
    """A permutation names every axis: a last axis standing for several (OPEN) becomes the unknown axes the order
    counts (a default collate's (B, ...) permuted by `(1, 0, 2)` is (?, B, ?))."""
    if shape and shape[-1] is OPEN and len(order) >= len(shape) - 1:
        shape = shape[:-1] + unknown(len(order) - len(shape) + 1)
    indices = [_index(d, len(shape)) for d in order]
    if len(order) != len(shape) or None in indices or len(set(indices)) != len(indices):
        return None
    return tuple(shape[i] for i in indices)


def movedim(shape: Shape, source: int, destination: int) -> Shape | None:
    i, j = _index(source, len(shape)), _index(destination, len(shape))
    if i is None or j is None:
        return None
    axes = list(shape)
    axes.insert(j, axes.pop(i))
    return tuple(axes)


def unsqueeze(shape: Shape, dim: int, axis: Axis = UNKNOWN_AXIS) -> Shape | None:
    index = _index(dim, len(shape) + 1)
    return None if index is None else shape[:index] + (axis,) + shape[index:]


def squeeze(shape: Shape, dim: int | None) -> Shape | None:
    """Only a squeeze of a named axis keeps the rank computable; `squeeze()` depends on the sizes."""
    index = _index(dim, len(shape)) if dim is not None else None
    return None if index is None else shape[:index] + shape[index + 1:]


def flatten(shape: Shape, start: int = 0, end: int = -1) -> Shape | None:
    i, j = _index(start, len(shape)), _index(end, len(shape))
    if i is None or j is None or i > j:
        return None
    return shape[:i] + (merged(shape[i:j + 1]),) + shape[j + 1:]


def merged(axes: Shape) -> Axis:
    """The axis that several axes fold into: it holds the batch if one of them does (`B * H`); spatial axes fold
    into a sequence of positions (`H * W`); otherwise it keeps the one known role, or is unknown."""
    known = [axis for axis in axes if axis.known]
    if len(axes) == 1:
        return axes[0]
    batch = [axis for axis in known if axis.role is Role.BATCH]
    if batch:
        return batch[0]
    if known and all(axis.role in (Role.SPATIAL, Role.SEQUENCE) for axis in known) and len(known) == len(axes):
        weakest = min(known, key=lambda axis: axis.evidence.strength)
        return Axis(Role.SEQUENCE, weakest.evidence)
    return UNKNOWN_AXIS


def matmul(left: Shape, right: Shape) -> Shape | None:
    """`left @ right` of two shapes of rank 2 or more: the batch axes broadcast (a role both sides give, or the
    one side that knows it; unknown where they disagree), then `left`'s rows and `right`'s columns."""
    if len(left) < 2 or len(right) < 2 or OPEN in left or OPEN in right:
        return None
    rank = max(len(left), len(right)) - 2
    batch = []
    for position in range(rank):
        found = [shape[len(shape) - 2 - rank + position] for shape in (left, right)
                 if len(shape) - 2 - rank + position >= 0]
        known = [axis for axis in found if axis.known]
        batch.append(known[0] if known and all(axis.role is known[0].role for axis in known) else
                     UNKNOWN_AXIS if known else found[0])
    return (*batch, left[-2], right[-1])


def reordered(before: Shape, after: list[list[Axis]]) -> tuple[int, int] | None:
    """A `view`/`reshape` keeps the order of the elements in memory: its new axes must take the old ones' contents
    in the same order. `after` lists each new axis's factors (`B * H` is two); the result is the first pair (i, j),
    i < j, of new axes whose contents come from old axes in the opposite order (`view(B, H, T, D)` of (B, T, C):
    the heads come out of the features, after the sequence, yet stand before it); None when the order is kept or
    the roles do not say. A factor's old axis: the one with its role; the heads, where there is no heads axis, come
    out of the features; features over a heads axis that no new axis keeps fold the heads in; positions out of
    spatial axes."""
    sources = [set().union(*(_sources(before, factor, after) for factor in factors)) for factors in after]
    for j, later in enumerate(sources):
        for i, earlier in enumerate(sources[:j]):
            if earlier and later and max(earlier) > min(later):
                return i, j
    return None


def _sources(before: Shape, factor: Axis, after: list[list[Axis]]) -> set[int]:
    """The old axes whose contents a new axis's factor holds (empty where its role does not say)."""
    if not factor.known:
        return set()
    with_role = {role: [i for i, axis in enumerate(before) if axis.known and axis.role is role] for role in Role}
    own = with_role[factor.role]
    if factor.role is Role.HEADS and not own:
        return set(with_role[Role.EMBEDDING]) if len(with_role[Role.EMBEDDING]) == 1 else set()
    if factor.role is Role.EMBEDDING and with_role[Role.HEADS] and \
            not any(f.known and f.role is Role.HEADS for factors in after for f in factors):
        return {*with_role[Role.HEADS], *own} if len(own) <= 1 and len(with_role[Role.HEADS]) == 1 else set()
    if factor.role is Role.SEQUENCE and not own:
        return set(with_role[Role.SPATIAL])
    return set(own) if len(own) == 1 else set()


def weakened(shape: Shape, note: str) -> Shape:
    """The same roles, each resting on an assumption as well as its evidence (`note` says which): at most a
    warning."""
    return tuple(Axis(axis.role, replace(axis.evidence, reason=f"{axis.evidence.reason}; {note}",
                                         strength=Strength.NAMED), axis.size) if axis.known else axis
                 for axis in shape)


def roles(shape: Shape) -> tuple[Role, ...]:
    return tuple(axis.role if axis.known else Role.UNKNOWN for axis in shape)


def concatenate(shapes: list[Shape], dim: int) -> Shape | None:
    """`torch.cat(shapes, dim)`. The other axes must match in size, so one part's known role holds for all, and
    parts that disagree make the axis unknown; the joined axis keeps a role only if every part has it."""
    if not shapes or len({len(shape) for shape in shapes}) != 1:
        return None
    joined = _index(dim, len(shapes[0]))
    if joined is None:
        return None
    result = []
    for position, column in enumerate(zip(*shapes)):
        known = [axis for axis in column if axis.known]
        if len({axis.role for axis in known}) != 1 or (position == joined and len(known) != len(column)):
            result.append(UNKNOWN_AXIS)
        else:
            result.append(known[0])
    return tuple(result)


# ---- what a layout-sensitive API reads -----------------------------------------------------------------------------
BATCH_FIRST, SEQ_FIRST = "batch-first", "sequence-first"


@dataclass(frozen=True)
class Layout:
    """The layout of a 3-D attention input, the axis that decides it and how sure that is."""

    kind: str  # BATCH_FIRST or SEQ_FIRST
    evidence: Evidence

    @property
    def strength(self) -> Strength:
        return self.evidence.strength


def layout(shape: Shape | None) -> Layout | None:
    """Batch-first or sequence-first, from where the batch axis is (or, failing that, where the sequence is);
    None when the roles are unknown or contradict each other (two batch axes, a batch axis last). A shape that
    ends in OPEN (`(B, ...)`) is read as the 3-D tensor an attention module takes."""
    if shape is not None and shape and shape[-1] is OPEN and len(shape) <= 3:
        shape = shape[:-1] + unknown(4 - len(shape))
    if shape is None or len(shape) != 3:
        return None
    first, second, last = shape
    batch = [i for i, axis in enumerate(shape) if axis.known and axis.role is Role.BATCH]
    if len(batch) > 1 or 2 in batch:
        return None
    if batch:
        other = second if batch == [0] else first
        if other.known and other.role not in (Role.SEQUENCE, Role.SPATIAL):
            return None  # (B, E, L) or (E, B, L): not an attention input in either layout
        return Layout(BATCH_FIRST if batch == [0] else SEQ_FIRST, shape[batch[0]].evidence)
    sequence = [i for i, axis in enumerate(shape) if axis.known and axis.role is Role.SEQUENCE]
    if sequence == [1] and not (first.known and first.role is not Role.BATCH):
        return Layout(BATCH_FIRST, second.evidence)
    if sequence == [0] and not (second.known and second.role is not Role.BATCH):
        return Layout(SEQ_FIRST, first.evidence)
    return None
