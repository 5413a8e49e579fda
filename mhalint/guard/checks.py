"""The guard's checks, one function per check. Each reads a `CallInfo` and returns `Pending` items: a flag (a
0-dim bool tensor, or a Python bool) and a function that writes the report's message once the flag is known to be
true. The flags of one call are read together (one device synchronisation), and the messages, which may look at
the data in more detail, are only written for the rare flags that are set.

Checks only read masks, flags, modes and the output: nothing is written, moved to another device or kept.
A message's first line is its headline (at most HEADLINE_LIMIT characters): the problem and the decisive evidence
seen at the call. The fix follows on the next line, then the why. Every number in a message that the call itself
did not produce is from a torch 2.13.0 experiment on CPU and says so, citing its section of docs/torch-facts.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..finding import HEADLINE_LIMIT, shorten
from .apis import Block, CallInfo, plain

NEG_INF = float("-inf")


@dataclass
class Pending:
    code: str
    flag: Any  # a 0-dim bool tensor or a bool
    message: Callable[[], str | None]  # called only when the flag is true; None: no report after all


# ----------------------------------------------------------------------------------------------------- helpers

def _message(headline: str, fix: str, why: str) -> str:
    """A report's text: the headline (cut to HEADLINE_LIMIT if it must be), the fix, then the why, a line each."""
    return f"{shorten(headline, HEADLINE_LIMIT)}\nFix: {fix}\n{why}"


def _ints(values, limit: int = 8) -> str:
    values = list(values)
    if len(values) <= limit:
        return "[" + ", ".join(str(v) for v in values) + "]"
    return "[" + ", ".join(str(v) for v in values[:limit]) + f", ... ({len(values)} in all)]"


def _shape(tensor) -> str:
    return "(" + ", ".join(str(s) for s in tensor.shape) + ")"


def _dtype(tensor) -> str:
    return str(tensor.dtype).replace("torch.", "")


def _ignored(mask):
    """Where a MultiheadAttention-convention mask blocks a key: bool True, float -inf (None: not a mask we read)."""
    if not plain(mask):
        return None
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point():
        return torch.isneginf(mask)
    return None


def _blocked_word(mask, sdpa: bool = False) -> str:
    if mask.dtype == torch.bool:
        return "False" if sdpa else "True"
    return "-inf"


def _masks(call: CallInfo):
    """(name, mask, block) for every mask argument of the call."""
    for block in call.blocks:
        yield block.attn_name, block.attn_mask, block
        yield block.kpm_name, block.kpm, block
    if call.sdpa is not None:
        yield "attn_mask", call.sdpa["attn_mask"], None


def nan_samples(call: CallInfo) -> list[int] | None:
    """Indices of the samples whose output has NaN (None when the output is unbatched)."""
    cached = getattr(call, "_nan_samples", False)
    if cached is not False:
        return cached
    out, dim = call.output, call.batch_dim
    result = None
    if plain(out) and dim is not None and out.dim() > dim:
        flags = torch.isnan(out).transpose(0, dim).reshape(out.shape[dim], -1).any(1)
        result = flags.nonzero().flatten().tolist()
    call._nan_samples = result
    return result


def _outcome(call: CallInfo) -> str:
    if call.error is not None:
        return f"This call ({call.mode_text()}) raised {type(call.error).__name__}."
    if call.output_nan:
        samples = nan_samples(call)
        where = f" in samples {_ints(samples)}" if samples else ""
        return f"This call ({call.mode_text()}) returned NaN{where}."
    return f"This call ({call.mode_text()}) returned a finite output, but the same masks give NaN on other paths."


# ------------------------------------------------------------------------------- MHA008 0/1 float mask

def float_keep_mask(call: CallInfo) -> list[Pending]:
    """MHA008: a floating-point mask whose values are only 0 and 1 (at least one 1)."""
    pending = []
    seen: set[int] = set()
    for name, mask, _ in _masks(call):
        if not plain(mask) or not mask.is_floating_point() or mask.numel() == 0 or id(mask) in seen:
            continue
        seen.add(id(mask))
        low, high = torch.aminmax(mask)  # one pass; the exact test runs only when this range fits
        flag = (low >= 0) & (high == 1)
        pending.append(Pending("MHA008", flag, lambda name=name, mask=mask: _float_keep_message(call, name, mask)))
    return pending


