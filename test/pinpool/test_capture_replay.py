"""Replay correctness with pinned inputs and outputs captured into a graph.

The hazard: a captured H2D/D2H copy keeps the host *address*; every replay reads or writes
the bytes there. If the allocator hands that block to a later ``pin_memory()``, replay reads
the new owner's bytes. Native torch_npu 2.10 recycles a block freed inside the capture;
native 2.10 and 2.13 both recycle a block pinned *before* the capture and freed inside it.
Scenario: test/scenarios/replay_recycle.py (runtime-neutral).
"""

from __future__ import annotations

from ._snippets import ON_OFF, env_for, native_pools


@ON_OFF
def test_replay_reads_captured_bytes(scenario, plugin):
    """Pinned inputs (made inside and before the capture) and a pinned output survive later
    ``pin_memory`` and ``host_empty_cache``. With the plugin off the recycled block is
    observed: (a) on 2.10, (b) on every pair."""
    o = scenario("replay_recycle", env=env_for(plugin)).result
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
