"""Replay reads the captured pinned bytes: (a) a block pinned and freed inside the capture,
(b) one pinned before it and freed inside it, (c) a pinned D2H output kept alive, each after
later pin_memory() and host_empty_cache(); and a static pinned input rewritten between replays.
"""

import torch
from _lib.scenario import N, pinned, report, side_stream, values

import torch_npu_pinpool

side_stream()  # capture and replay on a side stream
out = {}
dev_a = torch.zeros(N, device="npu")
early = pinned(2.0)
dev_b = torch.zeros(N, device="npu")
dev_c = torch.full((N,), 5.0, device="npu")
torch.npu.synchronize()
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    src = pinned(1.0)
    dev_a.copy_(src, non_blocking=True)
    del src
    dev_b.copy_(early, non_blocking=True)
    del early
    host_out = torch.empty(N).pin_memory()
    host_out.copy_(dev_c, non_blocking=True)
torch.npu.synchronize()
# Later pinned allocations write other bytes, and the cache is emptied in between.
torch_npu_pinpool.host_empty_cache()
others = [pinned(9.0) for _ in range(8)]
host_out.fill_(0.0)
g.replay()
torch.npu.synchronize()
out["a"] = values(dev_a)
out["b"] = values(dev_b)
out["c"] = values(host_out)
# A static pinned input rewritten between replays: each replay reads the current bytes.
static_in = pinned(0.0)
dev_s = torch.zeros(N, device="npu")
g2 = torch.npu.NPUGraph()
with torch.npu.graph(g2):
    dev_s.copy_(static_in, non_blocking=True)
seen = []
for k in (3.0, 4.0):
    static_in.fill_(k)
    g2.replay()
    torch.npu.synchronize()
    seen.append(values(dev_s))
out["static"] = seen
report(out)
