"""A tensor pinned before any capture is used by eager non_blocking copies (both directions) on
a stream of its own, then read by a graph's captured copy, then dropped by the user while the
graph lives. The graph is replayed; later work is queued on the eager stream; the graph ends
(reset or garbage collection) and host_empty_cache() is called once. Every copy from the block
ran long before, so that call gives every pinned byte back, as torch_npu's allocator does: the
eager copies are fenced when the tensor dies, not behind whatever the stream runs when the
graph ends (Note [Eager uses are fenced when the tensor dies]).

Inputs: PINPOOL_END (reset | gc), PINPOOL_DELAY_US (simulator task delay: keeps the later work
queued while host_empty_cache() runs).
"""

import os

import torch
from _lib import simctl
from _lib.scenario import end_graphs, env_int, held_bytes, pinned, report, side_stream, values

import torch_npu_pinpool

END = os.environ.get("PINPOOL_END", "reset")
if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))
side_stream()  # the capture and replay stream
eager = torch.npu.Stream()
baseline = held_bytes()

d_in, d_out, d_graph, busy = (torch.zeros(1024, device="npu") for _ in range(4))
d_out.fill_(3.0)
torch.npu.synchronize()  # the eager stream reads d_out
t = pinned(1.0)
with torch.npu.stream(eager):
    d_in.copy_(t, non_blocking=True)  # eager H2D from the block
    t.copy_(d_out, non_blocking=True)  # eager D2H into it: t now holds 3.0
torch.npu.synchronize()

g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    d_graph.copy_(t, non_blocking=True)  # the graph reads the block too
del t  # the graph still reads it: the block is not given back yet
g.replay()
torch.npu.synchronize()
replay = values(d_graph)

with torch.npu.stream(eager):
    for _ in range(400):  # unrelated work, still queued when the cache is emptied
        busy.add_(1.0)
graphs = [g]
del g
end_graphs(graphs, END)
# The graph's replays ran on this stream: its death's fence there completes behind nothing
# (Note [Replay fences]); the eager stream's queued work stays queued.
torch.npu.current_stream().synchronize()
torch_npu_pinpool.host_empty_cache()
held_after = held_bytes()
torch.npu.synchronize()
report(
    {
        "eager": values(d_in),
        "replay": replay,
        "busy": values(busy),
        "baseline": baseline,
        "held_after": held_after,
    }
)
