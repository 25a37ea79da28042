"""P9: many graphs in one pool (vLLM-style: batch sizes x LoRA x modes). For G graphs captured
into one graph_pool_handle(), each reading one shared persistent pinned buffer (pinned before
the captures, kept by the caller) and staging one pinned temporary (pinned and freed inside its
capture, copied into the graph's own device slot): the cost per graph of capturing all G
(capture_begin / capture_end on a side stream, as torch.npu.graph does without its gc.collect),
replaying each once (then one synchronize), resetting each, and one host_empty_cache()
afterwards; CPU time of the Python thread / G, and wall / G. Native >= 2.11 gives nothing back
there (it keeps every capture-time block), so the host_empty_cache() after G eager pinned blocks
of the same size were freed is measured too: the reference for giving G blocks back; and,
beside it, the del of G such eager tensors and the host_empty_cache() after it, timed together
(what giving back G pinned tensors costs when their free is timed too: a graph's host_empty_cache
with the plugin also runs torch_npu's free of each block, Note [Backing store]). Also the
pinned bytes held per graph after the captures (simulator, after gc + synchronize +
host_empty_cache), what is left after the final host_empty_cache, and the device bytes each
replay wrote (checked once per G).
"""

from __future__ import annotations

import gc

from harness import simrt, stats
from harness.timing import Clock

NAME = "P9"
TITLE = "many graphs in one pool: cost per graph"
TARGET = "plugin per-graph costs flat in G; plugin/native <= 2 at the largest G"
VARIANTS = ("native", "plugin")
SETTINGS = {"graphs": [10, 100, 1000, 5000], "shared_bytes": 64 * 1024, "temp_bytes": 4096,
            "reps": 3}
QUICK = {"graphs": [10, 100, 1000], "reps": 1}
OPS = ("capture", "replay", "reset", "host_empty_cache")
REFERENCE = "host_empty_cache of G eager blocks"
WITH_FREE = "del + host_empty_cache of G eager tensors"


def capture_all(torch, G: int, n: int, pool, h_shared, d_shared, d_slots) -> list:
    side = torch.npu.Stream()
    graphs = []
    torch.npu.synchronize()
    with torch.npu.stream(side):
        for i in range(G):
            g = torch.npu.NPUGraph()
            g.capture_begin(pool=pool)
            d_shared.copy_(h_shared, non_blocking=True)
            tmp = torch.full((n,), i % 251, dtype=torch.uint8).pin_memory()
            d_slots[i].copy_(tmp, non_blocking=True)
            del tmp
            g.capture_end()
            graphs.append(g)
    torch.npu.synchronize()
    return graphs


def wrong_slots(d_slots, G: int) -> int:
    import numpy as np

    got = d_slots.cpu().numpy()
    want = (np.arange(G) % 251).astype(np.uint8)[:, None]
    return int(np.count_nonzero(got != want))


def one_rep(ctx, torch, G: int, out: dict) -> None:
    n = ctx.cfg["temp_bytes"]
    base0 = simrt.held_bytes(ctx.sim)
    h_shared = torch.full((ctx.cfg["shared_bytes"],), 7, dtype=torch.uint8).pin_memory()
    d_shared = torch.empty_like(h_shared, device="npu")
    d_slots = torch.empty((G, n), dtype=torch.uint8, device="npu")
    base = simrt.held_bytes(ctx.sim)
    clocks = {}
    with Clock() as clocks["capture"]:
        graphs = capture_all(torch, G, n, torch.npu.graph_pool_handle(), h_shared, d_shared,
                             d_slots)
    held = simrt.held_bytes(ctx.sim)
    with Clock() as clocks["replay"]:
        for g in graphs:
            g.replay()
        torch.npu.synchronize()
    out["values"][f"wrong bytes G={G}"] = wrong_slots(d_slots, G)
    with Clock() as clocks["reset"]:
        for g in graphs:
            g.reset()
    del graphs
    gc.collect()
    torch.npu.synchronize()
    with Clock() as clocks["host_empty_cache"]:
        simrt.host_empty_cache()
    del h_shared
    eager = [torch.empty(n, dtype=torch.uint8, pin_memory=True) for _ in range(G)]
    del eager
    torch.npu.synchronize()
    with Clock() as clocks[REFERENCE]:
        simrt.host_empty_cache()
    eager = [torch.empty(n, dtype=torch.uint8, pin_memory=True) for _ in range(G)]
    torch.npu.synchronize()
    with Clock() as clocks[WITH_FREE]:
        del eager
        simrt.host_empty_cache()
    for op, c in clocks.items():
        out["samples"].setdefault(f"{op} G={G} cpu", []).append(c.cpu / G * 1e6)
        out["samples"].setdefault(f"{op} G={G} wall", []).append(c.wall / G * 1e6)
    grown = simrt.growth(base, held, "sim_live")
    out["values"][f"held per graph G={G}"] = None if grown is None else grown / G
    out["values"][f"left G={G}"] = simrt.growth(base0, simrt.held_bytes(ctx.sim), "sim_live")


