"""The user's allocator settings after the plugin activates, in each activation order (issue #47):
c10's settings string and the device allocator's behaviour must be what torch_npu alone gives.

Env: SETTINGS_ORDER = import_first (``import torch_npu_pinpool`` right after torch_npu) or
after_device (after the device allocator started, with a device allocation); with
TORCH_DEVICE_BACKEND_AUTOLOAD=1 torch's entry point activates the plugin at ``import torch``.
PYTORCH_NPU_ALLOC_CONF is the user's (set by the test). Imports in its own order, so it does not
use scenario.py (which activates the plugin at once).
"""

from __future__ import annotations

import os

import torch
import torch_npu  # noqa: F401
from _lib.result import report  # torch-free

ORDER = os.environ["SETTINGS_ORDER"]
MiB = 1 << 20


def c10_settings() -> str | None:
    get = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
    return None if get is None else get()


if ORDER == "import_first":
    import torch_npu_pinpool  # noqa: F401
first = torch.empty(MiB, dtype=torch.uint8, device="npu")  # the device allocator starts
if ORDER == "after_device":
    import torch_npu_pinpool  # noqa: F401
import torch_npu_pinpool  # noqa: E402  (a no-op if already imported)

out = {"active": torch_npu_pinpool.is_active(), "settings": c10_settings()}
pinned = torch.empty(40 * MiB, dtype=torch.uint8, pin_memory=True)  # the large path, if any
pinned.fill_(7)
big = torch.empty(256 * MiB, dtype=torch.uint8, device="npu")
big.copy_(pinned.repeat(7)[: 256 * MiB], non_blocking=True)
torch.npu.synchronize()
del big, pinned
stats = torch.npu.memory_stats()
out["settings_after_pins"] = c10_settings()
out["oversize_allocations"] = int(stats.get("oversize_allocations.allocated", -1))
out["oversize_segments"] = int(stats.get("oversize_segments.allocated", -1))
out["max_split_size"] = int(stats.get("max_split_size", -1))
report(out)
