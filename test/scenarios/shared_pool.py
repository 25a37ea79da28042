"""Two graphs share one host pool (``pool=g1.pool()``): a block freed unused in the first
capture is reused by the second, a used one is not, each graph replays its own bytes, and the
pool lives until its last graph goes (plugin's pool_stats())."""

import gc

import torch
from _lib.scenario import N, pinned, pools, report, side_stream, values

side_stream()
out = {}
handle = torch.npu.graph_pool_handle()
d1, d2 = torch.zeros(N, device="npu"), torch.zeros(N, device="npu")
g1, g2 = torch.npu.NPUGraph(), torch.npu.NPUGraph()
with torch.npu.graph(g1, pool=handle):
    scratch = torch.empty(N).pin_memory()  # allocated in the capture, freed unused
    del scratch
    a = pinned(1.0)  # reuses `scratch`
    d1.copy_(a, non_blocking=True)
    del a
stats1 = pools()
with torch.npu.graph(g2, pool=g1.pool()):
    b = pinned(2.0)  # never reuses `a`
    d2.copy_(b, non_blocking=True)
    del b
stats2 = pools()
others = [pinned(9.0) for _ in range(4)]
g1.replay()
g2.replay()
torch.npu.synchronize()
out["d1"], out["d2"] = values(d1), values(d2)
out["pools_after_g1"] = [(p["graphs"], p["blocks"]) for p in stats1]
out["pools_after_g2"] = [(p["graphs"], p["blocks"]) for p in stats2]
del g1
gc.collect()
torch.npu.synchronize()
g2.replay()
torch.npu.synchronize()
out["d2_after_g1_gone"] = values(d2)
out["graphs_left"] = [p["graphs"] for p in pools()]
del g2
gc.collect()
torch.npu.synchronize()
out["pools_left"] = pools()
report(out)
