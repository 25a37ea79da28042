"""Scenario: host_memory_stats() for a program that pins inside a capture (issue #33, item 7).
Runs with the plugin on or off (TORCH_NPU_PINPOOL=0); test_stats.py compares the two
runs key by key.

The sequence: an eager pinned tensor kept throughout; a capture that pins two tensors (one
read by a captured copy) and keeps them; a replay; the unused one freed while the graph lives;
the graph reset, the other freed, and host_empty_cache(). Snapshots after each step.
"""

from _lib.scenario import N, pinned, report, side_stream, torch

import torch_npu_pinpool

snapshots: dict[str, dict[str, float]] = {}


def snap(name: str) -> None:
    snapshots[name] = dict(torch_npu_pinpool.host_memory_stats())


side_stream()
dev = torch.zeros(4 * N, device="npu")
eager = pinned(1.0)  # 4 KiB, alive to the end
snap("start")

g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    x = pinned(2.0, 4 * N)  # 16 KiB, read by the captured copy
    dev.copy_(x, non_blocking=True)
    y = pinned(3.0, 2 * N)  # 8 KiB, pinned in the capture and not used by it
snap("captured")

g.replay()
torch.npu.synchronize()
snap("replayed")

del y  # the graph still lives
snap("freed")

g.reset()
del g, x
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
snap("emptied")

report(snapshots)
