"""P12: peak pinned bytes, live and idle (the simulator's pinned bytes handed out and not given
back), over eager request sequences: sizes that grow or alternate inside one power-of-two class,
three large sizes in turn, and a random workload of 4 KiB - 100 MiB requests (log-uniform, fixed
seed) with up to three tensors alive at once. Each request pins
`torch.empty(n, dtype=uint8, pin_memory=True)`, fills it, copies it to the device
(`non_blocking`), drops the oldest kept tensor and synchronizes the stream; each sequence starts
after `host_empty_cache()`. The plugin must never hold more than native (csrc Note [Large
blocks]).
"""

from __future__ import annotations

import gc
import math
import random

from harness import simrt, stats

NAME = "P12"
TITLE = "peak pinned bytes (live + idle) over eager request sequences"
TARGET = "plugin <= native on every sequence"
VARIANTS = ("native", "plugin")
KiB, MiB = 1024, 1024 * 1024
SETTINGS = {"random_requests": 200, "seed": 12, "reps": 1}
QUICK = {"random_requests": 40}


def random_sizes(count: int, seed: int) -> list[tuple[int, int]]:
    """(size, tensors kept alive) per request: log-uniform sizes 4 KiB - 100 MiB."""
    rng = random.Random(seed)
    lo, hi = math.log(4 * KiB), math.log(100 * MiB)
    return [(int(math.exp(rng.uniform(lo, hi))), rng.randint(0, 3)) for _ in range(count)]


def sequences(cfg: dict) -> dict[str, list[tuple[int, int]]]:
    return {
        "growing 33 .. 63 MiB": [((33 + i) * MiB, 0) for i in range(31)],
        "32 MiB - 1 / 32 MiB / + 1 / 33 MiB x 8": [
            (n, 0) for n in [32 * MiB - 1, 32 * MiB, 32 * MiB + 1, 33 * MiB] * 8
        ],
        "40 / 64 / 100 MiB in turn x 8": [(n, 0) for n in [40 * MiB, 64 * MiB, 100 * MiB] * 8],
        "random 4 KiB - 100 MiB": random_sizes(cfg["random_requests"], cfg["seed"]),
    }


def peak(torch, sim, requests: list[tuple[int, int]], dev) -> int | None:
    """The most pinned bytes above the start at any point of the sequence."""
    stream = torch.npu.current_stream()
    gc.collect()
    stream.synchronize()
    simrt.host_empty_cache()
    base = sim.host_bytes_live()
    if base is None:
        return None
    most, kept = 0, []
    for i, (n, keep) in enumerate(requests):
        t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        t.fill_(i % 250 + 1)
        dev[:n].copy_(t, non_blocking=True)
        kept.append(t)
        del t
        kept = kept[len(kept) - keep :] if keep else []
        stream.synchronize()
        most = max(most, sim.host_bytes_live() - base)
    kept.clear()
    return most


def measure(ctx) -> dict:
    import torch

    seqs = sequences(ctx.cfg)
    dev = torch.empty(max(n for s in seqs.values() for n, _ in s), dtype=torch.uint8, device="npu")
    return {"values": {k: peak(torch, ctx.sim, s, dev) for k, s in seqs.items()}}


def summarize(runs: stats.Runs) -> list[dict]:
    return [
        stats.at_most_native_row(runs, k, f"{k}: peak pinned MiB", "B", readme=True)
        for k in sequences({**SETTINGS, "random_requests": 1})
    ]
