"""Two graphs capture at once, each on its own stream into its own pool, and read one pinned
buffer in turn: graph A, then graph B, then graph A again (so A's captured work uses the buffer
twice, with B's use between). The user drops the buffer, then graph A ends and
host_empty_cache() runs: graph B still reads the buffer, so its bytes must stay where B's
replay reads them while the same-size tensors pinned next hold other bytes. Once B ends too,
one host_empty_cache() gives every pinned byte back (Note [Graph ownership of blocks]: a block
counts its uses by graphs, and a graph gives back each use it counted).

Inputs: PINPOOL_END (reset | gc): how the graphs end.
"""

import os

import torch
from _lib.scenario import end_graphs, held_bytes, pinned, report, values

import torch_npu_pinpool

END = os.environ.get("PINPOOL_END", "reset")
torch_npu_pinpool.host_empty_cache()
baseline = held_bytes()
shared = pinned(5.0)
d_a1, d_a2, d_b = (torch.zeros(shared.numel(), device="npu") for _ in range(3))
graph_a, graph_b = torch.npu.NPUGraph(), torch.npu.NPUGraph()
stream_a, stream_b = torch.npu.Stream(), torch.npu.Stream()
torch.npu.synchronize()
with torch.npu.stream(stream_a):
    graph_a.capture_begin(capture_error_mode="relaxed")
with torch.npu.stream(stream_b):
    graph_b.capture_begin(capture_error_mode="relaxed")  # both capture from here on
with torch.npu.stream(stream_a):
    d_a1.copy_(shared, non_blocking=True)
with torch.npu.stream(stream_b):
    d_b.copy_(shared, non_blocking=True)  # B's use, between A's two
with torch.npu.stream(stream_a):
    d_a2.copy_(shared, non_blocking=True)
with torch.npu.stream(stream_b):
    graph_b.capture_end()
with torch.npu.stream(stream_a):
    graph_a.capture_end()

graph_a.replay()
torch.npu.synchronize()
replay_a = values(d_a1) + values(d_a2)
del shared  # both graphs read it: its bytes stay until both have ended
graphs = [graph_a]
del graph_a
end_graphs(graphs, END)
torch_npu_pinpool.host_empty_cache()
others = [pinned(9.0) for _ in range(32)]  # same size: would land on a recycled buffer
graph_b.replay()
torch.npu.synchronize()
replay_b = values(d_b)
del others
graphs = [graph_b]
del graph_b
end_graphs(graphs, END)
torch.npu.synchronize()  # the fence recorded at B's end (Note [Replay fences]) completes
torch_npu_pinpool.host_empty_cache()
report(
    {"replay_a": replay_a, "replay_b": replay_b, "baseline": baseline, "held_after": held_bytes()}
)
