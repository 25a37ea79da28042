"""A mixed-dtype ``non_blocking`` H2D copy in a capture: float32 pinned -> float16 device, the
pinned source freed inside the capture (issue #35). torch_npu copies the float32 bytes and casts
on the device, so the graph reads the pinned block at every replay. Owned by
test/pinpool/test_field_shapes.py.

MIXED_SHAPE: ``inside`` (pinned and freed inside the capture) or ``before`` (pinned before the
capture, freed inside it). Other pinned float32 tensors are written before the replay. Reports
``values`` (what the float16 buffer received; right: [1.5] / [2.5]), ``dtype`` and
``held_after`` (pinned bytes held above the baseline once the graph is reset and
host_empty_cache() ran, host_memory_stats()).
"""

from __future__ import annotations

import gc
import os

import torch
import torch_npu
from scenario import N, held_bytes, report, side_stream, values

SHAPE = os.environ.get("MIXED_SHAPE", "inside")
if SHAPE not in ("inside", "before"):
    raise SystemExit(f"MIXED_SHAPE={SHAPE!r}: inside or before")
side_stream()
dev = torch.zeros(N, dtype=torch.float16, device="npu")
torch.npu.synchronize()
torch_npu.npu.host_empty_cache()
baseline = held_bytes()
early = torch.full((N,), 2.5).pin_memory() if SHAPE == "before" else None
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    src = torch.full((N,), 1.5).pin_memory() if early is None else early
    dev.copy_(src, non_blocking=True)  # float32 pinned -> float16 device
    del src, early
others = [torch.full((N,), 9.0).pin_memory() for _ in range(8)]
g.replay()
torch.npu.synchronize()
out = {"values": values(dev), "dtype": str(dev.dtype)}
del others
g.reset()
del g
gc.collect()
torch.npu.synchronize()
torch_npu.npu.host_empty_cache()
out["held_after"] = held_bytes() - baseline
report(out)
