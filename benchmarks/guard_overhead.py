"""Overhead of the runtime guard (`mhalint.guard`) on an nn.MultiheadAttention forward.

N=2, E=256, 8 heads, batch_first=True, L=128 and L=1024, in eval + no_grad (the fused fast path) and in training
mode (the slow path, grad enabled, forward only), each with a bool key_padding_mask (sample 1 padded at the end)
plus a bool causal attn_mask, and with no mask (`--per-head` adds a 3-D (N*heads, L, S) causal mask). One
intra-op thread (`torch.set_num_threads(1)`), as in the timings of docs/torch-facts.md; guard on and off alternate
within every round (the order flips each round), and each figure is the median over rounds of the mean thread CPU
time of one forward (wall-clock medians are printed too).
Target (issue 9): guard on / off <= 1.10 at L=1024.

Usage: python benchmarks/guard_overhead.py [--rounds 15] [--lengths 128 1024] [--per-head]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore", message=".*NumPy.*")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import mhalint  # noqa: E402


def forward_timer(mha, x, masks: dict, train: bool):
    mha.train(train)

    def run(iterations: int) -> tuple[float, float]:
        context = torch.enable_grad() if train else torch.no_grad()
        with context:
            cpu, wall = time.thread_time(), time.perf_counter()
            for _ in range(iterations):
                mha(x, x, x, need_weights=False, **masks)
            return (time.thread_time() - cpu) / iterations, (time.perf_counter() - wall) / iterations

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 1024])
    parser.add_argument("--per-head", action="store_true",
                        help="also time a 3-D (N*heads, L, S) attn_mask, whose checks read all N*heads*L*S entries")
    options = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    n, embed, heads = 2, 256, 8
    mha = nn.MultiheadAttention(embed, heads, dropout=0.0, batch_first=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, N={n}, E={embed}, heads={heads}, "
          f"need_weights=False, {options.rounds} rounds")
    print(f"{'L':>5} {'mode':<14} {'masks':<12} {'off ms':>9} {'on ms':>9} {'on/off':>7}   "
          f"{'wall off':>9} {'wall on':>9} {'wall':>6}")
    worst = {}
    for length in options.lengths:
        x = torch.randn(n, length, embed)
        padding = torch.zeros(n, length, dtype=torch.bool)
        padding[1, length - length // 4:] = True
        causal = torch.ones(length, length, dtype=torch.bool).triu(1)
        iterations = max(2, 6000 // length)
        for mode, train in (("eval+no_grad", False), ("train", True)):
            variants = [("kpm+causal", {"key_padding_mask": padding, "attn_mask": causal}), ("none", {})]
            if options.per_head:
                variants.append(("kpm+3-D", {"key_padding_mask": padding,
                                             "attn_mask": causal.repeat(n * heads, 1, 1)}))
            for label, masks in variants:
                run = forward_timer(mha, x, masks, train)
                run(2)  # warm up
                with mhalint.guard():
                    run(2)
                times = {"off": [], "on": []}
                for round_index in range(options.rounds):
                    order = ("off", "on") if round_index % 2 == 0 else ("on", "off")
                    for state in order:
                        if state == "on":
                            with warnings.catch_warnings():
                                warnings.simplefilter("error")  # a report here would be a false alarm
                                with mhalint.guard():
                                    times["on"].append(run(iterations))
                        else:
                            times["off"].append(run(iterations))
                cpu = {state: statistics.median(t[0] for t in values) * 1e3 for state, values in times.items()}
                wall = {state: statistics.median(t[1] for t in values) * 1e3 for state, values in times.items()}
                ratio = cpu["on"] / cpu["off"]
                worst[length] = max(worst.get(length, 0.0), ratio)
                print(f"{length:>5} {mode:<14} {label:<12} {cpu['off']:9.3f} {cpu['on']:9.3f} {ratio:7.3f}   "
                      f"{wall['off']:9.3f} {wall['on']:9.3f} {wall['on'] / wall['off']:6.3f}", flush=True)
    for length, ratio in worst.items():
        print(f"L={length}: worst guard on/off {ratio:.3f}x" + ("  (target <= 1.10)" if length == 1024 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
