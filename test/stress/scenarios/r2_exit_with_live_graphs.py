"""Stress R2: the process exits with graphs (and their pinned blocks) still alive.

Captures four graphs (two of them sharing a pool; in those the pinned input is freed inside the
capture, in the others it stays alive), replays each, queues one more replay and exits without
synchronizing, resetting or dropping anything: the exit must be clean (exit status 0, no abort,
crash or simulator violation -- a replay's memory freed under it) and must not hang.

Inputs (environment): none of its own; ``TORCH_NPU_PINPOOL=0`` runs torch_npu's native
allocator. The stress tests set ``SIMCANN_STRICT=0``. Needs the simulated runtime
(``source ci/sim-env.sh PAIR``)::

    python test/stress/scenarios/r2_exit_with_live_graphs.py; echo "exit $?"

Reports (``PINPOOL_RESULT:<json>``): ``{"graphs": 4}``, printed before the exit; the rest is
the exit status and stderr.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # stresslib

import torch
from stresslib import U8, report, warm_up

warm_up()
keep = []
pool = torch.npu.graph_pool_handle()
for j in range(4):
    g = torch.npu.NPUGraph()
    d = torch.empty(65536, dtype=U8, device="npu")
    with torch.npu.graph(g, pool=pool if j % 2 else None):
        h = torch.full((65536,), j + 1, dtype=U8).pin_memory()
        d.copy_(h, non_blocking=True)
        if j % 2:
            del h
            h = None
    g.replay()
    keep.append((g, d, h))
# one replay still queued at exit
keep[0][0].replay()
report({"graphs": len(keep)})
