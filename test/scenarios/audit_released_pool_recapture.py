"""released_pool_recapture: capture into graph_pool_handle(), reset the graph (the pool has no
graph left), capture into the same pool id again and replay.

AUDIT_SHAPE:
  staged  the first capture stages its input through a block pinned inside it: torch_npu >= 2.11
          alone keeps that block and so the pool, and fails the second capture (INTERNAL ASSERT
          ... use_count > 0: docs/problem.md, defect 2)
  kept    the first capture reads a tensor pinned before it: no capture-time block, torch.npu.graph
          empties the cache on entry, torch_npu alone captures again - nothing to report

Reports what each replay read (or the second capture's error), the line of the second capture and
the report's entries (plugin on, TORCH_NPU_PINPOOL_REPORT set).
"""

import os

import torch
from _lib.scenario import N, hazards, report, side_stream, site, values

SHAPE = os.environ.get("AUDIT_SHAPE", "staged")
side_stream()
out = {"recapture_site": site("recapture")}
pool = torch.npu.graph_pool_handle()
dev = torch.zeros(N, device="npu")
kept = torch.full((N,), 1.0).pin_memory()
g1 = torch.npu.NPUGraph()
with torch.npu.graph(g1, pool=pool):
    if SHAPE == "staged":
        staged = torch.full((N,), 1.0).pin_memory()
        dev.copy_(staged, non_blocking=True)
        del staged
    else:
        dev.copy_(kept, non_blocking=True)
g1.replay()
torch.npu.synchronize()
out["first"] = values(dev)
g1.reset()
second = torch.full((N,), 2.0).pin_memory()
try:
    g2 = torch.npu.NPUGraph()
    with torch.npu.graph(g2, pool=pool):  # site: recapture
        dev.copy_(second, non_blocking=True)
    g2.replay()
    torch.npu.synchronize()
    out["second"] = values(dev)
except Exception as e:
    out["error"] = str(e)[:300]
out["hazards"] = hazards()
report(out)
