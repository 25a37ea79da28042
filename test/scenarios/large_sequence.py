"""A sequence of eager pinned requests, each copied to the device (``non_blocking``), freed, and
the next one made: what the host allocator pins and holds along the way (csrc Note [Large
blocks]; issue #47). Run with the plugin and with ``TORCH_NPU_PINPOOL=0`` and compare.

Env: SEQ_SIZES, comma-separated sizes in bytes, requested in turn (``SEQ_ROUNDS`` times, default
1); SEQ_SYNC=1 synchronizes after each copy (else the copies stay queued, as in a loop that
never waits); SEQ_KEEP=K keeps the last K tensors alive (default 0: each freed before the next).
Reports per step the pinned bytes held (``host_memory_stats``: cached or in use) and the runtime
pins (``num_host_alloc``), their peaks, whether every copy delivered its bytes, and, on the
simulated runtime, the runtime's own counts (pinned bytes live, aclrtMallocHost calls).
"""

import os

import torch
from _lib import simctl
from _lib.scenario import report

import torch_npu_pinpool

sizes = [int(s) for s in os.environ["SEQ_SIZES"].split(",")]
rounds = int(os.environ.get("SEQ_ROUNDS", "1"))
sync = os.environ.get("SEQ_SYNC") == "1"
keep = int(os.environ.get("SEQ_KEEP", "0"))


def counts() -> dict:
    stats = torch_npu_pinpool.host_memory_stats()
    held_key = "allocated_bytes.current"  # torch >= 2.10's name
    if "active_bytes.current" not in stats:
        held_key = "reserved_bytes.current"
    out = {"held": int(stats.get(held_key, 0)), "pins": int(stats.get("num_host_alloc", 0))}
    if simctl.available():
        out["live"], out["runtime_pins"] = simctl.host_bytes(), simctl.host_pins()
    return out


dev = torch.empty(max(sizes), dtype=torch.uint8, device="npu")
stream = torch.npu.current_stream()
start = counts()
steps, kept, checks = [], [], []
for i in range(rounds * len(sizes)):
    n = sizes[i % len(sizes)]
    t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    value = i % 250 + 1
    t.fill_(value)
    dev[:n].copy_(t, non_blocking=True)
    checks.append((n, value))
    kept.append(t)
    del t
    kept = kept[len(kept) - keep :] if keep else []
    if sync:
        stream.synchronize()
        # The bytes that arrived: both ends of this copy.
        checks[-1] = (n, value, int(dev[0].item()), int(dev[n - 1].item()))
    now = counts()
    steps.append({k: now[k] - start[k] for k in now})
kept.clear()
torch.npu.synchronize()
if sync:
    delivered = all(c[2] == c[1] and c[3] == c[1] for c in checks)
else:  # the copies overwrote one another: the last one's bytes are there
    n, value = checks[-1]
    delivered = int(dev[0].item()) == value and int(dev[n - 1].item()) == value
peak = {k: max(s[k] for s in steps) for k in steps[0]}
report({"steps": steps, "peak": peak, "end": steps[-1], "delivered": delivered})
