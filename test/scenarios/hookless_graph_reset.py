"""Two graphs share a pool: one captured through torch_npu's own C++ methods (no Python hooks,
as a C++ caller or a wrapper that bypasses NPUGraph.capture_begin does), one as usual. Resetting
the usual one must not free the hookless one's pinned input (issue #47, csrc Note [Releases
without hooks]); its replays still read 1.0, not the next owner's 9.0.

Env: RESET_HOW = reset (``g.reset()``) or collect (``del g``: garbage collection resets it).
torch_npu >= 2.11 only: before, torch_npu tells the host allocator nothing of a hookless graph.
"""

import gc
import os

import torch
import torch_npu
from _lib.scenario import Churn, native_pools, pinned, report, side_stream, values

if not native_pools():
    report({"skip": "torch_npu <= 2.10 calls no host-allocator pool hook"})
    raise SystemExit(0)

HOW = os.environ.get("RESET_HOW", "reset")
side_stream()
pool = torch.npu.graph_pool_handle()
hookless, hooked = torch.npu.NPUGraph(), torch.npu.NPUGraph()
out_hookless = torch.zeros(1024, device="npu")
out_hooked = torch.zeros(1024, device="npu")

torch_npu._C._NPUGraph.capture_begin(hookless, pool=pool, capture_error_mode="global",
                                     report_shape=True)
t = pinned(1.0)
out_hookless.copy_(t, non_blocking=True)
del t
torch_npu._C._NPUGraph.capture_end(hookless)

with torch.npu.graph(hooked, pool=pool):
    t = pinned(2.0)
    out_hooked.copy_(t, non_blocking=True)
    del t
hooked.replay()
torch.npu.synchronize()

if HOW == "reset":
    hooked.reset()
else:
    del hooked
    gc.collect()
bait = [pinned(9.0) for _ in range(8)]  # takes any block given back too early
rounds = []
with Churn(value=9.0):
    for _ in range(3):
        out_hookless.fill_(0.0)
        hookless.replay()
        torch.npu.synchronize()
        rounds.append(values(out_hookless))
hookless.reset()
report({"rounds": rounds})
