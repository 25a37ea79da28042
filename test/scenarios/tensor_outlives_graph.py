"""A pinned tensor allocated inside g1's capture outlives g1 (replayed, then ended by reset or
garbage collection); g2 captures a copy from it; the user drops the tensor while g2 lives. The
block must stay g2's: later pin_memory() calls never get it, and g2's replay reads what the user
last wrote.

Inputs: PINPOOL_END (reset | gc: how g1 ends), PINPOOL_DELAY_US (simulator task delay).
"""

import os

import torch
from _lib import simctl
from _lib.scenario import end_graphs, env_int, pinned, report, side_stream, values

import torch_npu_pinpool

END = os.environ.get("PINPOOL_END", "reset")
if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))
side_stream()

d1, d2 = torch.zeros(1024, device="npu"), torch.zeros(1024, device="npu")
g1 = torch.npu.NPUGraph()
with torch.npu.graph(g1):
    kept = pinned(1.0)  # allocated in g1's capture, kept by the user
    d1.copy_(kept, non_blocking=True)
g1.replay()
first = values(d1)
graphs = [g1]
del g1
end_graphs(graphs, END)
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()

kept.fill_(5.0)
g2 = torch.npu.NPUGraph()
with torch.npu.graph(g2):
    d2.copy_(kept, non_blocking=True)
del kept  # g2 still reads it
torch_npu_pinpool.host_empty_cache()
junk = [pinned(9.0) for _ in range(8)]  # would get the block if it were recycled
g2.replay()
report({"first": first, "second": values(d2)})
