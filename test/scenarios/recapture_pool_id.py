"""Capture into ``graph_pool_handle()``, reset, capture into the same pool id again, replay.
Reports the values each replay wrote, or the error of the second capture."""

import torch
from _lib.scenario import (
    N,
    capture_pinned_copy,
    pinned,
    replay_over_others,
    report,
    side_stream,
    values,
)

side_stream()
out = {}
handle = torch.npu.graph_pool_handle()
dev = torch.zeros(N, device="npu")
g1 = torch.npu.NPUGraph()
with torch.npu.graph(g1, pool=handle):
    x = pinned(1.0)
    dev.copy_(x, non_blocking=True)
    del x
g1.replay()
torch.npu.synchronize()
out["first"] = values(dev)
g1.reset()
try:
    g2 = torch.npu.NPUGraph()
    capture_pinned_copy(torch.npu.graph(g2, pool=handle), dev, 2.0)
    out["second"] = replay_over_others(g2, dev)
except Exception as e:
    out["error"] = str(e)[:300]
report(out)