def _float_keep_message(call: CallInfo, name: str, mask) -> str | None:
    is_one = mask == 1
    if not bool(((mask == 0) | is_one).all()):
        return None  # values between 0 and 1: a soft (additive) bias, not a 0/1 mask
    ones = int(is_one.sum())
    if call.kind == "sdpa":
        fix = ("if 1 means 'attend', pass mask.bool() (SDPA reads True as attend); or make it additive, "
               "0 where attended and -inf where masked: torch.zeros_like(mask).masked_fill(mask == 0, float('-inf')).")
    else:
        fix = (f"if 1 means 'attend', pass mask == 0 ({call.api} reads a bool True as ignore); if 1 means "
               "'ignore', pass mask.bool(); or make it additive, 0 where attended and -inf where masked.")
    return _message(
        f"{call.api} got a float {name} of only 0s and 1s ({ones} ones among {mask.numel()} entries): added to the "
        "scores, it masks nothing", fix,
        f"The mask has shape {_shape(mask)} ({_dtype(mask)}). Float masks are added to the attention scores, so a 0/1 "
        "mask masks nothing: it only adds +1 to some scores. torch 2.13 experiment: a 0/1 keep-mask given as a "
        "padding mask left the output 0.676 from the correctly masked result and 0.325 from no mask at all "
        "(docs/torch-facts.md#float-masks-are-additive).")


# ------------------------------------------------------------------------------- MHA002 causal mask flipped

_TRIANGLES: dict[tuple, Any] = {}


def _triangle(size: int, device, upper: bool):
    """A cached (size, size) bool triangle: strictly upper (triu(1)) or lower with the diagonal (tril(0))."""
    key = (size, str(device), upper)
    ref = _TRIANGLES.get(key)
    if ref is None:
        if len(_TRIANGLES) > 16:
            _TRIANGLES.clear()
        ones = torch.ones(size, size, dtype=torch.bool, device=device)
        ref = _TRIANGLES[key] = ones.triu(1) if upper else ones.tril(0)
    return ref


def causal_convention_flip(call: CallInfo) -> list[Pending]:
    """MHA002: a bool causal mask in the other API's convention (only this unambiguous case is checked)."""
    pending = []
    if call.sdpa is not None:
        mask = call.sdpa["attn_mask"]
        if _square_bool(mask, (2, 3, 4)):
            flag = ~mask.diagonal(dim1=-2, dim2=-1).any()  # SDPA's causal keep-mask has a True diagonal
            pending.append(Pending("MHA002", flag, lambda: _flip_message(call, "attn_mask", mask, upper=True)))
    for block in call.blocks:
        mask = block.attn_mask
        if _square_bool(mask, (2, 3)):
            flag = mask.diagonal(dim1=-2, dim2=-1).all()  # MultiheadAttention's causal mask has a False diagonal
            pending.append(Pending("MHA002", flag,
                                   lambda mask=mask, block=block: _flip_message(call, block.attn_name, mask,
                                                                                upper=False)))
    return pending


def _square_bool(mask, dims) -> bool:
    return plain(mask) and mask.dtype == torch.bool and mask.dim() in dims and mask.shape[-1] == mask.shape[-2] > 1


def _flip_message(call: CallInfo, name: str, mask, upper: bool) -> str | None:
    ref = _triangle(mask.shape[-1], mask.device, upper)
    if not torch.equal(mask, ref.expand(mask.shape)):
        return None
    if upper:
        return _message(
            f"F.scaled_dot_product_attention got a bool {name} {_shape(mask)} True only above the diagonal: a "
            "True = ignore causal mask, but SDPA reads True as attend",
            "pass ~mask, or drop the mask and pass is_causal=True.",
            "In nn.MultiheadAttention's convention True means 'ignore', but SDPA reads True as 'attend': every query "
            "attends only to later keys, and the last query to none (its output row comes out as zeros). torch 2.13 "
            "experiment: the output was 1.97 from the causal result (docs/torch-facts.md#mask-convention).")
    return _message(
        f"{call.api} got a bool {name} {_shape(mask)} True on and below the diagonal: a True = attend causal mask, "
        "but it reads True as ignore",
        "pass ~mask, or nn.Transformer.generate_square_subsequent_mask(L).",
        f"In F.scaled_dot_product_attention's convention True means 'attend', but {call.api} reads True as "
        "'ignore': every position attends only to later positions and the last one to none, which is NaN on the "
        "inference fast path and with need_weights=True (docs/torch-facts.md#fully-masked-rows). torch 2.13 "
        "experiment: the same mix-up in the other direction was 1.97 from the causal result "
        "(docs/torch-facts.md#mask-convention).")


