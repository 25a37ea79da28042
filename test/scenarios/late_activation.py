"""The plugin activated after torch_npu already pinned tensors: their non_blocking copies stay
protected (record_event is forwarded to native), and later pinned tensors are pinned.

On the simulator every stream task takes ``DELAY_US`` (default 2000) so the copies are still
queued when their sources are freed; a real NPU's copies are asynchronous by themselves.
"""

import torch
import torch_npu  # noqa: F401
from _lib import simctl

torch.npu.set_device(0)
N = 1024
early = [torch.full((N,), float(i)).pin_memory() for i in range(8)]  # native's tensors
from _lib.scenario import env_int, report, torch_npu_pinpool, values  # noqa: E402  activate late

if simctl.available():
    simctl.set_delay_us(env_int("DELAY_US", 2000))
devs = []
for t in early:
    d = torch.empty(N, device="npu")
    d.copy_(t, non_blocking=True)  # record_event forwarded to native
    devs.append(d)
del early, t  # freed to native
fresh = [torch.full((N,), -1.0).pin_memory() for _ in range(8)]
torch.npu.synchronize()
if simctl.available():
    simctl.set_delay_us(0)
report(
    {
        "active": torch_npu_pinpool.is_active(),
        "ok": all(values(d) == [float(i)] for i, d in enumerate(devs)),
        "fresh_pinned": all(t.is_pinned() for t in fresh),
    }
)
