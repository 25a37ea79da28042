"""written_while_queued: vllm-ascend's races between host writes and queued work on pinned
buffers, and their fixes.

AUDIT_SHAPE:
  refill  a persistent pinned input array refilled for the next step right after its
          non_blocking H2D (vllm-ascend #12079 / #12630 query-start-loc, #16428 input arrays)
  table   a pinned block table rewritten for the next step while the previous graph replay that
          reads it is still queued (vllm-ascend #9727, FULL_DECODE_ONLY)
  bounce  a pinned bounce buffer the device writes (D2H), edited on the host after a
          synchronize, copied back (H2D) and overwritten while that copy is queued (a KV
          offload's swap buffer)
AUDIT_FIXED=1: the fix - an event recorded after the copy / replay, synchronized before the
rewrite. PINPOOL_DELAY_US: a simulator task delay that keeps the work queued (so the race is
certain; only on the simulated runtime). STEPS (4).

Reports what the device received each step (expected: the step number), the lines of the
allocation, the copy and the replay, the report's entries and how many reads it checked.
"""

import os

import torch
from _lib import simctl
from _lib.scenario import (
    checks_in_flight,
    env_int,
    hazards,
    report,
    report_checks,
    side_stream,
    site,
)

SHAPE = os.environ.get("AUDIT_SHAPE", "refill")
FIXED = os.environ.get("AUDIT_FIXED", "0") == "1"
STEPS = env_int("STEPS", 4)
N = 1024
if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))
side_stream()
received = torch.zeros(STEPS, N, device="npu")
done = torch.npu.Event()
d2h_in_flight = []  # bounce: the audit's checks in flight just after each D2H was enqueued
if SHAPE == "refill":
    host = torch.zeros(N).pin_memory()  # site: alloc-refill
    dev = torch.zeros(N, device="npu")
    torch.npu.synchronize()
    for step in range(STEPS):
        if FIXED and step:
            done.synchronize()  # the fix: the previous copy has read the array
        host.fill_(float(step))
        dev.copy_(host, non_blocking=True)  # site: copy
        done.record()
        received[step].copy_(dev)
elif SHAPE == "table":
    table = torch.zeros(N).pin_memory()  # site: alloc-table
    dev_table = torch.zeros(N, device="npu")
    out = torch.zeros(N, device="npu")
    torch.npu.synchronize()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        dev_table.copy_(table, non_blocking=True)
        out.copy_(dev_table)
    torch.npu.synchronize()
    for step in range(STEPS):
        if FIXED and step:
            done.synchronize()  # the fix: the previous replay has read the table
        table.fill_(float(step))
        g.replay()  # site: replay
        done.record()
        received[step].copy_(out)
elif SHAPE == "bounce":
    bounce = torch.zeros(N).pin_memory()  # site: alloc-bounce
    dev = torch.zeros(N, device="npu")
    zeros = torch.zeros(N, device="npu")
    torch.npu.synchronize()
    for step in range(STEPS):
        bounce.copy_(zeros, non_blocking=True)  # the device writes the buffer
        d2h_in_flight.append(checks_in_flight())  # with the write queued: a probe behind it?
        torch.npu.synchronize()
        bounce.add_(float(step))  # edited on the host
        dev.copy_(bounce, non_blocking=True)  # site: copy-bounce
        done.record()
        if FIXED:
            done.synchronize()  # the fix: the copy has read the buffer
        bounce.fill_(-1.0)
        received[step].copy_(dev)
        torch.npu.synchronize()  # the step ends before the device writes the buffer again
else:
    raise ValueError(f"AUDIT_SHAPE={SHAPE!r}")
torch.npu.synchronize()
if simctl.available():
    simctl.set_delay_us(0)
got = [sorted(set(row)) for row in received.cpu().tolist()]
report(
    {
        "received": got,
        "wrong_steps": [s for s, row in enumerate(got) if row != [float(s)]],
        "sites": {
            "alloc": site(f"alloc-{SHAPE}"),
            "copy": site("copy-bounce" if SHAPE == "bounce" else "copy"),
            "replay": site("replay"),
        },
        "hazards": hazards(),
        "checks": report_checks(),
        "d2h_in_flight": d2h_in_flight,
    }
)
