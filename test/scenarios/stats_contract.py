"""Scenario: one fixed sequence of pinned-memory calls, with host_memory_stats() read after each
step. Runs with the plugin on or off (TORCH_NPU_PINPOOL=0); test_stats.py compares the
two runs key by key.

The sequence: pinned allocations of two sizes; a free while a non_blocking copy still reads the
block (pending event, STATS_DELAY_US of simulated task time when the simulator is there) and a
free with no copy; host_empty_cache(); a cached block handed out again; a new allocation;
reset_accumulated_host_memory_stats(); reset_peak_host_memory_stats(); host_empty_cache().
"""

from _lib.scenario import N, env_int, pinned, report, side_stream, torch
from _lib.simctl import available, set_delay_us

import torch_npu_pinpool

snapshots: dict[str, dict[str, float]] = {}


def snap(name: str) -> None:
    snapshots[name] = dict(torch_npu_pinpool.host_memory_stats())


if available():
    set_delay_us(env_int("STATS_DELAY_US", 2000))
side_stream()
dev = torch.zeros(N, device="npu")
snap("start")

a = pinned(1.0)  # 4 KiB
b = pinned(2.0, 4 * N)  # 16 KiB
snap("allocated")

dev.copy_(a, non_blocking=True)  # a's block now has a pending event
del a
del b  # no copy: straight back to the free list
snap("freed")

torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
snap("emptied")

c = pinned(3.0)  # a fresh allocation again (the cache was emptied)
d = pinned(4.0)
del d
e = pinned(5.0)  # reuses d's cached block
snap("reused")

torch_npu_pinpool.reset_accumulated_host_memory_stats()
snap("reset_accumulated")

del c, e
torch_npu_pinpool.reset_peak_host_memory_stats()
snap("reset_peak")

torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
snap("end")

report(snapshots)
