"""One host pool shared by every graph (TorchAir's use_custom_pool, vllm-ascend's global pool):
graphs kept alive while cycles of four graphs, each with a pinned temporary, are captured,
replayed and dropped. The dropped graphs' blocks must come back to the pool (bytes stay flat) and
no replay may read another graph's bytes.

Inputs: PINPOOL_END (reset | gc), PINPOOL_KEPT (graphs kept alive, default 1), PINPOOL_SHARED=1
(the dropped graphs also read the first kept graph's pinned input: a block used by a kept and a
dropped graph), PINPOOL_DELAY_US (simulator task delay; needs the simulator), PINPOOL_CYCLES.
"""

import os

import torch
from _lib import simctl
from _lib.scenario import (
    end_graphs,
    env_int,
    held_bytes,
    pinned,
    pool_bytes,
    pools,
    report,
    side_stream,
    values,
)

import torch_npu_pinpool

END = os.environ.get("PINPOOL_END", "reset")
KEPT, CYCLES = env_int("PINPOOL_KEPT", 1), env_int("PINPOOL_CYCLES", 6)
SHARED, DELAY = env_int("PINPOOL_SHARED", 0), env_int("PINPOOL_DELAY_US", 0)
if DELAY:
    simctl.set_delay_us(DELAY)
side_stream()
pool = torch.npu.graph_pool_handle()


def capture(value: float, shared_input=None):
    """A graph in `pool` copying a pinned temporary holding `value` (and `shared_input`)."""
    g, dev, dev2 = torch.npu.NPUGraph(), torch.zeros(1024, device="npu"), None
    with torch.npu.graph(g, pool=pool):
        t = pinned(value)
        dev.copy_(t, non_blocking=True)
        del t
        if shared_input is not None:
            dev2 = torch.zeros(1024, device="npu")
            dev2.copy_(shared_input, non_blocking=True)
    return g, dev, dev2


def capture_kept(value: float):
    """A graph reading a static pinned input that the user keeps and rewrites."""
    g, dev = torch.npu.NPUGraph(), torch.zeros(1024, device="npu")
    with torch.npu.graph(g, pool=pool):
        static_in = pinned(value)
        dev.copy_(static_in, non_blocking=True)
    return (g, dev), static_in


def replay_kept(kept: list, shared_value: float) -> list:
    wrong = []
    for k, (g, dev) in enumerate(kept):
        g.replay()
        expected = shared_value if k == 0 else 100.0 + k
        if values(dev) != [expected]:
            wrong.append(f"kept graph {k}: {values(dev)} != {expected}")
    return wrong


kept, kept_inputs = zip(*[capture_kept(100.0 + k) for k in range(KEPT)])
kept, kept_inputs = list(kept), list(kept_inputs)

wrong, held, live, blocks = [], [], [], []
for cycle in range(CYCLES):
    shared_value = 200.0 + cycle
    kept_inputs[0].fill_(shared_value)  # the kept graph reads what the user wrote last
    graphs, checks = [], []
    for i in range(4):  # captured first, replayed after (one graph per batch size)
        value = 10.0 * cycle + i
        g, dev, dev2 = capture(value, kept_inputs[0] if SHARED else None)
        graphs.append(g)
        checks.append((i, value, dev, dev2))
    for g in graphs:
        g.replay()
    for i, value, dev, dev2 in checks:
        if values(dev) != [value]:
            wrong.append(f"cycle {cycle} graph {i}: {values(dev)} != {value}")
        if dev2 is not None and values(dev2) != [shared_value]:
            wrong.append(f"cycle {cycle} graph {i} shared input: {values(dev2)}")
    del g, dev, dev2, checks
    end_graphs(graphs, END)
    junk = [pinned(-1.0) for _ in range(4)]  # re-pinned memory with other bytes
    wrong += [f"cycle {cycle} {w}" for w in replay_kept(kept, shared_value)]
    del junk
    torch.npu.synchronize()
    torch_npu_pinpool.host_empty_cache()
    held.append(held_bytes())
    blocks.append(sum(p["blocks"] for p in pools()))
    if simctl.available():
        live.append(simctl.host_bytes())

result = {
    "wrong": wrong,
    "held": held,
    "pool_blocks": blocks,
    "live": live,
    "pool_bytes": pool_bytes(),
}
kept_graphs = [g for g, _ in kept]
kept.clear()
end_graphs(kept_graphs, END)
del kept_inputs
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
result["pool_bytes_after"] = pool_bytes()
report(result)