# ------------------------------------------------------------------------------- MHA006 .repeat(h, 1, 1) layout

def repeat_layout(call: CallInfo) -> list[Pending]:
    """MHA006: a 3-D (N*h, L, S) attn_mask constant over h when viewed (h, N, L, S), whose samples differ."""
    pending = []
    for block in call.blocks:
        mask, n, heads = block.attn_mask, block.batch, block.heads
        if not (plain(mask) and mask.dim() == 3 and block.batched and n > 1 and heads and heads > 1
                and mask.shape[0] == n * heads and mask.numel()):
            continue
        rows = mask.reshape(n * heads, -1)
        # Head-major, rows 0..N-1 are head 0 of every sample: if they are all equal, the samples share one mask
        # (or the layout is batch-major with equal heads), and both readings agree.
        flag = (rows[1:n] != rows[:1]).any()
        pending.append(Pending("MHA006", flag,
                               lambda rows=rows, block=block, mask=mask: _repeat_message(call, block, mask, rows)))
    return pending


def _repeat_message(call: CallInfo, block: Block, mask, rows) -> str | None:
    n, heads = block.batch, block.heads
    head_major = rows.view(heads, n, -1)
    if not bool((head_major[1:] == head_major[:1]).all()):
        return None  # not constant over the heads in the (h, N, L, S) view: a per-head mask, not .repeat(h, 1, 1)
    wrong = [(s, h, (s * heads + h) % n) for s in range(n) for h in range(heads) if (s * heads + h) % n != s]
    first = [(h, other) for s, h, other in wrong if s == 0]
    example = ""
    if first:
        others = sorted({other for _, other in first})
        example = (f"; for example sample 0's heads {_ints(h for h, _ in first)} use the mask of "
                   f"sample{'s' if len(others) > 1 else ''} {_ints(others) if len(others) > 1 else others[0]}")
    return _message(
        f"{call.api} got a head-major 3-D {block.attn_name} {_shape(mask)}, as .repeat({heads}, 1, 1) builds it: "
        f"{len(wrong)} of {n * heads} (sample, head) pairs get another sample's mask",
        f"tile it with mask.repeat_interleave({heads}, dim=0).",
        f"The mask's first dimension is N={n} samples x num_heads={heads}; viewed as (num_heads, N, L, S) it is the "
        f"same for every head, and the samples' masks differ. {call.api} reads it batch-major (row "
        f"n*num_heads + head belongs to sample n; torch 2.13 functional.py:7068){example}. torch 2.13 experiment: "
        "1.517e-01 off the per-sample result (docs/torch-facts.md#mask-repeat-layout).")


# ------------------------------------------------------------------------------- MHA101 rows with no key

