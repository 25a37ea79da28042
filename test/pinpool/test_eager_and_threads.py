"""Eager non_blocking copies stay as safe as with torch_npu's own allocator, also while
another thread captures a graph. Scenarios (runtime-neutral): test/scenarios/
eager_async_copies.py (on the simulator it adds a 3 ms task delay so copies stay queued),
threads_during_capture.py."""

from __future__ import annotations

from ._snippets import ON_OFF, env_for


@ON_OFF
def test_eager_async_copies_never_see_recycled_bytes(scenario, plugin):
    """Cannot fail with the plugin off: native torch_npu is safe here, and that is the bar.
    (An allocator taking memory from aclrtMallocHost itself fails it: torch_npu then never
    calls its record_event.)"""
    r = scenario("eager_async_copies", env=env_for(plugin))
    assert r.result == {"h2d_ok": True, "d2h_ok": True}


def test_other_threads_during_capture(scenario):
    """A second thread pins and copies eagerly on its own stream while the main thread
    captures: its allocations stay in the default pool (the graph pool holds exactly the
    capture's block), its copies are correct, and replay reads the captured bytes. Plugin
    only: the pool accounting is the plugin's; the replay assertion is the native defect
    covered in test_capture_replay.py."""
    o = scenario("threads_during_capture").result
    assert o["errors"] == []
    assert o["worker_ok"] == [True]
    assert o["pool_blocks"] == [1]
    assert o["replay"] == [1.0]
