"""recycled_by_native: a pinned block that a captured copy reads is freed while its graph lives,
then more tensors are pinned (the next owners torch_npu's own allocator would give the block to)
and the graph is replayed.

AUDIT_SHAPE:
  before_freed_in_capture  pinned before the capture, freed inside it (docs/problem.md, defect 3)
  pinned_in_capture        pinned inside the capture, freed inside it (the first reproducer)
  before_freed_after       pinned before the capture, freed after it while the graph lives

Reports what the replay read (the captured 2.0, or a next owner's 9.0 / freed memory), the line of
the pin_memory() call, and the audit report's entries (plugin on, TORCH_NPU_PINPOOL_REPORT set).
"""

import os

import torch
from _lib.scenario import N, hazards, report, side_stream, site, values

import torch_npu_pinpool

SHAPE = os.environ.get("AUDIT_SHAPE", "before_freed_in_capture")
side_stream()
dev = torch.zeros(N, device="npu")
torch.npu.synchronize()
g = torch.npu.NPUGraph()
if SHAPE == "pinned_in_capture":
    pin_site = site("pin-inside")
    with torch.npu.graph(g):
        h = torch.full((N,), 2.0).pin_memory()  # site: pin-inside
        dev.copy_(h, non_blocking=True)
        del h
elif SHAPE in ("before_freed_in_capture", "before_freed_after"):
    pin_site = site("pin-before")
    h = torch.full((N,), 2.0).pin_memory()  # site: pin-before
    with torch.npu.graph(g):
        dev.copy_(h, non_blocking=True)
        if SHAPE == "before_freed_in_capture":
            del h
    if SHAPE == "before_freed_after":
        del h
else:
    raise ValueError(f"AUDIT_SHAPE={SHAPE!r}")
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
others = [torch.full((N,), 9.0).pin_memory() for _ in range(8)]
dev.zero_()
g.replay()
torch.npu.synchronize()
report({"replay": values(dev), "pin_site": pin_site, "hazards": hazards()})
