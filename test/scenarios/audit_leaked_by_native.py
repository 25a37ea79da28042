"""leaked_by_native: CAPTURES graphs, each staging its input through a block pinned inside its
capture and kept by the caller until the graph is reset; then the tensors go, the device is
synchronized and host_empty_cache() runs. torch_npu >= 2.11 alone keeps every such block for good
(docs/problem.md, defect 1); the plugin gives them back, and the report counts them.

Reports the pinned bytes held before and after, the line of the pin_memory() call and the
report's entries (plugin on, TORCH_NPU_PINPOOL_REPORT set). Env: CAPTURES (3).
"""

import torch
from _lib.scenario import N, env_int, hazards, held_bytes, report, side_stream, site

import torch_npu_pinpool

CAPTURES = env_int("CAPTURES", 3)
side_stream()
dev = torch.zeros(N, device="npu")
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
before = held_bytes()
for k in range(CAPTURES):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        h = torch.full((N,), float(k)).pin_memory()  # site: pin
        dev.copy_(h, non_blocking=True)
    g.replay()
    torch.npu.synchronize()
    g.reset()
    del h, g
# A dead graph's blocks go back once an event recorded at its reset on its replay stream has
# completed (Note [Replay fences]); the synchronize makes that certain at any timing.
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
report(
    {
        "held_before": before,
        "held_after": held_bytes(),
        "pin_site": site("pin"),
        "hazards": hazards(),
    }
)
