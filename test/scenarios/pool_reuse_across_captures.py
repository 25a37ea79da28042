"""A block pinned and freed unused inside one capture stays its pool's while the pool lives, and
the next capture into that pool reuses it, even across host_empty_cache() (which
torch.npu.graph calls on entering from torch_npu 2.11): pinning is the slowest thing an
allocator does, and frameworks capture dozens of batch sizes into one pool.
"""

import torch
from _lib.scenario import held_bytes, pinned, report, side_stream, values

import torch_npu_pinpool

side_stream()
pool = torch.npu.graph_pool_handle()
d1, d2 = torch.zeros(1024, device="npu"), torch.zeros(1024, device="npu")

g1 = torch.npu.NPUGraph()
with torch.npu.graph(g1, pool=pool):
    scratch = torch.empty(2048).pin_memory()  # freed unused inside the capture (8 KiB)
    first_scratch = scratch.data_ptr()
    del scratch
    a = pinned(1.0)
    d1.copy_(a, non_blocking=True)
    del a
before_empty = held_bytes()
torch_npu_pinpool.host_empty_cache()
after_empty = held_bytes()

g2 = torch.npu.NPUGraph()
with torch.npu.graph(g2, pool=pool):
    scratch = torch.empty(2048).pin_memory()
    second_scratch = scratch.data_ptr()
    del scratch
    b = pinned(2.0)
    d2.copy_(b, non_blocking=True)
    del b
g1.replay()
g2.replay()
report(
    {
        "kept_by_empty_cache": after_empty == before_empty,
        "held_before_after": [before_empty, after_empty],
        "reused": first_scratch == second_scratch,
        "d1": values(d1),
        "d2": values(d2),
    }
)
