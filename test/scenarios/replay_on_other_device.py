"""A graph captured on device 1, replayed while device 0 is current, then ended (reset or
garbage collection) while the replay is still queued behind earlier work on device 1; another
thread keeps pinning junk and calling host_empty_cache(). The replay must read the graph's
bytes: its block may only come back once the replay, on device 1's stream, has run.

Needs two devices (reports {"skip": ...} otherwise). Inputs: PINPOOL_END (reset | gc),
PINPOOL_DELAY_US (simulator task delay: keeps the replay queued).
"""

import os

import torch
from _lib import simctl
from _lib.scenario import Churn, end_graphs, env_int, pinned, report, values

if torch.npu.device_count() < 2:
    report({"skip": f"needs 2 devices, found {torch.npu.device_count()}"})
    raise SystemExit(0)
END = os.environ.get("PINPOOL_END", "reset")
if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))

torch.npu.set_device(1)
dev = torch.zeros(1024, device="npu:1")
g = torch.npu.NPUGraph()
with torch.npu.graph(g, stream=torch.npu.Stream(device=1)):
    t = pinned(7.0)
    dev.copy_(t, non_blocking=True)
    del t
torch.npu.synchronize()

torch.npu.set_device(0)
with torch.npu.device(1):
    for _ in range(20):  # work queued ahead of the replay on device 1's current stream
        dev.add_(0.0)
dev.fill_(0.0)
with Churn():
    g.replay()  # device 0 is current; the replay runs on device 1's current stream
    graphs = [g]
    del g
    end_graphs(graphs, END)
    with torch.npu.device(1):
        torch.npu.synchronize()
result = {"replay": values(dev)}
if simctl.available():
    result["violations"] = simctl.violations()  # replay over memory given back
report(result)