_NAN_PATHS = {
    "mha": ("For nn.MultiheadAttention such rows are NaN on the inference fast path (eval + no_grad, "
            "batch_first=True, even heads, bool masks) and whenever need_weights=True, which in training also makes "
            "the weight gradients NaN even if the loss ignores that sample; only the slow path with "
            "need_weights=False stays finite (those rows' attention output is 0, so the result equals out_proj.bias) "
            "(docs/torch-facts.md#fully-masked-rows)."),
    "mha_fn": ("F.multi_head_attention_forward gives NaN for such rows when need_weights=True (in training also in "
               "the weight gradients, even if the loss ignores that sample) and a finite result with "
               "need_weights=False, where their attention output is 0 (docs/torch-facts.md#fully-masked-rows)."),
    "encoder_layer": ("nn.TransformerEncoderLayer gives NaN for such rows in eval + no_grad (its fused kernel) and a "
                      "finite output in training (docs/torch-facts.md#fully-masked-rows)."),
    "encoder": ("nn.TransformerEncoder's layers give NaN for such rows on the fused inference kernel; in eval + "
                "no_grad with a bool src_key_padding_mask its nested-tensor path returns exact zeros for a fully "
                "padded sample instead, and nn.TransformerEncoderLayer in training gives a finite output "
                "(docs/torch-facts.md#fully-masked-rows)."),
}
_NAN_PATHS_DECODER = ("Its attention blocks call nn.MultiheadAttention with need_weights=False, which gives NaN for "
                      "such rows on its inference fast path (eval + no_grad) and a finite output (attention output 0) "
                      "on its slow path (docs/torch-facts.md#is-causal-hint, "
                      "docs/torch-facts.md#fully-masked-rows).")


def fully_masked_rows(call: CallInfo) -> list[Pending]:
    """MHA101: query rows whose keys are all masked (key_padding_mask and attn_mask combined; SDPA: whole samples)."""
    if call.sdpa is not None:
        return _sdpa_fully_masked(call)
    pending = []
    for block in call.blocks:
        rows = _blocked_rows(block)
        if rows is not None:
            pending.append(Pending("MHA101", rows.amax(),
                                   lambda rows=rows, block=block: _rows_message(call, block, rows)))
    return pending


def _blocked_rows(block: Block):
    """(N or 1, h or 1, L or 1) bool: True where a query row has no key left; None when the masks can't be read."""
    n, heads = block.batch, block.heads
    kpm = _ignored(block.kpm)
    if kpm is not None:
        if kpm.dim() == 1 and not block.batched:
            kpm = kpm.unsqueeze(0)
        if kpm.dim() != 2 or kpm.shape[0] != n or kpm.numel() == 0:
            kpm = None
    attn = _ignored(block.attn_mask)
    if attn is not None:
        if attn.dim() == 2:
            attn = attn[None, None]
        elif attn.dim() == 3 and heads and attn.shape[0] == n * heads:
            attn = attn.view(n, heads, attn.shape[1], attn.shape[2])
        else:
            attn = None
        if attn is not None and attn.numel() == 0:
            attn = None
    if kpm is not None and attn is not None:
        if kpm.shape[-1] != attn.shape[-1]:
            return None
        return (attn | kpm[:, None, None, :]).amin(-1)  # amin: a faster `all` for bool on CPU
    if kpm is not None:
        return kpm.amin(-1)[:, None, None]
    if attn is not None:
        return attn.amin(-1)
    return None


