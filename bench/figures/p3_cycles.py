"""P3: K cycles of: capture a graph whose capture allocates a *persistent* pinned input (kept by
the caller) and a pinned *staging temporary* freed inside the capture (what
`torch.tensor(...).to("npu", non_blocking=True)` does), each copied H2D; allocate two eager
pinned buffers of the same size and fill them with 0xEE (they would take a wrongly recycled
block); replay; check the device bytes; reset the graph and drop the tensors. Then gc +
synchronize + host_empty_cache() and the simulator's live pinned bytes and
host_memory_stats()["allocated_bytes.current"], every `every` cycles for the plot.
Shared-pool column: one graph_pool_handle() for every graph and one graph kept alive (its
pinned input kept by the caller), then K cycles of a graph captured into that pool with a
pinned staging temporary, replayed beside the kept graph, checked, and dropped (reset() on
even cycles, garbage collection on odd ones): held bytes after cycle K minus after cycle 1.
"""

from __future__ import annotations

from harness import simrt, stats

NAME = "P3"
TITLE = "pinned bytes held after K capture / replay / reset cycles"
TARGET = "0 growth (separate and shared pool), 0 wrong bytes"
VARIANTS = ("native", "plugin")
SETTINGS = {"cycles": 100, "every": 10, "bytes": 64 * 1024}
QUICK = {"cycles": 10, "every": 5}


def wrong(dev, value) -> int:
    """Bytes of a device uint8 tensor that differ from value (numpy: torch's CPU != is slow)."""
    import numpy as np

    return int(np.count_nonzero(dev.cpu().numpy() != value))


def cycle(torch, n: int, k: int, d_keep, d_tmp) -> int:
    v_keep, v_tmp = (2 * k) % 251 + 1, (2 * k + 1) % 251 + 1
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        h_keep = torch.empty(n, dtype=torch.uint8, pin_memory=True)  # kept by the caller
        h_keep.fill_(v_keep)
        d_keep.copy_(h_keep, non_blocking=True)
        h_tmp = torch.full((n,), v_tmp, dtype=torch.uint8).pin_memory()  # freed in capture
        d_tmp.copy_(h_tmp, non_blocking=True)
        del h_tmp
    clob = [torch.full((n,), 0xEE, dtype=torch.uint8).pin_memory() for _ in range(2)]
    g.replay()
    torch.npu.synchronize()
    bad = wrong(d_keep, v_keep) + wrong(d_tmp, v_tmp)
    del clob
    g.reset()
    del g, h_keep
    return bad


def separate(ctx, torch) -> dict:
    n, K = ctx.cfg["bytes"], ctx.cfg["cycles"]
    d_keep = torch.empty(n, dtype=torch.uint8, device="npu")
    d_tmp = torch.empty(n, dtype=torch.uint8, device="npu")
    base = simrt.held_bytes(ctx.sim)
    traj, bad = [{"k": 0, **base}], 0
    for k in range(1, K + 1):
        bad += cycle(torch, n, k, d_keep, d_tmp)
        if k % ctx.cfg["every"] == 0 or k == K:
            traj.append({"k": k, **simrt.held_bytes(ctx.sim)})
    return {"growth": simrt.growth(base, traj[-1], "sim_live"),
            "growth stats": simrt.growth(base, traj[-1], "stats_allocated_bytes"),
            "growth 2nd empty": simrt.growth(base, traj[-1], "sim_live_2nd_empty"),
            "wrong bytes": bad, "trajectory": traj}


def shared(ctx, torch) -> dict:
    n, K = ctx.cfg["bytes"], ctx.cfg["cycles"]
    pool = torch.npu.graph_pool_handle()
    d_kept = torch.empty(n, dtype=torch.uint8, device="npu")
    d_tmp = torch.empty(n, dtype=torch.uint8, device="npu")
    kept = torch.npu.NPUGraph()
    with torch.npu.graph(kept, pool=pool):
        h_kept = torch.full((n,), 7, dtype=torch.uint8).pin_memory()
        d_kept.copy_(h_kept, non_blocking=True)
    after, bad = {}, 0
    for k in range(1, K + 1):
        v = k % 251 + 1
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, pool=pool):
            h_tmp = torch.full((n,), v, dtype=torch.uint8).pin_memory()
            d_tmp.copy_(h_tmp, non_blocking=True)
            del h_tmp
        clob = [torch.full((n,), 0xEE, dtype=torch.uint8).pin_memory() for _ in range(2)]
        g.replay()
        kept.replay()
        torch.npu.synchronize()
        bad += wrong(d_tmp, v) + wrong(d_kept, 7)
        del clob
        if k % 2 == 0:
            g.reset()
        del g
        if k in (1, K):
            after[k] = simrt.held_bytes(ctx.sim)
    kept.reset()
    del kept, h_kept
    return {"shared growth": simrt.growth(after[1], after[K], "sim_live"),
            "shared growth stats": simrt.growth(after[1], after[K], "stats_allocated_bytes"),
            "shared wrong bytes": bad}


def measure(ctx) -> dict:
    import torch

    sep = separate(ctx, torch)
    traj = sep.pop("trajectory")
    return {"values": {**sep, **shared(ctx, torch)}, "trajectory": traj}


def summarize(runs: stats.Runs) -> list[dict]:
    zero = {"check": lambda x: x == 0, "target": "plugin 0"}
    return [
        stats.value_row(runs, "growth", "separate graphs: growth after K cycles (simulator)",
                        "B", readme=True, **zero),
        stats.value_row(runs, "growth stats", "separate: growth, host_memory_stats", "B", **zero),
        stats.value_row(runs, "growth 2nd empty", "separate: after a 2nd host_empty_cache", "B"),
        stats.value_row(runs, "wrong bytes", "separate: wrong bytes on replay", "B", readme=True,
                        **zero),
        stats.value_row(runs, "shared growth", "shared pool: growth cycle 1 -> K (simulator)",
                        "B", readme=True, **zero),
        stats.value_row(runs, "shared growth stats", "shared pool: growth, host_memory_stats",
                        "B", **zero),
        stats.value_row(runs, "shared wrong bytes", "shared pool: wrong bytes", "B", readme=True,
                        **zero),
    ]


def plot(ax, rows: list[dict], runs: stats.Runs) -> None:
    for variant, color in (("native", "tab:red"), ("plugin", "tab:blue")):
        fig = next((t[variant] for t in runs.trials if t.get(variant)), None)
        if not fig or not fig.get("trajectory"):
            continue
        tr = fig["trajectory"]
        k = "sim_live" if tr[0]["sim_live"] is not None else "stats_allocated_bytes"
        ax.plot([e["k"] for e in tr], [((e[k] or 0) - (tr[0][k] or 0)) / 1024 for e in tr],
                marker="o", ms=3, color=color, label=f"{variant} ({k})")
    ax.axhline(0, color="k", lw=1, ls="--")
    ax.set_xlabel("K capture + replay + reset cycles (then host_empty_cache)", fontsize=8)
    ax.set_ylabel("pinned bytes held over baseline (KiB)", fontsize=8)
    ax.legend(fontsize=7)
