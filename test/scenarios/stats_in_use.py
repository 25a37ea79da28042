"""host_memory_stats()'s in-use bytes while a 16 KiB pinned block is in use and after it,
freed with a copy event pending, returns to the cache."""

import torch
from _lib.scenario import in_use_bytes, pinned, report, side_stream

import torch_npu_pinpool

side_stream()
before = in_use_bytes()
x = pinned(1.0, 4096)  # 16 KiB
dev = torch.zeros(4096, device="npu")
dev.copy_(x, non_blocking=True)  # records an event on the block
during = in_use_bytes() - before
del x  # freed with an event pending
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()  # the completed event hands the block back
report({"during": during, "after": in_use_bytes() - before})
