"""Timing for MHA004 and MHA007 (NOISY: ratios from one run on one machine; not checked by the tests).

How much slower is the slow path that odd head counts take, and what does need_weights=True cost? One intra-op
thread (torch.set_num_threads(1): with more threads on a shared machine, tiny forwards are dominated by threads
waiting on each other), configurations interleaved in a shuffled round-robin, median thread CPU time per forward.
E=448 (= 7 x 64 = 8 x 56, so 7 and 8 heads fit the same size); N=2, L=1024 (attention dominates), and N=8, L=128
(the projections dominate). docs/torch-facts.md#odd-heads-fast-path and docs/torch-facts.md#need-weights.

Usage: python docs/experiments/timing_heads_and_weights.py [ROUNDS]   (default 12; about 40 s on 2 cores)
"""

import os
import platform
import random
import statistics
import sys
import time

from _helpers import fact

import torch
from torch import nn

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.set_num_threads(1)
torch.manual_seed(0)
random.seed(0)
E = 448


def configurations(n: int, length: int) -> dict:
    x = torch.randn(n, length, E)
    modules = {heads: nn.MultiheadAttention(E, heads, batch_first=True) for heads in (7, 8)}

    def forward(heads: int, need_weights: bool, training: bool = False):
        module = modules[heads]

        def run():
            module.train(training)
            if training:  # a training-mode forward with autograd on (no backward)
                module(x, x, x, need_weights=need_weights)
            else:
                with torch.no_grad():
                    module(x, x, x, need_weights=need_weights)
        return run

    return {
        "A h7 eval need_weights=True (slow path: bmm + softmax)": forward(7, True),
        "B h8 eval need_weights=True (fast path)": forward(8, True),
        "C h7 eval need_weights=False (slow path: SDPA)": forward(7, False),
        "D h8 eval need_weights=False (fast path)": forward(8, False),
        "G h8 train need_weights=True": forward(8, True, training=True),
        "H h8 train need_weights=False": forward(8, False, training=True),
    }


def measure(n: int, length: int, rounds: int) -> dict:
    configs = configurations(n, length)
    for run in configs.values():  # warm up
        run()
        run()
    times = {name: [] for name in configs}
    order = list(configs)
    for _ in range(rounds):
        random.shuffle(order)
        for name in order:
            start = time.thread_time()
            configs[name]()
            times[name].append(time.thread_time() - start)
    medians = {name[0]: statistics.median(values) * 1e3 for name, values in times.items()}
    for name, values in times.items():
        print(f"  N={n} L={length} {name}: median {statistics.median(values) * 1e3:.1f} ms CPU")
    return medians


cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
           platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
print(f"machine: {cpu}, {os.cpu_count()} CPUs, torch {torch.__version__}, threads {torch.get_num_threads()}, "
      f"load average before: {os.getloadavg()[0]:.1f}")
for n, length, rounds in ((2, 1024, ROUNDS), (8, 128, 2 * ROUNDS)):
    m = measure(n, length, rounds)
    tag = f"L{length}"
    fact("odd-heads-fast-path", f"timing-{tag}-h7-over-h8-need_weights-True", m["A"] / m["B"])
    fact("odd-heads-fast-path", f"timing-{tag}-h7-over-h8-need_weights-False", m["C"] / m["D"])
    fact("need-weights", f"timing-{tag}-eval-h7-slow-path-True-over-False", m["A"] / m["C"])
    fact("need-weights", f"timing-{tag}-eval-h8-fast-path-True-over-False", m["B"] / m["D"])
    fact("need-weights", f"timing-{tag}-train-h8-True-over-False", m["G"] / m["H"])
print(f"load average after: {os.getloadavg()[0]:.1f}")
