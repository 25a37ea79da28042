"""The pinned bytes host_memory_stats() reports held, while a graph that used a 16 KiB pinned
input lives (``during``) and after it is gone (``after``), against the value before; and the
plugin's pool_stats() at both points."""

import torch
from _lib.scenario import held_bytes, pinned, pools, report, settled_held, side_stream

import torch_npu_pinpool

side_stream()
out = {}
torch_npu_pinpool.host_empty_cache()
before = held_bytes()
dev = torch.zeros(4096, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    x = pinned(1.0, 4096)  # 16 KiB, used by the capture
    dev.copy_(x, non_blocking=True)
    del x
torch_npu_pinpool.host_empty_cache()
out["during"] = held_bytes() - before
out["pools"] = [
    {k: p[k] for k in ("graphs", "blocks", "bytes_held", "bytes_in_use", "released")}
    for p in pools()
]
g.replay()
del g
out["after"] = settled_held(before)
out["pools_after"] = pools()
report(out)
