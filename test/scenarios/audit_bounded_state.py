"""The audit's own record over a long copy loop (csrc/audit/audit.cpp, Note [Bounded audit
state]): COPIES (10^6) eager non_blocking H2D copies, each from a pinned tensor pinned for it
and freed after it (a window of WINDOW (8) live ones), the pinned cache emptied every EMPTY_EVERY
(5000) copies so that fresh blocks keep coming, and a synchronize every SYNC_EVERY (64) copies,
as a serving step would. Run with TORCH_NPU_PINPOOL_REPORT=1.

Reports the audit's sizes (torch_npu_pinpool._ext.audit_sizes()) and the process's RSS at
CHECKPOINTS (10) evenly spaced points, the sizes once every tensor is freed and every copy ran,
and how many copies the audit compared.
"""

import time

import torch
from _lib.scenario import env_int, report, report_checks

import torch_npu_pinpool

COPIES = env_int("COPIES", 1_000_000)
WINDOW = env_int("WINDOW", 8)
EMPTY_EVERY = env_int("EMPTY_EVERY", 5000)
SYNC_EVERY = env_int("SYNC_EVERY", 64)
CHECKPOINTS = 10
N = 64  # float32 elements per copy: 256 B


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


dev = torch.zeros(N, device="npu")
live = []
points = []
start = time.monotonic()
for i in range(COPIES):
    host = torch.full((N,), float(i % 7)).pin_memory()
    dev.copy_(host, non_blocking=True)
    live.append(host)
    if len(live) > WINDOW:
        live.pop(0)
    if i % SYNC_EVERY == SYNC_EVERY - 1:
        torch.npu.synchronize()
    if i % EMPTY_EVERY == EMPTY_EVERY - 1:
        torch_npu_pinpool.host_empty_cache()
    if (i + 1) % max(COPIES // CHECKPOINTS, 1) == 0:
        points.append(dict(torch_npu_pinpool._ext.audit_sizes(), copies=i + 1, rss_kib=rss_kib()))
elapsed = time.monotonic() - start
live.clear()
host = None
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
report(
    {
        "points": points,
        "after": torch_npu_pinpool._ext.audit_sizes(),
        "checks": report_checks(),
        "seconds": round(elapsed, 1),
    }
)