def measure(ctx) -> dict:
    import torch

    out: dict = {"samples": {}, "values": {"graphs": ctx.cfg["graphs"]}}
    for G in ctx.cfg["graphs"]:
        for _ in range(ctx.cfg["reps"]):
            one_rep(ctx, torch, G, out)
    return out


def flat_row(runs: stats.Runs, op: str, lo: int, hi: int) -> dict:
    """Plugin cost per graph at G = hi against its spread at G = lo: meets while the median at
    hi is at most the upper quartile at lo. Cells: each variant's median(hi) / median(lo)."""
    cells, verdict = {}, None
    for v in runs.variants():
        a = stats.summ(runs.samples(f"{op} G={lo} cpu", v))
        b = stats.summ(runs.samples(f"{op} G={hi} cpu", v))
        if a and b and a["median"]:
            cells[v] = {"values": [round(b["median"] / a["median"], 3)]}
            if v == "plugin":
                verdict = stats.MEETS if b["median"] <= a["q3"] else stats.MISS
    return stats.row(f"{op}: CPU per graph, G={hi} / G={lo}", "x", cells, readme=True,
                     target=f"plugin <= q3 at G={lo}", verdict=verdict)


def summarize(runs: stats.Runs) -> list[dict]:
    Gs = runs.first("values", "graphs", "plugin") or runs.first("values", "graphs", "native")
    if not Gs:
        return []
    rows = []
    for op in OPS:
        rows.append(flat_row(runs, op, Gs[0], Gs[-1]))
        for G in Gs:
            last = G == Gs[-1] and op != "host_empty_cache"
            rows.append(stats.timed_row(runs, f"{op} G={G} cpu", f"{op}: CPU per graph, G={G}",
                                        "us", limit=2.0 if last else None, readme=last))
    G = Gs[-1]
    rows.append(stats.timed_row(runs, f"{REFERENCE} G={G} cpu", f"{REFERENCE}, per block, "
                                f"G={G}", "us"))
    rows.append(stats.timed_row(runs, f"host_empty_cache G={G} cpu", f"host_empty_cache per "
                                f"graph vs native's {REFERENCE}, G={G}", "us", limit=2.0,
                                base_key=f"{REFERENCE} G={G} cpu", readme=True))
    rows.append(stats.timed_row(runs, f"{WITH_FREE} G={G} cpu", f"{WITH_FREE}, per tensor, "
                                f"G={G}", "us"))
    rows.append(stats.timed_row(runs, f"host_empty_cache G={G} cpu", f"host_empty_cache per "
                                f"graph vs native's {WITH_FREE}, G={G}", "us",
                                base_key=f"{WITH_FREE} G={G} cpu", readme=True))
    for G in Gs:
        rows.append(stats.value_row(runs, f"held per graph G={G}", f"pinned bytes held per "
                                    f"graph, G={G}", "B", readme=G == Gs[-1]))
        rows.append(stats.value_row(runs, f"left G={G}", f"left after host_empty_cache, G={G}",
                                    "B", check=lambda x: x == 0, target="plugin 0"))
        rows.append(stats.value_row(runs, f"wrong bytes G={G}", f"wrong bytes, G={G}", "B",
                                    check=lambda x: x == 0, target="plugin 0"))
    return rows


def plot(ax, rows: list[dict], runs: stats.Runs) -> None:
    Gs = runs.first("values", "graphs", "plugin") or runs.first("values", "graphs", "native")
    for op, marker in zip(OPS, "osD^"):
        for v, color in (("native", "tab:red"), ("plugin", "tab:blue")):
            ys = [(stats.summ(runs.samples(f"{op} G={G} cpu", v)) or {}).get("median") for G in Gs]
            pts = [(G, y) for G, y in zip(Gs, ys) if y is not None]
            if pts:
                ax.plot(*zip(*pts), marker=marker, color=color, ms=4, label=f"{v} {op}",
                        ls="-" if v == "plugin" else ":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("G graphs in one pool", fontsize=8)
    ax.set_ylabel("CPU us per graph (median)", fontsize=8)
    ax.legend(fontsize=6, ncol=2)
