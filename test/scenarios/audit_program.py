"""A user's program, for `python -m torch_npu_pinpool audit -- python audit_program.py WHAT
[STATUS]`: it imports torch and torch_npu only (never torch_npu_pinpool, nor the scenario
helpers), does WHAT, prints what its replays read and exits with STATUS (default 0).

WHAT:
  recycle  frees a pinned tensor inside a capture after a captured copy read it
  race     rewrites a graph's pinned input while its replay is still queued (the race is certain
           only when the runtime holds work back: SIMCANN_TASK_DELAY_US on the simulator)
  clean    keeps its pinned input alive and waits for each replay before rewriting it
"""

import sys

import torch
import torch_npu

# torch_npu 2.8.0.post2 / 2.9.0 have no host_empty_cache: there the plugin's (already active here,
# through the audit) asks the registered allocator the same.
host_empty_cache = getattr(torch_npu.npu, "host_empty_cache", None)
if host_empty_cache is None:
    from torch_npu_pinpool import host_empty_cache

WHAT = sys.argv[1]
N = 1024
torch.npu.set_device(0)
torch.npu.set_stream(torch.npu.Stream())
dev = torch.zeros(N, device="npu")
g = torch.npu.NPUGraph()
read = []
if WHAT == "recycle":
    h = torch.full((N,), 2.0).pin_memory()  # site: pin
    with torch.npu.graph(g):
        dev.copy_(h, non_blocking=True)
        del h
    host_empty_cache()
    others = [torch.full((N,), 9.0).pin_memory() for _ in range(8)]
    g.replay()
    torch.npu.synchronize()
    read.append(sorted(set(dev.cpu().tolist())))
else:
    x = torch.zeros(N).pin_memory()  # site: input
    with torch.npu.graph(g):
        dev.copy_(x, non_blocking=True)
    done = torch.npu.Event()
    results = torch.zeros(3, N, device="npu")
    for step in range(3):
        if WHAT == "clean" and step:
            done.synchronize()
        x.fill_(float(step))
        g.replay()  # site: replay
        done.record()
        results[step].copy_(dev)
    read = [sorted(set(row)) for row in results.cpu().tolist()]
print(f"read {read}", flush=True)
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
