"""P4: the per-graph footprint of captured pinned buffers: N graphs captured one after another,
either all into one pool (graph_pool_handle()) or each into its own; `bytes` per graph; held
bytes over the baseline after the first graph, after all N, and after resetting them (after gc,
synchronize and host_empty_cache). Three workloads: scratch (a pinned temporary allocated,
CPU-written and freed inside the capture, touched by no captured operation; the graph copies
device to device), bounce (a pinned buffer the graph writes by D2H then reads by H2D), staged
(CPU-written at capture time, read by every replay). Replays all N in order and counts wrong
bytes. A block a captured operation uses belongs to its graph for the graph's lifetime (csrc
Note [Graph ownership of blocks]): bounce and staged cost one graph's worth per graph by design.
"""

from __future__ import annotations

from harness import simrt, stats

from .p3_cycles import wrong

NAME = "P4"
TITLE = "footprint of N graphs: one shared pool vs N pools"
TARGET = "scratch: shared = one graph; bounce / staged: <= N x one graph; 0 after reset"
VARIANTS = ("native", "plugin")
SETTINGS = {"graphs": 8, "bytes": 1024 * 1024}
QUICK = {"graphs": 4}
WORKLOADS = ("scratch", "bounce", "staged")


def capture(torch, workload: str, i: int, n: int, d_in, d_out) -> None:
    if workload == "bounce":
        h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        h.copy_(d_in, non_blocking=True)
        d_out.copy_(h, non_blocking=True)
    elif workload == "staged":
        h = torch.full((n,), i + 1, dtype=torch.uint8).pin_memory()
        d_out.copy_(h, non_blocking=True)
    else:  # scratch: CPU-side work during capture; the graph copies device to device
        h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        h.fill_(i + 1)
        d_out.copy_(d_in, non_blocking=True)
    del h


def one(ctx, torch, shared: bool, workload: str) -> dict:
    N, n = ctx.cfg["graphs"], ctx.cfg["bytes"]
    d_in = [torch.empty(n, dtype=torch.uint8, device="npu") for _ in range(N)]
    d_out = [torch.empty(n, dtype=torch.uint8, device="npu") for _ in range(N)]
    base = simrt.held_bytes(ctx.sim)["sim_live"]
    pool = torch.npu.graph_pool_handle() if shared else None
    graphs, first = [], None
    for i in range(N):
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, pool=pool):
            capture(torch, workload, i, n, d_in[i], d_out[i])
        graphs.append(g)
        first = first if i else simrt.held_bytes(ctx.sim)["sim_live"]
    held = simrt.held_bytes(ctx.sim)["sim_live"]
    for i in range(N):
        d_in[i].copy_(torch.full((n,), i + 1, dtype=torch.uint8))
    for g in graphs:
        g.replay()
    torch.npu.synchronize()
    bad = sum(wrong(d_out[i], i + 1) for i in range(N))
    for g in graphs:
        g.reset()
    del graphs, g
    end = simrt.held_bytes(ctx.sim)["sim_live"]
    one_graph = None if first is None or base is None else first - base
    return {"one graph": one_graph, "all graphs": None if held is None else held - base,
            "after reset": None if end is None else end - base, "wrong bytes": bad,
            "graphs held": None if not one_graph else (held - base) / one_graph}


def measure(ctx) -> dict:
    import torch

    values = {"graphs": ctx.cfg["graphs"]}
    for workload in WORKLOADS:
        for shared in (True, False):
            r = one(ctx, torch, shared, workload)
            pool = "shared pool" if shared else "N pools"
            values.update({f"{workload}, {pool}: {k}": v for k, v in r.items()})
    return {"values": values}


def summarize(runs: stats.Runs) -> list[dict]:
    N = runs.first("values", "graphs", "plugin") or 0
    rows = []
    for workload in WORKLOADS:
        limit = 1 if workload == "scratch" else N
        for pool in ("shared pool", "N pools"):
            k = f"{workload}, {pool}: "
            rows.append(stats.value_row(runs, k + "one graph", k + "one graph", "B"))
            held = {}
            if pool == "shared pool":
                held = {"check": lambda x, lim=limit: x <= lim, "target": f"plugin <= {limit}"}
            rows.append(stats.value_row(runs, k + "graphs held", k + f"all {N} graphs, in "
                                        "graphs' worth", "x", readme=pool == "shared pool",
                                        **held))
            rows.append(stats.value_row(runs, k + "after reset", k + "after reset", "B",
                                        check=lambda x: x == 0, target="plugin 0"))
            rows.append(stats.value_row(runs, k + "wrong bytes", k + "wrong bytes", "B",
                                        check=lambda x: x == 0, target="plugin 0"))
    return rows
