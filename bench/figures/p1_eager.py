"""P1: eager, cached pinned allocation: `t = src.pin_memory(); del t` and
`t = torch.empty(n, dtype=uint8, pin_memory=True); del t`, n = 4 KiB, 64 KiB, 1 MiB, 16 MiB, by
1 thread and by 2 threads at once (each its own source). ns per round trip; with 2 threads,
wall = elapsed / iterations per thread, cpu = total CPU / total iterations. pin_memory
includes the memcpy of n bytes (the same in both modes). Verdicts on CPU time.

Every variant runs with one intra-op thread (timing.one_intra_op_thread), so the memcpy of
1 MiB and 16 MiB runs on the timed thread: with the pool, the thread's CPU time held its share of
the copy plus its spin at OpenMP's barrier, which moved from process to process by more than the
allocator's whole round trip.

The round trip's speed differs between processes with either allocator by more than the
allocator's share of it, so P1 runs in `trials` processes per variant, as P5 does: the extra
ones run P1 and P5 alone.
"""

from __future__ import annotations

import threading

from harness import stats, timing

NAME = "P1"
TITLE = "eager cached alloc + free round trip"
TARGET = "plugin/native CPU time <= 1.00"
VARIANTS = ("native", "plugin")
KiB, MiB = 1024, 1024 * 1024
SETTINGS = {"sizes": [4 * KiB, 64 * KiB, MiB, 16 * MiB], "threads": [1, 2], "trials": 24}
QUICK = {"sizes": [4 * KiB, MiB], "trials": 0}
OPS = ("pin_memory", "empty_pinned")


def body(torch, op: str, size: int, threads: int) -> timing.Body:
    """body(n): n pinned alloc + free round trips; each thread pins its own pageable source."""
    srcs = [torch.empty(size, dtype=torch.uint8) for _ in range(threads)]
    tls, lock, idx = threading.local(), threading.Lock(), iter(range(10**9))

    def src():
        if getattr(tls, "src", None) is None:
            with lock:
                tls.src = srcs[next(idx) % threads]
        return tls.src

    def pin(n: int) -> None:
        s = src()
        for _ in range(n):
            t = s.pin_memory()
            del t

    def empty(n: int) -> None:
        for _ in range(n):
            t = torch.empty(size, dtype=torch.uint8, pin_memory=True)
            del t

    return pin if op == "pin_memory" else empty


def key(op: str, size: int, threads: int) -> str:
    return f"{op} {size // KiB} KiB {threads}T"


def measure(ctx) -> dict:
    import torch

    with timing.one_intra_op_thread(torch):
        return _measure(ctx, torch)


def _measure(ctx, torch) -> dict:
    samples = {}
    for op in OPS:
        for size in ctx.cfg["sizes"]:
            for threads in ctx.cfg["threads"]:
                b = body(torch, op, size, threads)
                b(20)  # warm the cache (the first call allocates the block)
                n = timing.calibrate(b, ctx.cfg["rep_seconds"] / threads)
                wall, cpu = timing.samples(b, n, ctx.cfg["reps"], threads)
                samples[key(op, size, threads) + " cpu"] = cpu
                samples[key(op, size, threads) + " wall"] = wall
    return {"samples": samples}


def summarize(runs: stats.Runs) -> list[dict]:
    keys = sorted({k.rsplit(" ", 1)[0] for t in runs.trials for f in t.values() if f
                   for k in f["samples"]})
    rows = []
    for k in keys:
        rows.append(stats.timed_row(runs, k + " cpu", k + ", CPU", "ns", limit=1.0))
        rows.append(stats.timed_row(runs, k + " wall", k + ", wall", "ns"))
    cpu = [r for r in rows if r["label"].endswith("CPU") and r["ratio"] is not None]
    if cpu:
        lo, hi = min(r["ratio"] for r in cpu), max(r["ratio"] for r in cpu)
        n_meet = sum(r["verdict"] == stats.MEETS for r in cpu)
        rows.insert(0, stats.row(f"{len(cpu)} configurations, CPU: ratio {lo:.2f} - {hi:.2f}, "
                                 f"{n_meet} meet", "ns", {}, readme=True))
    return rows
