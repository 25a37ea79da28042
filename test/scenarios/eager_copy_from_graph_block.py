"""A static input pinned inside a capture is used after it by an eager non_blocking copy; the
tensor is dropped while that copy is still queued, then the graph ends (reset or garbage
collection) while another thread keeps pinning junk. The block must not be handed out before
the eager copy has run: the copy delivers the bytes the user wrote.

With two devices the eager copy goes to the second one, so the graph's reset (which waits for
work on the graph's device) cannot hide an early hand-out. Inputs: PINPOOL_END (reset | gc),
PINPOOL_DELAY_US (simulator task delay: keeps the copy queued behind earlier work).
"""

import os

import torch
from _lib import simctl
from _lib.scenario import Churn, end_graphs, env_int, pinned, report, side_stream, values

END = os.environ.get("PINPOOL_END", "reset")
if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))
side_stream()

EAGER_DEVICE = 1 if torch.npu.device_count() > 1 else 0
d_graph = torch.zeros(1024, device="npu")
d_eager = torch.zeros(1024, device=f"npu:{EAGER_DEVICE}")
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    static_in = pinned(1.0)  # a graph-pool block the graph reads
    d_graph.copy_(static_in, non_blocking=True)
g.replay()
torch.npu.synchronize()

static_in.fill_(3.0)
eager = torch.npu.Stream(device=EAGER_DEVICE)  # not a replay stream: no graph fence covers it
with Churn(9.0):  # another thread pins junk: it gets the block if it is given back early
    with torch.npu.stream(eager):
        for _ in range(20):  # work queued ahead of the eager copy
            d_eager.add_(0.0)
        d_eager.copy_(static_in, non_blocking=True)
    del static_in  # freed while the copy is queued
    graphs = [g]
    del g
    end_graphs(graphs, END)
    with torch.npu.device(EAGER_DEVICE):
        torch.npu.synchronize()
report({"eager": values(d_eager), "eager_device": EAGER_DEVICE})
