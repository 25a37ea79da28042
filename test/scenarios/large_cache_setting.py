"""When ``TORCH_NPU_PINPOOL_LARGE_CACHE_MB`` is read (docs/configuration.md): not at activation,
but at the first large request no cached block serves. Run with a value that is not a number:
activation and a small pin work, the first large pin raises naming the variable.

Reports: active, whether a 4 KiB pin worked, and the error of a 48 MiB pin ("" if none).
"""

import torch
from _lib.scenario import report

import torch_npu_pinpool

out = {"active": torch_npu_pinpool.is_active()}
small = torch.empty(4096, dtype=torch.uint8, pin_memory=True)
out["small_pinned"] = small.is_pinned()
try:
    large = torch.empty(48 << 20, dtype=torch.uint8, pin_memory=True)
    out["large_error"] = ""
except RuntimeError as e:
    out["large_error"] = str(e).splitlines()[0]
report(out)