def _rows_message(call: CallInfo, block: Block, rows) -> str | None:
    if "MHA002" in call.reported:
        return None  # a flipped causal mask: its report already says that the last row has no key
    kpm_ok = plain(block.kpm) and _ignored(block.kpm) is not None
    attn_ok = plain(block.attn_mask) and _ignored(block.attn_mask) is not None
    n_rows, h_rows, l_rows = rows.shape
    found: dict[int, tuple[set, set]] = {}
    for sample, head, position in rows.nonzero().tolist():
        heads, positions = found.setdefault(sample, (set(), set()))
        heads.add(head)
        positions.add(position)
    parts, samples = [], []
    for sample in sorted(found)[:4]:
        heads, positions = found[sample]
        who = "every sample" if n_rows == 1 and block.batch > 1 else (f"sample {sample}" if block.batched else
                                                                      "the (unbatched) input")
        samples.append(sample)
        if l_rows == 1:
            where = "every query position"
        elif block.length is not None and len(positions) == block.length:
            where = f"all {block.length} query positions"
        else:
            where = f"query positions {_ints(sorted(positions))}"
        if h_rows > 1:
            where += " in every head" if len(heads) == h_rows else f" in heads {_ints(sorted(heads))}"
        parts.append(f"{who}: {where}")
    if len(found) > 4:
        parts.append(f"... ({len(found)} samples in all)")
    if n_rows == 1 and block.batch > 1:
        who = "every sample"
    elif not block.batched:
        who = "the (unbatched) input"
    elif len(found) == 1:
        who = f"sample {samples[0]}"
    else:
        who = f"samples {_ints(sorted(found), 4)}"
    if kpm_ok and attn_ok:
        cause = f"{block.kpm_name} and {block.attn_name} together leave no key"
        hint = (" With a causal mask and left padding, the first positions of a left-padded sample see only "
                "padding: use right padding, or unmask each position's own key.")
    elif kpm_ok:
        cause = f"the {block.kpm_name} row is all {_blocked_word(block.kpm)}, so every key is padding"
        hint = ""
    else:
        cause = f"those {block.attn_name} rows are all {_blocked_word(block.attn_mask)}"
        hint = ""
    label = f" ({block.label})" if block.label else ""
    kind = "encoder" if call.kind == "transformer" and block.label == "encoder" else call.kind
    paths = _NAN_PATHS.get(kind, _NAN_PATHS_DECODER)
    return _message(
        f"{call.api}{label} has query rows with no key to attend to in {who}: {cause}",
        "remove samples that are entirely padding from the batch (or skip the call for them), or keep at least one "
        f"key unmasked in every row, e.g. unmask the first key of an empty sample and ignore its output.{hint}",
        f"Rows with no key: {'; '.join(parts)}. A softmax over a row with every key masked is NaN. "
        f"{_outcome(call)} {paths}")


def _sdpa_fully_masked(call: CallInfo) -> list[Pending]:
    mask = call.sdpa["attn_mask"]
    if not plain(mask) or mask.dim() == 0 or mask.numel() == 0:
        return []
    if mask.dtype == torch.bool:
        blocked = ~mask
    elif mask.is_floating_point():
        blocked = torch.isneginf(mask)
    else:
        return []
    rows = blocked.amin(-1)  # amin: a faster `all` for bool on CPU
    whole = rows.amin(-1) if mask.dim() >= 2 else rows  # every query row of a (sample, head) has no key
    return [Pending("MHA101", whole.amax(), lambda: _sdpa_rows_message(call, mask, whole))]


def _sdpa_rows_message(call: CallInfo, mask, whole) -> str:
    query = call.sdpa["query"]
    names = {4: ["sample", "head"], 3: ["sample"]}.get(query.dim() if plain(query) else 0, [])
    names = names[len(names) - whole.dim():] if whole.dim() <= len(names) else [None] * whole.dim()
    found: dict[tuple, set] = {}
    for index in whole.nonzero().tolist():
        words = [(name, i) for name, i, size in zip(names, index, whole.shape) if name and size > 1]
        sample = tuple(w for w in words if w[0] != "head")
        found.setdefault(sample, set()).update(i for name, i in words if name == "head")
    head_count = whole.shape[names.index("head")] if "head" in names else 1
    places = []
    for sample in sorted(found)[:4]:
        text = ", ".join(f"{name} {i}" for name, i in sample) or "every sample"
        heads = found[sample]
        if heads and len(heads) < head_count:
            text += f" (heads {_ints(sorted(heads))})"
        places.append(text)
    where = "; ".join(places) + (f"; ... ({len(found)} in all)" if len(found) > 4 else "")
    flip = (" If True in this mask means 'ignore' (nn.MultiheadAttention's convention), it is inverted for SDPA, "
            "which reads True as 'attend': pass ~mask (MHA002)." if mask.dtype == torch.bool else "")
    first = places[0] + (f" and {len(found) - 1} more" if len(found) > 1 else "")
    return _message(
        f"F.scaled_dot_product_attention's attn_mask {_shape(mask)} leaves no key to attend to in any query row of "
        f"{first}: SDPA silently returns zeros there",
        "remove samples that are entirely padding from the batch, or leave at least one key allowed per row." + flip,
        f"No key in any query row of: {where}; those rows of the attn_mask ({_dtype(mask)}) are all "
        f"{_blocked_word(mask, sdpa=True)}. In torch 2.13 experiments SDPA returned exact zeros for such rows on "
        "every CPU backend, without NaN (docs/torch-facts.md#fully-masked-rows; other devices were not tried), so "
        "that attention output is silently zero, while a hand-written softmax or nn.MultiheadAttention (fast path, "
        "or need_weights=True) gives NaN for the same rows.")


