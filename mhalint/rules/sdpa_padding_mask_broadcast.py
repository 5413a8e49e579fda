"""MHA102 sdpa-padding-mask-broadcast: a 2-D (N, S) padding mask given to SDPA, broadcast as (L, S) when N == L."""

from __future__ import annotations

from mhalint.rule import Invalid, Rule, Valid


class SdpaPaddingMaskBroadcast(Rule):
    """
    ## What it does
    Reports, at run time, an `F.scaled_dot_product_attention` call whose `attn_mask` is a 2-D bool tensor of shape
    (N, S) with N == L whose rows look like per-sample padding (a run of True and a run of False, rows not all
    equal, and not ordered like a causal or prefix mask).

    ## Why is this bad?
    SDPA broadcasts a 2-D mask as (1, 1, L, S), so row i is applied to query position i of every sample, not to
    sample i. With N != L the call raises; with N == L nothing raises and the wrong queries are masked: 3.835 off
    the intended result at N = L = 4 and 4.144 at N = L = 10 in the torch 2.13 experiment
    (docs/torch-facts.md#sdpa-padding-broadcast).

    ## Known problems
    Only calls the guard sees are checked, and only when N == L (otherwise torch raises by itself). A genuine
    (L, S) mask whose rows happen to look like per-sample padding, and are not ordered like a causal or prefix
    mask, would be reported.

    ## Example
    ```python
    keep = lengths_to_mask(lengths)                       # (N, S), True at real tokens
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    ```

    ## Use instead
    ```python
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
    ```

    ## Fix safety
    No automatic fix at run time; the report names the reshape.

    ## References
    - docs/torch-facts.md#sdpa-padding-broadcast
    """

    code = "MHA102"
    name = "sdpa-padding-mask-broadcast"
    summary = "At run time: SDPA got an (N, S) padding mask, which it broadcasts as (L, S) when N == L"
    runtime_valid = (
        Valid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(4, 2, 4, 8)
            keep = torch.arange(4)[None, :] < torch.tensor([4, 3, 2, 1])[:, None]
            F.scaled_dot_product_attention(q, q, q, attn_mask=keep[:, None, None, :])
            """,
        ),
    )
    runtime_invalid = (
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(4, 2, 4, 8)
            keep = torch.arange(4)[None, :] < torch.tensor([4, 1, 3, 2])[:, None]
            F.scaled_dot_product_attention(q, q, q, attn_mask=keep)
            """,
            line=5,
            message="of per-sample padding rows",
        ),
    )

    @staticmethod
    def guard(call) -> list:
        """MHA102: a 2-D bool (N, S) padding mask given to SDPA without broadcast dimensions, with N == L."""
        import torch

        from mhalint.guard import support as s
        if call.sdpa is None:
            return []
        query, key, mask = call.sdpa["query"], call.sdpa["key"], call.sdpa["attn_mask"]
        if not (s.plain(mask) and mask.dtype == torch.bool and mask.dim() == 2 and s.plain(query) and query.dim() >= 3
                and s.plain(key) and key.dim() >= 2):
            return []
        n, length, keys = query.shape[0], query.shape[-2], key.shape[-2]
        if n > 1 and n == length and tuple(mask.shape) == (n, keys):
            return [s.Pending(True, lambda: _broadcast_message(call, mask, query))]
        return []


def _broadcast_message(call, mask, query) -> str | None:
    import torch

    from mhalint.guard import support as s
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
    return s.message(
        f"F.scaled_dot_product_attention got a bool attn_mask {s.shape_of(mask)} of per-sample padding rows (True per "
        f"row: {s.ints(c, 4)}), read as (L, S) since N = L = {n}",
        "pass mask[:, None, None, :] (shape (N, 1, 1, S)); SDPA reads True as 'attend', so invert a mask whose True "
        "marks padding.",
        f"The query has shape {s.shape_of(query)}; True per mask row: {s.ints(c)}. SDPA broadcasts a 2-D mask as "
        "(1, 1, L, S), so row i is applied to query position i of every sample. Nothing raises because the batch "
        f"size equals the query length (N = L = {n}). torch 2.13 experiment: 3.835 off the intended result at "
        "N = L = 4 and 4.144 at N = L = 10 (docs/torch-facts.md#sdpa-padding-broadcast).")
