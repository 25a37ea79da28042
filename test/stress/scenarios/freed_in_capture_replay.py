"""Proof that the stress checks can fail: a pinned tensor freed inside a capture, then replayed.

A pinned tensor (64 KiB of 42) is allocated BEFORE a capture, copied to the device inside it
and freed INSIDE it; then eager code pins four buffers of 0xEE and the graph is replayed.
torch_npu's native allocator gives the block back to the default pool, so an eager owner
overwrites what the replay reads (the known defect); with the plugin the replay reads its own
bytes. The same check passes with the plugin in R1 and R2's ``check_after``.

Inputs (environment): ``TORCH_NPU_PINPOOL=0`` runs torch_npu's native allocator (expected to
show the defect); nothing else. The stress tests set ``SIMCANN_STRICT=0``. Needs the simulated
runtime (``source ci/sim-env.sh PAIR``)::

    python test/stress/scenarios/freed_in_capture_replay.py
    TORCH_NPU_PINPOOL=0 python test/stress/scenarios/freed_in_capture_replay.py

Reports (``PINPOOL_RESULT:<json>``): ``{"wrong": <bytes the replay got wrong>}``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # stresslib

import torch
from stresslib import U8, report, warm_up, wrong

warm_up()
n = 65536
d = torch.empty(n, dtype=U8, device="npu")
g = torch.npu.NPUGraph()
h = torch.full((n,), 42, dtype=U8).pin_memory()  # allocated BEFORE the capture
with torch.npu.graph(g):
    d.copy_(h, non_blocking=True)
    del h  # freed INSIDE the capture
junk = [torch.full((n,), 0xEE, dtype=U8).pin_memory() for _ in range(4)]
g.replay()
torch.npu.synchronize()
result = {"wrong": wrong(d, 42)}
g.reset()
report(result)
