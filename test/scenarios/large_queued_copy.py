"""A large pinned block freed while a non_blocking H2D copy from it is still queued (issue #14).

Env: LARGE_BYTES (default 48 MiB), LARGE_EMPTY_CACHE=1 (also call host_empty_cache() right after
the free, before the copy ran), LARGE_CAPTURE_SIDE=1 (another stream captures a graph meanwhile).
The block must not be handed out (the next request of its size writes 7s into its first bytes)
nor given back before the copy ran. Run it with SIMCANN_TASK_DELAY_US (simctl.set_delay_us) so
the copy really is still queued. Reports the device bytes that arrived and the time the free +
the next allocation took on the caller's thread.
"""

import time

import torch
from _lib import simctl
from _lib.scenario import env_int, report

import torch_npu_pinpool

n = env_int("LARGE_BYTES", 48 << 20)
delay = env_int("LARGE_DELAY_US", 2000)
head = 1 << 16
dev = torch.zeros(n, dtype=torch.uint8, device="npu")
warm = torch.empty(n, dtype=torch.uint8, pin_memory=True)  # a cached block of this size
del warm
src = torch.empty(n, dtype=torch.uint8, pin_memory=True)
src[:head].fill_(1)
src[-head:].fill_(1)
torch.npu.synchronize()
if simctl.available():
    simctl.set_delay_us(delay)
graph = None
if env_int("LARGE_CAPTURE_SIDE", 0) == 1:
    side = torch.npu.Stream()
    small = torch.zeros(16, device="npu")
    graph = torch.npu.NPUGraph()
    with torch.npu.stream(side):
        graph.capture_begin()
        small.add_(1)
dev.copy_(src, non_blocking=True)
t0 = time.perf_counter()
src_ptr = src.data_ptr()
del src
if env_int("LARGE_EMPTY_CACHE", 0) == 1:
    torch_npu_pinpool.host_empty_cache()
nxt = torch.empty(n, dtype=torch.uint8, pin_memory=True)
nxt[:head].fill_(7)
nxt[-head:].fill_(7)
caller_us = (time.perf_counter() - t0) * 1e6
if graph is not None:
    with torch.npu.stream(side):
        graph.capture_end()
torch.npu.synchronize()
if simctl.available():
    simctl.set_delay_us(0)
report(
    {
        "values": sorted(set(dev[:head].cpu().tolist()) | set(dev[-head:].cpu().tolist())),
        "same_block": nxt.data_ptr() == src_ptr,
        "caller_us": caller_us,
        "violations": simctl.violations() if simctl.available() else None,
    }
)
