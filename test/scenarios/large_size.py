"""Bytes held for one large pinned buffer, eager or allocated inside a graph capture (issue #14).

Env: LARGE_BYTES (request, default 48 MiB: a power of two would pin 64 MiB), LARGE_IN_CAPTURE=1
(allocate it inside a capture, copy it H2D there, replay, check the device bytes).
Reports: requested, held (host_memory_stats growth), in_use growth, pool bytes, is_pinned, and
the simulator's live pinned bytes growth when available.
"""

import gc

import torch
from _lib import simctl
from _lib.scenario import env_int, held_bytes, in_use_bytes, pool_bytes, report, side_stream

import torch_npu_pinpool

n = env_int("LARGE_BYTES", 48 << 20)
in_capture = env_int("LARGE_IN_CAPTURE", 0) == 1
gc.collect()
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
held0, use0, pool0 = held_bytes(), in_use_bytes(), pool_bytes()
live0 = simctl.host_bytes() if simctl.available() else None
result = {"requested": n}
if in_capture:
    side_stream()
    dev = torch.zeros(n, dtype=torch.uint8, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        buf = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        buf.fill_(3)
        dev.copy_(buf, non_blocking=True)
    other = torch.empty(n, dtype=torch.uint8, pin_memory=True)  # eager: must not get buf's block
    other[: 1 << 16].fill_(9)
    g.replay()
    torch.npu.synchronize()
    ends = set(dev[: 1 << 16].cpu().tolist()) | set(dev[-(1 << 16) :].cpu().tolist())
    result["values"] = sorted(ends)
    result["pool"] = pool_bytes() - pool0
    del other
    torch_npu_pinpool.host_empty_cache()
else:
    buf = torch.empty(n, dtype=torch.uint8, pin_memory=True)
result["is_pinned"] = bool(buf.is_pinned())
result["held"] = held_bytes() - held0
result["in_use"] = in_use_bytes() - use0
if live0 is not None:
    result["live"] = simctl.host_bytes() - live0
report(result)
