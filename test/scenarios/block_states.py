"""Walks pinned blocks through every transition of the block-state diagram (docs/design.md,
Note [Block states] in csrc/core/pin_block.h), and at each step notes what a user relies
on: the bytes a replay or an eager copy delivers, the bytes held and in use
(torch_npu_pinpool.host_memory_stats()) and the plugin's pool_stats(); with the plugin on, also each
block's state (the debug binding _C.block_state). Nothing else runs: no state may change
between two steps but by the step itself (a pass runs only in host_memory_stats()).

Walks:
  pool      a block pinned inside a capture into a shared pool (a second graph keeps the pool
            alive): in_use -> graph_used -> graph_owned -> free (its pool's free list) ->
            in_use (the next capture into the pool takes it)
  default   a block pinned before a capture: in_use -> graph_used -> awaiting_copies (freed with
            an eager copy from it queued) -> graph_owned (the copy ran) -> free (ATen's free path)
  eager     graph_used -> in_use (its graph goes, its tensor lives) -> free; and in_use ->
            awaiting_copies (freed inside a capture after an eager copy) -> free
  large     a large block freed after an eager copy: in_use -> awaiting_copies -> free where
            the large path runs (torch >= 2.13), else in_use -> free (ATen's free path)
"""

from __future__ import annotations

import torch
from _lib.scenario import PLUGIN, held_bytes, in_use_bytes, pinned, report, side_stream, values

import torch_npu_pinpool

N = 1024
BYTES = 4 * N
LARGE = 40 << 20  # a large block (Note [Large blocks])
steps: list[dict] = []


def note(step: str, ptr: int, **facts) -> None:
    """One step: the block's state first (the stats below may run a pass), then the stats."""
    state = torch_npu_pinpool._C.block_state(ptr) if PLUGIN else None
    pools = torch_npu_pinpool._C.pool_stats() if PLUGIN else []
    steps.append(
        dict(
            facts,
            step=step,
            ptr=ptr,
            state=state,
            held=held_bytes(),
            in_use=in_use_bytes(),
            pool_held=sum(p["bytes_held"] for p in pools),
            pool_in_use=sum(p["bytes_in_use"] for p in pools),
        )
    )


def settle() -> None:
    """Lets queued work run, then a pass (host_memory_stats runs it), twice: a fence the first
    pass records (a stream's capture just ended, or a fence of dead graphs was in flight) has
    completed by the second."""
    for _ in range(2):
        torch.npu.synchronize()
        held_bytes()


side_stream()
pool = torch.npu.graph_pool_handle()
keeper = torch.npu.NPUGraph()  # keeps the shared pool alive throughout
with torch.npu.graph(keeper, pool=pool):
    torch.zeros(N, device="npu").add_(1.0)

# --- pool: in_use -> graph_used -> graph_owned -> free -> in_use
d = torch.zeros(N, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g, pool=pool):
    h = pinned(1.0)
    ptr = h.data_ptr()
    note("pool: pinned in capture", ptr)
    d.copy_(h, non_blocking=True)
    note("pool: captured copy", ptr)
    del h
note("pool: tensor freed", ptr)
h_other = pinned(7.0)  # must not get the block
g.replay()
torch.npu.synchronize()
note("pool: replayed", ptr, delivered=values(d))
g.reset()
settle()
note("pool: graph gone", ptr)
g2 = torch.npu.NPUGraph()
with torch.npu.graph(g2, pool=pool):
    h2 = pinned(3.0)
    note("pool: next capture pins", h2.data_ptr(), same_block=h2.data_ptr() == ptr)
    d.copy_(h2, non_blocking=True)
g2.replay()
torch.npu.synchronize()
note("pool: next graph replayed", h2.data_ptr(), delivered=values(d))
del h2, h_other
g2.reset()
settle()

# --- default: in_use -> graph_used -> awaiting_copies -> graph_owned -> free
d_eager = torch.zeros(N, device="npu")
h = pinned(2.0)
ptr = h.data_ptr()
note("default: pinned", ptr)
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    d.copy_(h, non_blocking=True)
note("default: captured copy", ptr)
d_eager.copy_(h, non_blocking=True)  # an eager copy from it, on the current stream
del h
note("default: tensor freed after an eager copy", ptr)
settle()
note("default: eager copy ran", ptr, delivered_eager=values(d_eager))
g.replay()
torch.npu.synchronize()
note("default: replayed", ptr, delivered=values(d))
g.reset()
settle()
note("default: graph gone", ptr)

# --- eager: graph_used -> in_use -> free; in_use -> awaiting_copies -> free
h = pinned(4.0)
ptr = h.data_ptr()
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    d.copy_(h, non_blocking=True)
note("eager: captured copy", ptr)
g.replay()
torch.npu.synchronize()
g.reset()
settle()
note("eager: graph gone, tensor alive", ptr, delivered=values(d))
del h
note("eager: tensor freed", ptr)
h = pinned(5.0)
ptr = h.data_ptr()
note("eager: pinned for a capture", ptr)
d_eager.copy_(h, non_blocking=True)
g = torch.npu.NPUGraph()
g.capture_begin()  # a capture underway: the free takes the slow path
d.add_(1.0)
del h
note("eager: freed in a capture after an eager copy", ptr)
g.capture_end()
settle()
note("eager: eager copy ran", ptr, delivered_eager=values(d_eager))
g.reset()

# --- large: in_use -> awaiting_copies -> free (Note [Large blocks]; torch >= 2.13, else a
# default-pool block: in_use -> free, ATen holding it until its copy's event completes)
big = torch.empty(LARGE, dtype=torch.uint8, pin_memory=True)
ptr = big.data_ptr()
big.fill_(6)
note("large: pinned", ptr)
d_big = torch.empty(LARGE, dtype=torch.uint8, device="npu")
d_big.copy_(big, non_blocking=True)
del big
note("large: freed after an eager copy", ptr)
settle()
note("large: eager copy ran", ptr, delivered_eager=values(d_big[-16:]))
report({"steps": steps, "block": BYTES})
