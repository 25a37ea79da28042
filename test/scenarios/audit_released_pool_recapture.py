"""released_pool_recapture: capture into graph_pool_handle(), reset the graph (the pool has no
graph left), capture into the same pool id again and replay. torch_npu >= 2.11 alone fails that
second capture (INTERNAL ASSERT ... use_count > 0: docs/problem.md, defect 2).

Reports what each replay read (or the second capture's error), the line of the second capture and
the report's entries (plugin on, TORCH_NPU_PINPOOL_REPORT set).
"""

import torch
from scenario import N, hazards, report, side_stream, site, values

side_stream()
out = {"recapture_site": site("recapture")}
pool = torch.npu.graph_pool_handle()
dev = torch.zeros(N, device="npu")
first = torch.full((N,), 1.0).pin_memory()
g1 = torch.npu.NPUGraph()
with torch.npu.graph(g1, pool=pool):
    dev.copy_(first, non_blocking=True)
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