# ------------------------------------------------------------------------------- MHA102 SDPA (N, S) mask

def sdpa_padding_broadcast(call: CallInfo) -> list[Pending]:
    """MHA102: a 2-D bool (N, S) padding mask given to SDPA without broadcast dimensions, with N == L."""
    if call.sdpa is None:
        return []
    query, key, mask = call.sdpa["query"], call.sdpa["key"], call.sdpa["attn_mask"]
    if not (plain(mask) and mask.dtype == torch.bool and mask.dim() == 2 and plain(query) and query.dim() >= 3
            and plain(key) and key.dim() >= 2):
        return []
    n, length, keys = query.shape[0], query.shape[-2], key.shape[-2]
    if n > 1 and n == length and tuple(mask.shape) == (n, keys):
        return [Pending("MHA102", True, lambda: _broadcast_message(call, mask, query))]
    return []


def _broadcast_message(call: CallInfo, mask, query) -> str | None:
    keys = mask.shape[1]
    counts = mask.sum(-1)
    positions = torch.arange(keys, device=mask.device)
    prefix = bool((mask == (positions < counts[:, None])).all())
    suffix = bool((mask == (positions >= keys - counts[:, None])).all())
    if not (prefix or suffix) or bool((mask == mask[:1]).all()):
        return None  # not padding-shaped rows, or every row equal (both readings agree)
    c = counts.tolist()
    growing = all(a <= b for a, b in zip(c, c[1:]))
    shrinking = all(a >= b for a, b in zip(c, c[1:]))
    if (prefix and growing) or (suffix and shrinking):
        return None  # ordered like a causal or prefix mask: most likely a real (L, S) mask
    n = mask.shape[0]
    return _message(
        f"F.scaled_dot_product_attention got a bool attn_mask {_shape(mask)} of per-sample padding rows (True per "
        f"row: {_ints(c, 4)}), read as (L, S) since N = L = {n}",
        "pass mask[:, None, None, :] (shape (N, 1, 1, S)); SDPA reads True as 'attend', so invert a mask whose True "
        "marks padding.",
        f"The query has shape {_shape(query)}; True per mask row: {_ints(c)}. SDPA broadcasts a 2-D mask as "
        "(1, 1, L, S), so row i is applied to query position i of every sample. Nothing raises because the batch "
        f"size equals the query length (N = L = {n}). torch 2.13 experiment: 3.835 off the intended result at "
        "N = L = 4 and 4.144 at N = L = 10 (docs/torch-facts.md#sdpa-padding-broadcast).")


# ------------------------------------------------------------------------------- MHA003 is_causal without mask

# In a torch 2.13 experiment (E=16, 4 heads, L=6; docs/torch-facts.md#is-causal-hint): how far the silent output
# was from the causal one.
_CAUSAL_DISTANCE = {
    "mha": "0.69", "encoder_layer": "1.35", "encoder": "2.04", "decoder_layer": "0.94", "decoder": "0.95",
}


def causal_without_mask(call: CallInfo) -> list[Pending]:
    """MHA003: is_causal=True (or src_/tgt_/memory_is_causal) without the mask it describes."""
    return [Pending("MHA003", True, lambda block=block: _causal_message(call, block))
            for block in call.blocks if block.causal and block.attn_mask is None]


