"""Replay correctness with pinned inputs and outputs captured into a graph.

The hazard: a captured H2D/D2H copy keeps the host *address*; every replay reads or writes
the bytes there. If the allocator hands that block to a later ``pin_memory()``, replay reads
the new owner's bytes. Native torch_npu 2.10 recycles a block freed inside the capture;
native 2.10 and 2.13 both recycle a block pinned *before* the capture and freed inside it.
The same with two ``torch.accelerator.Graph`` sharing a pool, and with a mixed-dtype
``non_blocking`` H2D copy (issue #35; native's figures measured on 2.14 and 2.10).
Scenarios (runtime-neutral): test/scenarios/replay_recycle.py, accelerator_graph.py,
mixed_dtype_h2d.py.
"""

from __future__ import annotations

import pytest

from ._snippets import ON_OFF, env_for, native_measured, native_pools

KiB = 1024
ENDS = pytest.mark.parametrize("end", ["reset", "gc"])


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


@ON_OFF
@ENDS
def test_accelerator_graph_shared_pool(scenario, plugin, end):
    """Two ``torch.accelerator.Graph`` sharing a pool, one input pinned and freed inside its
    capture, one pinned before and freed inside: with the plugin both replays read their bytes
    and every block is back once the graphs are gone; natively (2.14) the second reads another
    owner's bytes (defect 3) and the first's block stays held (defect 1)."""
    r = scenario("accelerator_graph", env=env_for(plugin, GRAPH_END=end)).result
    if not r["available"]:
        pytest.skip("torch.accelerator.Graph does not capture on the NPU here (torch_npu < 2.13)")
    assert r["same_pool"] and r["first"] == [1.0], r
    if plugin:
        assert (r["second"], r["held_after"], r["pools"]) == ([2.0], 0, 0), r
    else:
        native_measured()
        assert r["second"] != [2.0] and r["held_after"] == 4 * KiB, r


@ON_OFF
@pytest.mark.parametrize("shape", ["inside", "before"])
def test_mixed_dtype_copy_freed_in_capture(scenario, plugin, shape):
    """float32 pinned -> float16 device, the source freed inside the capture: with the plugin the
    replay casts the source's bytes and nothing stays held. Natively (2.10: both shapes; 2.14: the
    source pinned before the capture) the replay reads the next owner's bytes, and on 2.14 the
    source pinned inside the capture stays held after the reset."""
    r = scenario("mixed_dtype_h2d", env=env_for(plugin, MIXED_SHAPE=shape)).result
    if "capture_error" in r:
        off = env_for(False, MIXED_SHAPE=shape)
        native = scenario("mixed_dtype_h2d", env=off).result if plugin else r
        assert "capture_error" in native, ("native torch_npu captures this copy", r, native)
        pytest.skip(f"this torch_npu build cannot capture the copy, plugin or not: {r}")
    right = [1.5] if shape == "inside" else [2.5]
    assert r["dtype"] == "torch.float16"
    if plugin:
        assert (r["values"], r["held_after"]) == (right, 0), r
        return
    native_measured()
    if native_pools() and shape == "inside":
        assert (r["values"], r["held_after"]) == (right, 4 * KiB), r
    else:
        assert r["values"] != right and r["held_after"] == 0, r
