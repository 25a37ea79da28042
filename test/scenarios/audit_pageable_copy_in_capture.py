"""pageable_copy_in_capture: a copy from a pageable (not pinned) CPU tensor inside a capture,
refused by the plugin's guard (torch >= 2.10); the capture is then ended and the graph reset.

Reports the error, the line of the copy and the report's entries (plugin on,
TORCH_NPU_PINPOOL_REPORT set).
"""

import torch
from _lib.scenario import N, hazards, report, side_stream, site

side_stream()
dev = torch.zeros(N, device="npu")
pageable = torch.ones(N)
torch.npu.synchronize()
error = None
g = torch.npu.NPUGraph()
try:
    with torch.npu.graph(g):
        dev.copy_(pageable, non_blocking=True)  # site: copy
except RuntimeError as e:
    error = str(e)[:200]
g.reset()
report({"error": error, "copy_site": site("copy"), "hazards": hazards()})
