"""What the rules' probe experiments share: rebuild a torch module at a tiny size from a finding's resolved
arguments, run its forward whatever its signature, describe the sizes used, and say what the experiment showed
(`Rebuilt.verdict`). Runs only inside the probe process; `torch` is passed in, not imported here.

Honesty, one rule for every probe: "confirmed" only when every input the experiment rebuilt of the site came from
the site's own code. An input stood in for (a constructor size the finding does not know, a mask whose
construction could not be run, a layout or a convention the code does not show) is recorded with `assume`, and the
verdict is then "reproduced", naming each. Sizes the site's code does not fix (its batch and sequence length at run
time) are the experiment's choice, stated in its sizes, not assumed; sizes scaled down keep what the pitfall
depends on (the head count's parity, the remainder) and are stated too.
"""

from __future__ import annotations

from mhalint import torchapi
from mhalint.finding import CONFIRMED, NOT_CONFIRMED, REPRODUCED

N, L = 4, 10  # batch and sequence sizes of every experiment
HEAD_DIM = 8  # per-head width when the embedding size is unknown or scaled down
MAX_EMBED = 1024  # tiny inputs (N=4, L=10) keep even this cheap
MAX_HEADS = 64


class Rebuilt:
    """The inputs an experiment stood in for, in the words its verdict gives them."""

    def __init__(self) -> None:
        self.assumed: list[str] = []

    def assume(self, what: str) -> None:
        """`what` (`embed_dim=64`, `4 x 6 padding mask`) stood in for a value of the site's."""
        if what not in self.assumed:
            self.assumed.append(what)

    def verdict(self, found: str) -> tuple[str, str]:
        """The experiment showed the pitfall (`found`): confirmed when nothing was assumed, else reproduced,
        naming what was."""
        if not self.assumed:
            return CONFIRMED, found
        *rest, last = self.assumed
        named = f"{', '.join(rest)} and {last}" if rest else last
        return REPRODUCED, f"reproduced with assumed {named}: {found}"

    def outcome(self, shown: bool, text: str) -> tuple[str, str]:
        """`verdict(text)` when the experiment showed the pitfall, else not confirmed, with the same text."""
        return self.verdict(text) if shown else (NOT_CONFIRMED, text)


def dims(arguments: dict, rebuilt: Rebuilt, heads: int | None = None) -> tuple[int, int, list[str]]:
    """(embed_dim, num_heads, notes): the site's sizes when known and small, else stand-ins that keep the head
    count (what most pitfalls depend on). A stand-in is assumed in `rebuilt`; a scaled size is a note."""
    notes: list[str] = []
    embed_key = "embed_dim" if arguments.get("api") == torchapi.MHA else "d_model"
    heads_key = "num_heads" if arguments.get("api") == torchapi.MHA else "nhead"
    defaults = torchapi.CONSTRUCTOR_DEFAULTS.get(arguments.get("api"), {})
    h = heads if heads is not None else arguments.get(heads_key, defaults.get(heads_key))
    if not _positive_int(h):
        default = 8
        rebuilt.assume(f"{heads_key}={default}" if h is None else f"{heads_key}={default} in place of {h!r}")
        h = default
    elif h > MAX_HEADS:  # fewer heads of the same parity: odd versus even is what the fast path looks at
        scaled = MAX_HEADS - (MAX_HEADS - h) % 2
        notes.append(f"scaled {heads_key} from {h} to {scaled} (same parity)")
        h = scaled
    embed = arguments.get(embed_key, defaults.get(embed_key))
    if not _positive_int(embed):
        embed = h * HEAD_DIM
        rebuilt.assume(f"{embed_key}={embed}")
    elif embed > MAX_EMBED or embed % h:
        scaled = h * HEAD_DIM
        notes.append(f"scaled {embed_key} from {embed} to {scaled} ({HEAD_DIM} per head)")
        embed = scaled
    return embed, h, notes


def build(torch, arguments: dict, batch_first: bool, rebuilt: Rebuilt, heads: int | None = None):
    """(module in eval mode, E, h, notes) for the site's API, with dropout 0 so runs are comparable; the sizes
    stood in for are assumed in `rebuilt`."""
    api = arguments["api"]
    embed, h, notes = dims(arguments, rebuilt, heads)
    nn = torch.nn
    if api == torchapi.MHA:
        module = nn.MultiheadAttention(embed, h, dropout=0.0, bias=bool(arguments.get("bias", True)),
                                       add_bias_kv=bool(arguments.get("add_bias_kv", False)),
                                       add_zero_attn=bool(arguments.get("add_zero_attn", False)),
                                       batch_first=batch_first)
    elif api in (torchapi.ENCODER_LAYER, torchapi.ENCODER):
        module = nn.TransformerEncoderLayer(embed, h, 2 * embed, 0.0, batch_first=batch_first)
        if api == torchapi.ENCODER:
            module = nn.TransformerEncoder(module, 2, enable_nested_tensor=False)
    elif api in (torchapi.DECODER_LAYER, torchapi.DECODER):
        module = nn.TransformerDecoderLayer(embed, h, 2 * embed, 0.0, batch_first=batch_first)
        if api == torchapi.DECODER:
            module = nn.TransformerDecoder(module, 2)
    elif api == torchapi.TRANSFORMER:
        module = nn.Transformer(embed, h, 1, 1, 2 * embed, 0.0, batch_first=batch_first)
    else:
        raise ValueError(f"no way to rebuild {api}")
    return module.eval(), embed, h, notes


def run(module, api: str, x, **kwargs):
    """The module's output for input `x` (also the memory of decoders), whatever its forward signature."""
    if api == torchapi.MHA:
        return module(x, x, x, **kwargs)[0]
    if api in (torchapi.DECODER_LAYER, torchapi.DECODER, torchapi.TRANSFORMER):
        return module(x, x, **kwargs)
    return module(x, **kwargs)


def max_diff(a, b) -> float:
    return float((a - b).abs().max())


def sizes(embed: int, heads: int, notes: list[str]) -> str:
    extra = f"; {', '.join(notes)}" if notes else ""
    return f"N={N}, L={L}, E={embed}, h={heads}{extra}"


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
