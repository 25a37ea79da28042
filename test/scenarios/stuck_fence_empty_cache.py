"""host_empty_cache() with many dead graphs behind one stuck fence (issues #33, #47): it waits for
none of them (torch_npu's own only queries its events), and their blocks come back on a later
call once the fence completed.

Each of PINPOOL_GRAPHS graphs (default 8) copies its own pinned temporary, pinned and freed in
its capture. The graphs are replayed, then a slow task (the simulator's task delay, STUCK_S
seconds, default 14) is queued on their stream, and the graphs are reset while it runs: their
replay fences sit behind it.
Reports ``first_call_s`` (the host_empty_cache() behind the stuck fence), ``held_stuck`` and
``held_after`` (pinned bytes held then, and after the fence completed and another call),
``baseline`` and the values the replays delivered (``wrong``: graphs whose slot is wrong).
"""

import time

import torch
from _lib import simctl
from _lib.scenario import N, env_int, held_bytes, pinned, report, side_stream, values

import torch_npu_pinpool

K = env_int("PINPOOL_GRAPHS", 8)
STUCK_S = env_int("STUCK_S", 14)

stream = side_stream()
dev = [torch.zeros(N, device="npu") for _ in range(K)]
torch.npu.synchronize()
baseline = held_bytes()
graphs = []
for i in range(K):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, stream=stream):
        t = pinned(10.0 + i)
        dev[i].copy_(t, non_blocking=True)
        del t
    graphs.append(g)
torch.npu.synchronize()
for g in graphs:
    g.replay()
torch.npu.synchronize()
# The stuck task: the stream's worker sleeps STUCK_S before running it. Event records (the
# fences) take no delay, and nothing else is queued until the delay is lifted.
simctl.set_delay_us(STUCK_S * 1_000_000)
dev[0].add_(0.0)
for g in graphs:  # each reset waits for its replays (they ran); the fences queue behind
    g.reset()
graphs.clear()
start = time.monotonic()
torch_npu_pinpool.host_empty_cache()
first_call_s = time.monotonic() - start
held_stuck = held_bytes()
simctl.set_delay_us(0)
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
report(
    {
        "first_call_s": first_call_s,
        "held_stuck": held_stuck,
        "held_after": held_bytes(),
        "baseline": baseline,
        "wrong": [i for i, d in enumerate(dev) if values(d) != [10.0 + i]],
    }
)
