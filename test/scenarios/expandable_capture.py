"""With ``PYTORCH_NPU_ALLOC_CONF=pin_memory_expandable_segments:True`` (set by the test): an
eager pinned copy, then a capture + replay; reports the values or the capture's error."""

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
eager = pinned(3.0)
d = torch.zeros(N, device="npu")
d.copy_(eager, non_blocking=True)
torch.npu.synchronize()
out["eager"] = values(d)
try:
    g = torch.npu.NPUGraph()
    capture_pinned_copy(torch.npu.graph(g), d, 1.0)
    out["replay"] = replay_over_others(g, d)
except Exception as e:
    out["error"] = str(e)
report(out)
