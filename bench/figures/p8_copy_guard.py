"""P8: the pageable-copy guard (csrc/copy/pageable_copy_guard.cpp) on eager copies: us per `copy_`
call of 1 KiB (256 float32), pinned H2D and D2H non_blocking and D2D, on a side stream: native,
the plugin without the guard (TORCH_NPU_PINPOOL_COPY_GUARD=0) and the plugin with it. Each
repetition times `iters` calls after 100 untimed ones and ends with a synchronize. A replay
does not go through copy_ (it is one aclmdlRIExecuteAsync), so the guard costs replays nothing.
"""

from __future__ import annotations

import time

from harness import stats

NAME = "P8"
TITLE = "pageable-copy guard on eager copies, us per copy_"
TARGET = "guard adds nothing measurable: plugin/noguard <= 1.00 within the spread"
VARIANTS = ("native", "plugin", "noguard")
SETTINGS = {"iters": 300, "elems": 256, "reps": 20}
QUICK = {"iters": 100, "reps": 5}
COPIES = ("H2D non_blocking", "D2H non_blocking", "D2D")


def time_us(torch, fn, iters: int, reps: int) -> list[float]:
    for _ in range(100):
        fn()
    torch.npu.synchronize()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.npu.synchronize()
        out.append((time.perf_counter() - t0) / iters * 1e6)
    return out


def measure(ctx) -> dict:
    import torch

    n = ctx.cfg["elems"]
    with torch.npu.stream(torch.npu.Stream()):
        dev, dev2 = torch.zeros(n, device="npu"), torch.zeros(n, device="npu")
        src, dst = torch.ones(n).pin_memory(), torch.zeros(n).pin_memory()
        fns = {"H2D non_blocking": lambda: dev.copy_(src, non_blocking=True),
               "D2H non_blocking": lambda: dst.copy_(dev, non_blocking=True),
               "D2D": lambda: dev.copy_(dev2)}
        samples = {c: time_us(torch, fns[c], ctx.cfg["iters"], ctx.cfg["reps"]) for c in COPIES}
    torch.npu.synchronize()
    return {"samples": samples}


def summarize(runs: stats.Runs) -> list[dict]:
    rows = []
    for c in COPIES:
        rows.append(stats.timed_row(runs, c, f"{c}: guard cost (plugin/noguard)", "us", limit=1.0,
                                    vs=("plugin", "noguard"), readme=True))
        rows.append(stats.timed_row(runs, c, f"{c}: plugin vs native", "us"))
    return rows
