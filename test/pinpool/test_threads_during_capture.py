"""Other threads while one thread captures a graph: their pinned allocations stay out of the
graph's pool, their copies are correct, and the replay reads the captured bytes. Scenario
(runtime-neutral): test/scenarios/threads_during_capture.py."""

from __future__ import annotations


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
