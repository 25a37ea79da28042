"""P2: the `empty(pin_memory=True)` round trip inside `with torch.npu.graph(g)` (after one
captured H2D copy), against the same loop eager in the same process: capture / eager CPU time
per process. Also the simulator's pinned bytes that appear during the capture loop.
"""

from __future__ import annotations

import statistics

from harness import simrt, stats, timing

from .p1_eager import body

NAME = "P2"
TITLE = "pinned alloc + free on a capturing stream vs eager"
TARGET = "plugin capture/eager <= 2"
VARIANTS = ("native", "plugin")
KiB, MiB = 1024, 1024 * 1024
SETTINGS = {"sizes": [4 * KiB, 64 * KiB, MiB], "max_bytes": 256 * MiB}
QUICK = {"sizes": [64 * KiB]}


def one_size(torch, ctx, size: int) -> dict:
    b = body(torch, "empty_pinned", size, 1)
    b(20)
    n = timing.calibrate(b, ctx.cfg["rep_seconds"])
    n = max(10, min(n, ctx.cfg["max_bytes"] // size))
    _, eager = timing.samples(b, n, ctx.cfg["reps"])
    g = torch.npu.NPUGraph()
    h0 = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    d0 = torch.empty(size, dtype=torch.uint8, device="npu")
    with torch.npu.graph(g):
        # (entering torch.npu.graph empties the host cache on >= 2.11: measure inside)
        before = ctx.sim.host_bytes_live()
        d0.copy_(h0, non_blocking=True)  # a captured task, so the model is not empty
        b(10)
        _, capture = timing.samples(b, n, ctx.cfg["reps"])
        during = ctx.sim.host_bytes_live()
    g.replay()
    torch.npu.synchronize()
    g.reset()
    del g, h0, d0
    simrt.held_bytes(ctx.sim)
    grow = None if before is None or during is None else during - before
    return {"eager": eager, "capture": capture, "grow": grow}


def measure(ctx) -> dict:
    import torch

    samples, values = {}, {}
    for size in ctx.cfg["sizes"]:
        r = one_size(torch, ctx, size)
        k = f"{size // KiB} KiB"
        samples[f"eager {k}"], samples[f"capture {k}"] = r["eager"], r["capture"]
        values[f"ratio {k}"] = statistics.median(r["capture"]) / statistics.median(r["eager"])
        values[f"growth {k}"] = r["grow"]
    return {"samples": samples, "values": values}


def summarize(runs: stats.Runs) -> list[dict]:
    sizes = sorted({k.split(" ", 1)[1] for t in runs.trials for f in t.values() if f
                    for k in f["values"] if k.startswith("ratio")}, key=lambda s: int(s.split()[0]))
    rows = []
    for s in sizes:
        r = stats.timed_row(runs, f"ratio {s}", f"{s}: capture / eager CPU, per process", "x",
                            kind="values", readme=True)
        p = r["cells"].get("plugin")
        r["target"], r["ratio"], r["paired"] = "plugin <= 2", None, None
        r["verdict"] = None if not p else (stats.MEETS if p["median"] <= 2.0 else stats.MISS)
        rows.append(r)
        rows.append(stats.timed_row(runs, f"eager {s}", f"{s}: eager, CPU", "ns"))
        rows.append(stats.timed_row(runs, f"capture {s}", f"{s}: in capture, CPU", "ns"))
        rows.append(stats.value_row(runs, f"growth {s}", f"{s}: pinned bytes that appear in "
                                    "the capture loop", "B"))
    return rows
