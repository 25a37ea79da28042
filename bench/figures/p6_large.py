"""P6: one large `torch.empty(n, dtype=uint8, pin_memory=True)` per size, n = the 1.5 / 3 / 5.1 /
20.4 GiB requests scaled by 1/64 (24 / 48 / 81.6 / 326.4 MiB: a power-of-two scale keeps the
rounding's shape), after gc + synchronize + host_empty_cache: bytes pinned = the simulator's
live pinned bytes over the baseline / n; the time to pin (the allocate call) and to free (del +
host_empty_cache). Exact sizing needs c10's pinned_max_round_threshold_mb (torch >= 2.13); on
older torch, ATen rounds every request to a power of two before the allocator sees it.
"""

from __future__ import annotations

import gc
import os
import time

from harness import simrt, stats

NAME = "P6"
TITLE = "large pinned buffers: bytes pinned / bytes requested"
TARGET = "plugin <= 1.02 at or above TORCH_NPU_PINPOOL_LARGE_BLOCK_MB (torch >= 2.13)"
VARIANTS = ("native", "plugin")
GiB, MiB = 1024**3, 1024 * 1024
SETTINGS = {"scale": 64, "gib": [1.5, 3.0, 5.1, 20.4], "reps": 1}
QUICK = {"gib": [1.5, 5.1]}


def one(torch, sim, n: int) -> dict:
    gc.collect()
    torch.npu.synchronize()
    simrt.host_empty_cache()
    base = sim.host_bytes_live()
    t0 = time.perf_counter()
    t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    pin = time.perf_counter() - t0
    live = sim.host_bytes_live()
    t0 = time.perf_counter()
    del t
    simrt.host_empty_cache()
    free = time.perf_counter() - t0
    return {"ratio": None if base is None else (live - base) / n, "pin": pin * 1e3,
            "free": free * 1e3}


def measure(ctx) -> dict:
    import torch

    values, samples = {}, {}
    for gib in ctx.cfg["gib"]:
        n = int(gib * GiB / ctx.cfg["scale"])
        r = one(torch, ctx.sim, n)
        k = f"{gib:g} GiB / {ctx.cfg['scale']}"
        values[k + " ratio"], values[k + " bytes"] = r["ratio"], n
        samples[k + " pin"], samples[k + " free"] = [r["pin"]], [r["free"]]
    major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    values["exact sizing possible"] = (major, minor) >= (2, 13)
    values["threshold"] = int(os.environ.get("TORCH_NPU_PINPOOL_LARGE_BLOCK_MB", "32")) * MiB
    return {"values": values, "samples": samples}


def summarize(runs: stats.Runs) -> list[dict]:
    exact = runs.first("values", "exact sizing possible", "plugin")
    threshold = runs.first("values", "threshold", "plugin") or 0
    keys = []
    for t in runs.trials:
        for f in t.values():
            keys += [k[:-6] for k in (f or {}).get("values", {}) if k.endswith(" ratio")
                     and k[:-6] not in keys]
    rows = []
    for k in keys:
        n = runs.first("values", k + " bytes", "plugin") or 0
        check = {}
        if n >= threshold:
            check = ({"check": lambda x: x <= 1.02, "target": "plugin <= 1.02"} if exact else
                     {"target": "n/a: torch < 2.13 rounds first"})
        rows.append(stats.value_row(runs, k + " ratio", f"{k} = {n / MiB:.1f} MiB: pinned / "
                                    "requested", "x", readme=True, **check))
        rows.append(stats.timed_row(runs, k + " pin", f"{k}: time to pin", "ms"))
        rows.append(stats.timed_row(runs, k + " free", f"{k}: time to free (host_empty_cache)",
                                    "ms"))
    return rows
