"""Eager non_blocking H2D copies from pinned sources freed at once, and D2H copies into pinned
buffers: every copy sees its own bytes. On the simulator each stream task takes ``DELAY_US``
(default 3000) so the copies are still queued while the host runs on; a real NPU's copies are
asynchronous by themselves."""

import torch
from _lib import simctl
from _lib.scenario import N, env_int, pinned, report, side_stream, values

side_stream()
if simctl.available():
    simctl.set_delay_us(env_int("DELAY_US", 3000))
devs = []
for i in range(40):
    src = pinned(i)
    d = torch.empty(N, device="npu")
    d.copy_(src, non_blocking=True)  # H2D, queued behind the previous ones
    del src  # freed at once; the next pin_memory must not reuse it
    devs.append(d)
back = []
for d in devs[:10]:  # D2H into pinned buffers that are freed at once
    h = torch.empty(N).pin_memory()
    h.copy_(d, non_blocking=True)
    back.append(h)
torch.npu.synchronize()
if simctl.available():
    simctl.set_delay_us(0)
report(
    {
        "h2d_ok": all(values(d) == [float(i)] for i, d in enumerate(devs)),
        "d2h_ok": all(values(h) == [float(i)] for i, h in enumerate(back)),
    }
)
