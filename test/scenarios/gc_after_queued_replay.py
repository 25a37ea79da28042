"""A graph dropped by garbage collection (no ``reset()``) right after a replay that is still
queued behind earlier work on the same stream, while another thread keeps pinning junk and
calling host_empty_cache() (scenario.Churn). The C++ destructor of NPUGraph resets the graph
directly, so no Python method of the graph runs: only a finalizer can learn that it died, and
the blocks its queued replay reads may only come back once that replay has run.

The graph reads two pinned blocks: ``a`` pinned and freed inside the capture (a graph-pool
block), ``b`` pinned before the capture and dropped by the caller together with the graph (a
default-pool block the graph uses). Reports what the replay delivered for each, and the pinned
bytes held after one host_empty_cache() against the baseline.

Inputs: PINPOOL_DROP (``ref``: the last reference goes, then ``gc.collect()``; ``cycle``: the
graph sits in a reference cycle that ``gc.collect()`` on another thread frees, so the finalizer
runs there), PINPOOL_DELAY_US (simulator task delay, applied only where the simulator runs: keeps
the replay queued).
"""

import gc
import os
import threading

import torch
from _lib import simctl
from _lib.scenario import Churn, N, env_int, held_bytes, pinned, report, side_stream, values

import torch_npu_pinpool

DROP = os.environ.get("PINPOOL_DROP", "ref")
if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))


class Holder:
    """Keeps the graph in a reference cycle: only the cyclic collector frees it."""

    def __init__(self, graph: torch.npu.NPUGraph) -> None:
        self.graph = graph
        self.me = self


side_stream()
baseline = held_bytes()
dev_a = torch.zeros(N, device="npu")
dev_b = torch.zeros(N, device="npu")
early = pinned(5.0)
torch.npu.synchronize()
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    t = pinned(7.0)
    dev_a.copy_(t, non_blocking=True)
    del t
    dev_b.copy_(early, non_blocking=True)
torch.npu.synchronize()
holder = Holder(g) if DROP == "cycle" else None

dev_a.fill_(0.0)
dev_b.fill_(0.0)
for _ in range(20):  # work queued ahead of the replay on the same stream
    dev_a.add_(0.0)
with Churn():
    g.replay()
    del g, early  # the graph and the caller's input go while the replay is queued
    if DROP == "cycle":
        del holder
        collector = threading.Thread(target=gc.collect)
        collector.start()
        collector.join()
    else:
        gc.collect()
    torch.npu.synchronize()
result = {"a": values(dev_a), "b": values(dev_b)}
torch_npu_pinpool.host_empty_cache()
result.update(baseline=baseline, held_after=held_bytes())
if simctl.available():
    result["violations"] = simctl.violations()  # replay over memory given back
report(result)
