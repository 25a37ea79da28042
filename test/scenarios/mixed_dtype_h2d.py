"""A mixed-dtype ``non_blocking`` H2D copy in a capture: float32 pinned -> float16 device, the
pinned source freed inside the capture (issue #35). torch_npu copies the float32 bytes and casts
on the device, so the graph reads the pinned block at every replay. Owned by
test/pinpool/test_capture_replay.py.

MIXED_SHAPE: ``inside`` (pinned and freed inside the capture) or ``before`` (pinned before the
capture, freed inside it). Other pinned float32 tensors are written before the replay. Reports
``values`` (what the float16 buffer received; right: [1.5] / [2.5]), ``dtype`` and
``held_after`` (pinned bytes held above the baseline once the graph is reset and
host_empty_cache() ran, host_memory_stats()); or ``capture_error`` when the capture raised
(torch_npu 2.10.0.post6 casts on the host into a pageable temporary and copies that, which the
runtime refuses in a capture: error 107000).
"""

from __future__ import annotations

import os

import torch
from _lib.scenario import N, held_bytes, replay_over_others, report, settled_held, side_stream

import torch_npu_pinpool

SHAPE = os.environ.get("MIXED_SHAPE", "inside")
if SHAPE not in ("inside", "before"):
    raise SystemExit(f"MIXED_SHAPE={SHAPE!r}: inside or before")
side_stream()
dev = torch.zeros(N, dtype=torch.float16, device="npu")
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
baseline = held_bytes()
early = torch.full((N,), 2.5).pin_memory() if SHAPE == "before" else None
g = torch.npu.NPUGraph()
try:
    with torch.npu.graph(g):
        src = torch.full((N,), 1.5).pin_memory() if early is None else early
        dev.copy_(src, non_blocking=True)  # float32 pinned -> float16 device
        del src, early
except RuntimeError as e:  # a build that casts on the host first: the runtime refuses the copy
    report({"capture_error": str(e).splitlines()[0][:300], "dtype": str(dev.dtype)})
    raise SystemExit(0) from None
out = {"values": replay_over_others(g, dev, 8), "dtype": str(dev.dtype)}
g.reset()
del g
out["held_after"] = settled_held(baseline)
report(out)
