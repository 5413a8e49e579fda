"""MHA101 fully-masked-rows: a query row whose every key is masked: NaN, or silent zeros, at run time."""

from __future__ import annotations

from mhalint.rule import Invalid, Rule, Valid


class FullyMaskedRows(Rule):
    """
    ## What it does
    Reports, at run time under `mhalint.guard` or `pytest --mhalint-guard`, a call whose masks leave a query row
    with no key to attend to: a bool `key_padding_mask` row all True, a MultiheadAttention mask row all True, an
    SDPA bool row all False, a float row all -inf. For `nn.MultiheadAttention` and the Transformer classes the
    key padding mask and the attention mask are combined. For SDPA only rows that leave a whole sample (or a
    whole head of it) without keys are reported: a partially masked query dimension is the normal shape of a mask
    built from padded queries and keys. The report names the samples and positions, whether this call's output
    has NaN, and which paths give NaN.

    ## Why is this bad?
    A softmax over a row with every key masked is NaN. nn.MultiheadAttention gives NaN for such rows on its
    inference fast path and whenever need_weights=True (in training also in the weight gradients, even if the loss
    ignores that sample); SDPA returns exact zeros for them on every CPU backend in the torch 2.13 experiment, so
    the output is silently zero (docs/torch-facts.md#fully-masked-rows). Only the data shows it: no static rule
    can.

    ## Known problems
    Only calls the guard sees are checked. Calls under `torch.compile`, tracing or tensor subclasses are not,
    nor SDPA imported by name before the guard started. For SDPA, rows that leave only part of a sample's
    queries without keys are not reported, since that is the normal shape of a mask built from padded queries
    and keys.

    ## Example
    ```python
    padding = torch.tensor([[False, False], [True, True]])     # sample 1 is all padding
    out, _ = mha(x, x, x, key_padding_mask=padding)            # sample 1 comes out NaN
    ```

    ## Use instead
    ```python
    keep = ~padding.all(dim=1)                                  # drop samples that are entirely padding
    out, _ = mha(x[keep], x[keep], x[keep], key_padding_mask=padding[keep])
    ```

    ## Fix safety
    No automatic fix: which samples to drop, or which key to unmask, is the caller's decision.

    ## References
    - docs/torch-facts.md#fully-masked-rows
    - torch 2.13 `nn/functional.py` (softmax of an all -inf row)
    """

    code = "MHA101"
    name = "fully-masked-rows"
    summary = "At run time: a query row with no key left to attend to (NaN, or zeros from SDPA)"
    runtime_valid = (
        Valid(
            """
            import torch
            mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
            x = torch.randn(2, 3, 8)
            pad = torch.tensor([[False, False, True], [False, True, True]])
            mha(x, x, x, key_padding_mask=pad)
            """,
        ),
    )
    runtime_invalid = (
        Invalid(
            """
            import torch
            mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
            x = torch.randn(2, 3, 8)
            pad = torch.tensor([[False, False, True], [True, True, True]])
            mha(x, x, x, key_padding_mask=pad)
            """,
            line=5,
            message="has query rows with no key to attend to in sample 1",
        ),
    )

    @staticmethod
    def guard(call) -> list:
        """MHA101: query rows whose keys are all masked (key_padding_mask and attn_mask combined; SDPA: whole
        samples)."""
        from mhalint.guard import support as s
        if call.sdpa is not None:
            return _sdpa_fully_masked(call)
        pending = []
        for block in call.blocks:
            rows = _blocked_rows(block)
            if rows is not None:
                pending.append(s.Pending(rows.amax(),
                                       lambda rows=rows, block=block: _rows_message(call, block, rows)))
        return pending


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


def _blocked_rows(block):
    """(N or 1, h or 1, L or 1) bool: True where a query row has no key left; None when the masks can't be read."""
    from mhalint.guard import support as s
    n, heads = block.batch, block.heads
    kpm = s.ignored(block.kpm)
    if kpm is not None:
        if kpm.dim() == 1 and not block.batched:
            kpm = kpm.unsqueeze(0)
        if kpm.dim() != 2 or kpm.shape[0] != n or kpm.numel() == 0:
            kpm = None
    attn = s.ignored(block.attn_mask)
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


