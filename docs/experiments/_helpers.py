"""What every experiment script shares: quiet torch import, the FACT line format, small numeric helpers.

Each script is run on its own (`python docs/experiments/NAME.py`); Python puts the script's folder first on
sys.path, so `import _helpers` finds this file. Import it before torch: it silences the one warning a torch
wheel prints on import when NumPy is not installed ("Failed to initialize NumPy"), which changes nothing here.
"""

from __future__ import annotations

import contextlib
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402  (after the filter)

TORCH_VERSION = torch.__version__


def fact(anchor: str, key: str, value) -> None:
    """Print one machine-readable line: `FACT <anchor> <key> = <value>` (docs/torch-facts.md has the same key)."""
    print(f"FACT {anchor} {key} = {show(value)}", flush=True)


def show(value) -> str:
    """A value as the FACT line writes it: floats with 6 significant digits, shapes as tuples, text on one line."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):  # always with a point or an exponent, so that it never reads as an integer
        text = f"{value:.6g}"
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, torch.Size):
        return str(tuple(value))
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    return " ".join(str(value).splitlines()).strip()  # one line; spaces inside the text are kept as torch wrote them


def diff(a, b) -> float:
    """max |a - b| as a float (NaN-free inputs expected)."""
    return float((a - b).abs().max())


def first_line(error: BaseException) -> str:
    """The first line of an exception's text, without torch's "(Triggered internally at ...)" suffix."""
    text = str(error).splitlines()[0] if str(error) else ""
    return _untriggered(text)


def _untriggered(text: str) -> str:
    marker = " (Triggered internally at"
    return text.split(marker)[0].strip() if marker in text else text.strip()


def outcome(action) -> str:
    """`ok`, or `<ExceptionType>: <first line>` for what `action()` raised (warnings are not shown)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            action()
        except Exception as error:  # noqa: BLE001  (any torch error is an outcome to report)
            return f"{type(error).__name__}: {first_line(error)}"
    return "ok"


def warnings_of(action) -> list[str]:
    """The texts of the warnings `action()` emits (each once, torch's internal-location suffix removed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.suppress(Exception):
            action()
    texts = []
    for w in caught:
        text = _untriggered(str(w.message).splitlines()[0])
        if "Failed to initialize NumPy" not in text and text not in texts:
            texts.append(text)
    return texts


def warning_sites(action) -> list[str]:
    """`file:line` (relative to the torch package) of each warning `action()` emits, in order, without repeats."""
    import os

    root = os.path.dirname(torch.__file__) + os.sep
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.suppress(Exception):
            action()
    sites = []
    for w in caught:
        if "Failed to initialize NumPy" in str(w.message):
            continue
        site = f"{w.filename.replace(root, '')}:{w.lineno}"
        if site not in sites:
            sites.append(site)
    return sites


class CallCounter:
    """Count calls of a torch module-level function (e.g. torch._native_multi_head_attention) by replacing the
    attribute for the duration of a `with` block. Torch looks these up at call time, so the wrapper sees them."""

    def __init__(self, owner, name: str):
        self.owner, self.name, self.calls = owner, name, 0
        self.original = getattr(owner, name)

    def __enter__(self):
        def counting(*args, **kwargs):
            self.calls += 1
            return self.original(*args, **kwargs)

        setattr(self.owner, self.name, counting)
        return self

    def __exit__(self, *exc):
        setattr(self.owner, self.name, self.original)
        return False


def count_calls(owner, name: str, action) -> int:
    with CallCounter(owner, name) as counter:
        action()
    return counter.calls


class PaddedBatch:
    """The setup of the mask experiments: a MultiheadAttention (E=64, 8 heads, batch_first=True) with random
    non-zero biases, a batch of N=4 sequences of L=10 with lengths 10, 7, 5 and 2, its (N, S) key padding mask in
    MultiheadAttention's convention (True = padding), and `sdpa(...)`, the same attention computed with
    F.scaled_dot_product_attention from the module's own weights. Seed 0 unless told."""

    N, L, E, H = 4, 10, 64, 8

    def __init__(self, seed: int = 0):
        torch.manual_seed(seed)
        self.mha = torch.nn.MultiheadAttention(self.E, self.H, batch_first=True)
        with torch.no_grad():  # non-zero biases, so that the SDPA rebuild is a real test
            self.mha.in_proj_bias.normal_()
            self.mha.out_proj.bias.normal_()
        self.x = torch.randn(self.N, self.L, self.E)
        lengths = torch.tensor([10, 7, 5, 2])
        self.padding = torch.arange(self.L)[None, :] >= lengths[:, None]  # (N, S), True = padding

    def slow(self, **masks):
        """The module's slow path (training mode; dropout is 0, so only the path changes), need_weights=False."""
        self.mha.train()
        with torch.no_grad():
            return self.mha(self.x, self.x, self.x, need_weights=False, **masks)[0]

    def fast(self, **masks):
        """The module's fast path (eval + no_grad, batch_first=True, even heads), need_weights=False."""
        self.mha.eval()
        with torch.no_grad():
            return self.mha(self.x, self.x, self.x, need_weights=False, **masks)[0]

    def sdpa(self, attn_mask=None, is_causal=False):
        """Self-attention of the module's weights through F.scaled_dot_product_attention."""
        F = torch.nn.functional
        n, length, embed, heads = self.N, self.L, self.E, self.H
        with torch.no_grad():
            q, k, v = F.linear(self.x, self.mha.in_proj_weight, self.mha.in_proj_bias).chunk(3, dim=-1)
            q, k, v = (t.reshape(n, length, heads, embed // heads).transpose(1, 2) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
            out = out.transpose(1, 2).reshape(n, length, embed)
            return F.linear(out, self.mha.out_proj.weight, self.mha.out_proj.bias)
