"""20 captures, each with a used 16 KiB pinned input; every other graph reset, every graph
garbage-collected. Reports the pinned bytes the host allocator still holds against the baseline
(``held_leaked``) and, on the simulator, the runtime's live pinned bytes (``leaked``: the truth
for every allocator)."""

import gc

import torch
from _lib import simctl
from _lib.scenario import held_bytes, pinned, pools, report, side_stream, values

import torch_npu_pinpool

side_stream()


def capture_once(i: int, n: int) -> tuple:
    g = torch.npu.NPUGraph()
    dev = torch.zeros(n, device="npu")
    with torch.npu.graph(g):
        x = pinned(i, n)
        dev.copy_(x, non_blocking=True)
        del x
    g.replay()
    return g, dev


# warm up the default pool and the runtime, then measure from a clean cache
g, dev = capture_once(0, 4096)
del g, dev
torch.npu.synchronize()
gc.collect()
torch_npu_pinpool.host_empty_cache()
base_held = held_bytes()
base = simctl.host_bytes() if simctl.available() else None
ok = True
for i in range(20):
    g, dev = capture_once(i, 4096)
    g.replay()
    torch.npu.synchronize()
    ok &= values(dev) == [float(i)]
    if i % 2:
        g.reset()
    del g  # garbage collection releases the pool too
    gc.collect()
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
out = {"ok": ok, "held_leaked": held_bytes() - base_held, "pools": pools()}
if base is not None:
    out["leaked"] = simctl.host_bytes() - base
report(out)