def _rows_message(call, block, rows) -> str | None:
    from mhalint.guard import support as s
    if "MHA002" in call.reported:
        return None  # a flipped causal mask: its report already says that the last row has no key
    kpm_ok = s.plain(block.kpm) and s.ignored(block.kpm) is not None
    attn_ok = s.plain(block.attn_mask) and s.ignored(block.attn_mask) is not None
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
            where = f"query positions {s.ints(sorted(positions))}"
        if h_rows > 1:
            where += " in every head" if len(heads) == h_rows else f" in heads {s.ints(sorted(heads))}"
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
        who = f"samples {s.ints(sorted(found), 4)}"
    if kpm_ok and attn_ok:
        cause = f"{block.kpm_name} and {block.attn_name} together leave no key"
        hint = (" With a causal mask and left padding, the first positions of a left-padded sample see only "
                "padding: use right padding, or unmask each position's own key.")
    elif kpm_ok:
        cause = f"the {block.kpm_name} row is all {s.blocked_word(block.kpm)}, so every key is padding"
        hint = ""
    else:
        cause = f"those {block.attn_name} rows are all {s.blocked_word(block.attn_mask)}"
        hint = ""
    label = f" ({block.label})" if block.label else ""
    kind = "encoder" if call.kind == "transformer" and block.label == "encoder" else call.kind
    paths = _NAN_PATHS.get(kind, _NAN_PATHS_DECODER)
    return s.message(
        f"{call.api}{label} has query rows with no key to attend to in {who}: {cause}",
        "remove samples that are entirely padding from the batch (or skip the call for them), or keep at least one "
        f"key unmasked in every row, e.g. unmask the first key of an empty sample and ignore its output.{hint}",
        f"Rows with no key: {'; '.join(parts)}. A softmax over a row with every key masked is NaN. "
        f"{s.outcome(call)} {paths}")


def _sdpa_fully_masked(call) -> list:
    import torch

    from mhalint.guard import support as s
    mask = call.sdpa["attn_mask"]
    if not s.plain(mask) or mask.dim() == 0 or mask.numel() == 0:
        return []
    if mask.dtype == torch.bool:
        blocked = ~mask
    elif mask.is_floating_point():
        blocked = torch.isneginf(mask)
    else:
        return []
    rows = blocked.amin(-1)  # amin: a faster `all` for bool on CPU
    whole = rows.amin(-1) if mask.dim() >= 2 else rows  # every query row of a (sample, head) has no key
    return [s.Pending(whole.amax(), lambda: _sdpa_rows_message(call, mask, whole))]


def _sdpa_rows_message(call, mask, whole) -> str:
    import torch

    from mhalint.guard import support as s
    query = call.sdpa["query"]
    names = {4: ["sample", "head"], 3: ["sample"]}.get(query.dim() if s.plain(query) else 0, [])
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
            text += f" (heads {s.ints(sorted(heads))})"
        places.append(text)
    where = "; ".join(places) + (f"; ... ({len(found)} in all)" if len(found) > 4 else "")
    flip = (" If True in this mask means 'ignore' (nn.MultiheadAttention's convention), it is inverted for SDPA, "
            "which reads True as 'attend': pass ~mask (MHA002)." if mask.dtype == torch.bool else "")
    first = places[0] + (f" and {len(found) - 1} more" if len(found) > 1 else "")
    return s.message(
        f"F.scaled_dot_product_attention's attn_mask {s.shape_of(mask)} leaves no key to attend to in any query row of "
        f"{first}: SDPA silently returns zeros there",
        "remove samples that are entirely padding from the batch, or leave at least one key allowed per row." + flip,
        f"No key in any query row of: {where}; those rows of the attn_mask ({s.dtype_of(mask)}) are all "
        f"{s.blocked_word(mask, sdpa=True)}. In torch 2.13 experiments SDPA returned exact zeros for such rows on "
        "every CPU backend, without NaN (docs/torch-facts.md#fully-masked-rows; other devices were not tried), so "
        "that attention output is silently zero, while a hand-written softmax or nn.MultiheadAttention (fast path, "
        "or need_weights=True) gives NaN for the same rows.")