def _causal_message(call: CallInfo, block: Block) -> str:
    label = f" ({block.label})" if block.label else ""
    called = f"{call.api}{label} got {block.causal_name}=True and no {block.attn_name}"
    hint = ("For nn.MultiheadAttention and the Transformer classes is_causal is only a hint about the mask you pass; "
            "it does not build one.")
    distance = _CAUSAL_DISTANCE.get(call.kind)
    if call.kind == "transformer" and block.causal_name == "tgt_is_causal":
        distance = "0.88"
    equal = "the output equals the unmasked output (" + (
        f"torch 2.13 experiment: {distance} away from the causal one at E=16, 4 heads, L=6; " if distance else "") + \
        "docs/torch-facts.md#is-causal-hint)"
    error = call.error
    if error is None:
        headline = f"{called}: no error, so the fused inference path ignored the flag"
        what = (f"This call ({call.mode_text()}) returned without error, which for this misuse means torch's fused "
                f"inference path dropped the flag: every position attended to later positions, and {equal}. In "
                "training mode the same call raises RuntimeError: Need attn_mask if specifying the is_causal hint.")
    elif isinstance(error, RuntimeError) and "is_causal" in str(error):
        headline = f"{called}: it raised RuntimeError: Need attn_mask if specifying the is_causal hint"
        silent = ("cross-attention never takes the fast path, so this always raises" if block.causal_name ==
                  "memory_is_causal" else "in eval + no_grad (batch_first=True, an even head count) the same call "
                  f"is silently ignored instead: {equal}")
        what = (f"This call ({call.mode_text()}) raised RuntimeError (Need attn_mask if specifying the is_causal "
                f"hint) because it ran on the slow path; {silent}.")
    else:
        headline = f"{called}: the flag is only a hint, and this call raised {type(error).__name__}"
        what = f"This call ({call.mode_text()}) raised {type(error).__name__}."
    if call.kind in ("mha", "mha_fn"):
        fix = ("pass the mask too, attn_mask=nn.Transformer.generate_square_subsequent_mask(L) (is_causal=True "
               "may stay as the hint), or use F.scaled_dot_product_attention(q, k, v, is_causal=True), whose flag "
               "does build the mask.")
    else:
        fix = (f"pass {block.attn_name}=nn.Transformer.generate_square_subsequent_mask(L) together with "
               f"{block.causal_name}=True.")
    return _message(headline, fix, f"{hint} {what}")


# ------------------------------------------------------------------------------- MHA103 NaN in the output

def nan_output(call: CallInfo) -> list[Pending]:
    """MHA103: NaN in the attention output that no fully masked row explains (evaluated after the call)."""
    out = call.output
    if not plain(out) or not out.is_floating_point() or out.numel() == 0:
        return []
    # The sum is NaN when an element is NaN (or when +inf meets -inf: core confirms with isnan before reporting);
    # it is ten times faster than isnan(out).any() on CPU.
    return [Pending("MHA103", out.sum().isnan(), lambda: _nan_message(call))]


def _nan_message(call: CallInfo) -> str | None:
    if call.reported & {"MHA101", "MHA002"}:
        return None  # explained by the masks, and said in that report
    samples = nan_samples(call)
    where = f"in samples {_ints(samples)}" if samples else "in its output"
    upstream = [name for name, tensor in call.inputs
                if plain(tensor) and tensor.is_floating_point() and bool(torch.isnan(tensor).any())]
    if upstream:
        headline = f"its inputs {', '.join(upstream)} already contain NaN"
        cause = (f"The inputs {', '.join(upstream)} already contain NaN, so it comes from upstream: find where it "
                 "first appears (torch.autograd.set_detect_anomaly(True) helps for NaN gradients).")
    else:
        bad_masks = [name for name, mask, _ in _masks(call) if plain(mask) and mask.is_floating_point()
                     and bool((torch.isnan(mask) | torch.isposinf(mask)).any())]
        module = call.module
        bad_weights = module is not None and any(bool(torch.isnan(p).any()) for p in module.parameters()
                                                 if plain(p) and p.is_floating_point())
        found = []
        if bad_masks:
            found.append(f"the float masks {', '.join(bad_masks)} contain NaN or +inf")
        if bad_weights:
            found.append("the module's parameters contain NaN")
        headline = " and ".join(found) if found else "no NaN in its inputs, and no mask row leaves a query without keys"
        cause = ("The inputs have no NaN and no mask row leaves a query without keys; "
                 + ("but " + " and ".join(found) + "." if found else
                    "look for overflow in low precision (float16 scores) or NaN in the weights."))
    return _message(f"{call.api} returned NaN {where}: {headline}",
                    "find where the NaN first appears and remove its source.",
                    f"This call: {call.mode_text()}. {cause} See docs/torch-facts.md#nan-output.")
