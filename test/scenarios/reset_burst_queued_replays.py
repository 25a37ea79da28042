"""Many graphs of one pool reset one after another while their replays are still queued (a
serving engine dropping its batch-size graphs), another thread pinning junk and calling
host_empty_cache() meanwhile (scenario.Churn). Every graph reads one shared pinned buffer pinned
before the captures (``shared``, 5) and stages its own pinned temporary, pinned and freed in its
capture (``own``, 10 + i), into its own device slot; the caller drops the shared buffer with the
graphs. The graphs that die while an earlier graph's replay fence is still in flight share the
next fence (Note [Replay fences]): none of their blocks may come back before their replays ran.
With PINPOOL_REPLAY_AGAIN=1 the first half dies and its fence completes; then the second half
replays again (into cleared slots, behind queued work) and dies: that completed fence precedes
those replays, so it may not cover the second half (Note [Shared fences]).

Reports what the replays delivered (``shared``: the values in the shared slot; ``own``: the
graphs whose own slot is wrong), the pinned bytes held after one host_empty_cache() against the
baseline, and with PINPOOL_REPLAY_AGAIN=1 whether the second replays were still queued after the
second resets and one host_empty_cache() (``queued``) and the bytes the plugin's graph pools held
then (``held_while_queued``). Inputs: PINPOOL_GRAPHS (default 16), PINPOOL_DELAY_US (simulator
task delay, applied only where the simulator runs: keeps the replays queued), GRAPH_API
(``npu_graph``, default, or ``accelerator``: torch.accelerator.Graph, torch >= 2.13; reports
``available`` False and nothing else where torch has none).
"""

import os

import torch
from _lib import simctl
from _lib.scenario import (
    Churn,
    N,
    accelerator_graph_available,
    env_int,
    held_bytes,
    pinned,
    report,
    side_stream,
    values,
)

import torch_npu_pinpool

K = env_int("PINPOOL_GRAPHS", 16)
AGAIN = env_int("PINPOOL_REPLAY_AGAIN", 0)
API = os.environ.get("GRAPH_API", "npu_graph")
if API == "accelerator" and not accelerator_graph_available():
    report({"available": False})
    raise SystemExit(0)
if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))

side_stream()
baseline = held_bytes()
pool = torch.npu.graph_pool_handle()
shared = pinned(5.0)
dev_shared = torch.zeros(N, device="npu")
dev_own = [torch.zeros(N, device="npu") for _ in range(K)]
graphs = []
for i in range(K):
    g = torch.accelerator.Graph(pool=pool) if API == "accelerator" else torch.npu.NPUGraph()
    with g if API == "accelerator" else torch.npu.graph(g, pool=pool):
        dev_shared.copy_(shared, non_blocking=True)
        t = pinned(10.0 + i)
        dev_own[i].copy_(t, non_blocking=True)
        del t
    graphs.append(g)
torch.npu.synchronize()
dev_shared.fill_(0.0)
for d in dev_own:
    d.fill_(0.0)
for _ in range(20):  # work queued ahead of the replays on the same stream
    dev_shared.add_(0.0)
with Churn():
    for g in graphs:
        g.replay()
    dying = graphs[: K // 2] if AGAIN else graphs
    for g in dying:  # a burst of deaths with every replay still queued
        g.reset()
    if AGAIN:  # their fence completes and is retired; the others replay again behind work
        torch.npu.synchronize()
        torch_npu_pinpool.host_empty_cache()
        for d in dev_own[K // 2 :]:
            d.fill_(0.0)
        for _ in range(20):
            dev_shared.add_(0.0)
        for g in graphs[K // 2 :]:
            g.replay()
        for g in graphs[K // 2 :]:
            g.reset()
        torch_npu_pinpool.host_empty_cache()  # unpins what came back early under the replays
        queued = not torch.npu.current_stream().query()
        held_while_queued = sum(p["bytes_held"] for p in torch_npu_pinpool.pool_stats())
    del g, shared
    graphs.clear()
    torch.npu.synchronize()
result = {
    "available": True,
    "queued": queued if AGAIN else None,  # the second replays, after the second resets
    "held_while_queued": held_while_queued if AGAIN else None,  # by the plugin's graph pools
    "shared": values(dev_shared),
    "own": [i for i, d in enumerate(dev_own) if values(d) != [10.0 + i]],
}
torch_npu_pinpool.host_empty_cache()
result.update(baseline=baseline, held_after=held_bytes())
if simctl.available():
    result["violations"] = simctl.violations()  # replay over memory given back
report(result)
