"""The user-level promise behind P3: after the graphs are reset and the device synchronized,
ONE ``host_empty_cache()`` gives every capture-time block back to the runtime.

Captures one graph with a pinned input kept alive and a temporary freed inside the capture,
replays it, resets it, drops the input, collects, synchronizes and calls ``host_empty_cache()``
once, then reads the runtime's live pinned bytes.

Inputs (environment): ``TORCH_NPU_PINPOOL=0`` runs torch_npu's native allocator; nothing else.
The stress tests set ``SIMCANN_STRICT=0``. Needs the simulated runtime
(``source ci/sim-env.sh PAIR``)::

    python test/stress/scenarios/single_host_empty_cache.py

Reports (``PINPOOL_RESULT:<json>``): the runtime's live pinned bytes at the start (``base``,
from ``stresslib.held``), after the one ``host_empty_cache()`` (``after_one_empty``) and after
``held()``'s two more (``after_two``).
"""

import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # stresslib

import torch
from stresslib import U8, held, host_empty_cache, report, sim, warm_up

warm_up()
base = held()
n = 65536
d1 = torch.empty(n, dtype=U8, device="npu")
d2 = torch.empty(n, dtype=U8, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    h_keep = torch.full((n,), 1, dtype=U8).pin_memory()
    d1.copy_(h_keep, non_blocking=True)
    h_tmp = torch.full((n,), 2, dtype=U8).pin_memory()
    d2.copy_(h_tmp, non_blocking=True)
    del h_tmp
g.replay()
torch.npu.synchronize()
g.reset()
del g, h_keep
gc.collect()
torch.npu.synchronize()
host_empty_cache()
report(
    {
        "base": base["sim_live"],
        "after_one_empty": sim.host_bytes_live(),
        "after_two": held()["sim_live"],
    }
)
