"""A correct graphed decode loop: persistent pinned input and output buffers, one graph per
round that copies the input in (H2D), computes, and copies the result out (D2H into pinned
memory); each step waits for the previous step's event before it rewrites the input or reads
the output. Every ROUND_STEPS steps the graph is recaptured into the same pool (the new graph
before the old one is reset, so the pool never loses its last graph). Nothing here is a hazard.

PINPOOL_DELAY_US: a simulator task delay that keeps the work queued (only on the simulated
runtime). Env: ROUNDS (3), ROUND_STEPS (4).
Reports the outputs that were wrong, the report's entries and how many reads it checked.
"""

import torch
from _lib import simctl
from _lib.scenario import env_int, hazards, report, report_checks, side_stream

ROUNDS = env_int("ROUNDS", 3)
ROUND_STEPS = env_int("ROUND_STEPS", 4)
N = 1024
if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))
side_stream()
host_in = torch.zeros(N).pin_memory()
host_out = torch.zeros(N).pin_memory()
dev_in = torch.zeros(N, device="npu")
dev_out = torch.zeros(N, device="npu")
pool = torch.npu.graph_pool_handle()
done = torch.npu.Event()
wrong = []
graph = None
torch.npu.synchronize()
for r in range(ROUNDS):
    new = torch.npu.NPUGraph()
    with torch.npu.graph(new, pool=pool):
        dev_in.copy_(host_in, non_blocking=True)
        torch.mul(dev_in, float(r + 2), out=dev_out)
        host_out.copy_(dev_out, non_blocking=True)
    if graph is not None:
        graph.reset()
    graph = new
    for k in range(ROUND_STEPS):
        step = r * ROUND_STEPS + k
        host_in.fill_(float(step))  # the previous step's event completed: nobody reads it
        graph.replay()
        done.record()
        done.synchronize()  # before reading the output and rewriting the input
        if not bool((host_out == float(step * (r + 2))).all()):
            wrong.append(step)
graph.reset()
if simctl.available():
    simctl.set_delay_us(0)
report({"wrong": wrong, "hazards": hazards(), "checks": report_checks()})
