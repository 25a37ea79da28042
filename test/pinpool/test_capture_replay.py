"""Replay correctness with pinned inputs and outputs captured into a graph.

The hazard: a captured H2D/D2H copy keeps the host *address*; every replay reads or writes
the bytes there. If the allocator hands that block to a later ``pin_memory()``, replay reads
the new owner's bytes. Native torch_npu 2.10 recycles a block freed inside the capture;
native 2.10 and 2.13 both recycle a block pinned *before* the capture and freed inside it.
"""

from __future__ import annotations

from ._snippets import ON_OFF, PRELUDE, env_for, native_pools

RECYCLE = r"""
torch.npu.set_stream(torch.npu.Stream())   # capture and replay on a side stream
out = {}
# (a) pinned inside the capture, freed inside it
dev_a = torch.zeros(N, device="npu")
# (b) pinned before the capture, read by it, freed inside it
early = pinned(2.0)
dev_b = torch.zeros(N, device="npu")
# (c) a pinned output (D2H), kept alive: replay must write it
dev_c = torch.full((N,), 5.0, device="npu")
torch.npu.synchronize()
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    src = pinned(1.0)
    dev_a.copy_(src, non_blocking=True)
    del src
    dev_b.copy_(early, non_blocking=True)
    del early
    host_out = torch.empty(N).pin_memory()
    host_out.copy_(dev_c, non_blocking=True)
torch.npu.synchronize()
# Later pinned allocations write other bytes, and the cache is emptied in between.
torch_npu.npu.host_empty_cache()
others = [pinned(9.0) for _ in range(8)]
host_out.fill_(0.0)
g.replay()
torch.npu.synchronize()
out["a"] = values(dev_a)
out["b"] = values(dev_b)
out["c"] = sorted(set(host_out.tolist()))
# A static pinned input rewritten between replays: each replay reads the current bytes.
static_in = pinned(0.0)
dev_s = torch.zeros(N, device="npu")
g2 = torch.npu.NPUGraph()
with torch.npu.graph(g2):
    dev_s.copy_(static_in, non_blocking=True)
seen = []
for k in (3.0, 4.0):
    static_in.fill_(k)
    g2.replay()
    torch.npu.synchronize()
    seen.append(values(dev_s))
out["static"] = seen
result = out
"""


@ON_OFF
def test_replay_reads_captured_bytes(run_isolated, plugin):
    """Pinned inputs (made inside and before the capture) and a pinned output survive later
    ``pin_memory`` and ``host_empty_cache``. With the plugin off the recycled block is
    observed: (a) on 2.10, (b) on every pair."""
    r = run_isolated(PRELUDE + RECYCLE, env=env_for(plugin))
    o = r.result
    assert o["static"] == [[3.0], [4.0]]
    assert o["c"] == [5.0], "the pinned D2H output was written by replay"
    if plugin:
        assert o["a"] == [1.0]
        assert o["b"] == [2.0]
    else:
        # The block went back to the cache (and on to the system): replay reads whatever
        # is there now - the next owner's bytes, or freed memory.
        assert o["b"] != [2.0], "native recycles a pre-capture block freed inside a capture"
        if not native_pools():
            assert o["a"] != [1.0], "native <= 2.10 recycles a block freed inside a capture"
