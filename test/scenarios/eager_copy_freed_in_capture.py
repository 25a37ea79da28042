"""A pinned tensor's eager non_blocking copy is still queued on a stream when that stream begins
a capture (NPUGraph.capture_begin() called directly, which - unlike `torch.npu.graph` - does not
synchronize first); the tensor is freed inside the capture while another thread keeps pinning
junk and emptying the cache. The block must not be handed out or given back before the copy has
run: the copy delivers the bytes the user wrote. An event recorded for that copy on the
capturing stream would be captured, not run (Note [Eager-use fences]).

Inputs: PINPOOL_DELAY_US (simulator task delay: keeps the copy queued behind earlier work).
"""

import time

import torch
from _lib import simctl
from _lib.scenario import Churn, env_int, pinned, report, side_stream, values

if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))
side_stream()

d_in, work, d_graph = (torch.zeros(1024, device="npu") for _ in range(3))
t = pinned(1.0)
torch.npu.synchronize()
for _ in range(50):  # work queued ahead of the eager copy
    work.add_(1.0)
d_in.copy_(t, non_blocking=True)  # eager H2D, still queued when the capture begins
g = torch.npu.NPUGraph()
with Churn(9.0):  # another thread pins junk: it gets the block if it is handed out early
    g.capture_begin()
    d_graph.add_(1.0)
    del t  # freed inside the capture, its eager copy still queued
    time.sleep(0.05)  # let the other thread pin and empty the cache
    g.capture_end()
    torch.npu.synchronize()
g.replay()
torch.npu.synchronize()
result = {"eager": values(d_in), "replay": values(d_graph), "work": values(work)}
if simctl.available():
    result["violations"] = simctl.violations()
report(result)
