"""With ``PYTORCH_NPU_ALLOC_CONF=pin_memory_expandable_segments:True`` (set by the test): an
eager pinned copy, then a capture + replay; reports the values or the capture's error."""

import torch
from scenario import N, pinned, report, side_stream, values

side_stream()
out = {}
eager = pinned(3.0)
d = torch.zeros(N, device="npu")
d.copy_(eager, non_blocking=True)
torch.npu.synchronize()
out["eager"] = values(d)
try:
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        x = pinned(1.0)
        d.copy_(x, non_blocking=True)
        del x
    others = [pinned(9.0) for _ in range(4)]
    g.replay()
    torch.npu.synchronize()
    out["replay"] = values(d)
except Exception as e:
    out["error"] = str(e)
report(out)
