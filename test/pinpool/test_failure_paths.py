"""Misuse and runtime failures around capture leave no dangling registration, lose no block
and say what to do.

Most check the plugin's own bookkeeping (``pool_stats()`` and the routing of later pinned
allocations), which does not exist with the plugin off, so they run with the plugin only;
the final "capture still works and replays correctly" step of each scenario is what would
break if a dangling registration were left behind. A reset that raises and a fence event whose
record fails lose nothing either. Scenarios: test/scenarios/user_errors.py (runtime-neutral),
runtime_faults.py (fault injection: simulator only), failing_reset.py, record_fault_in_pass.py.
A capture that fails: test_failed_capture.py.
"""

from __future__ import annotations

import pytest

from ._snippets import ON_OFF, env_for


def test_user_errors(scenario):
    o = scenario("user_errors").result
    assert "default stream" in o["default_stream"] or "non-default" in o["default_stream"]
    assert o["after_default"] == []
    assert o["clean1"]
    assert o["wrong_stream"] and "same stream" in o["wrong_stream"]
    assert o["still_capturing"] == [True]
    assert o["retry_replay"] == [2.0]
    assert o["after_reset"] == []
    assert o["with_error"] == "user code failed"
    assert o["after_with"] == []
    assert o["clean2"]
    assert all(e and "wait must be a number of seconds" in e for e in o["report_wait"]), o


@pytest.mark.simulator
def test_runtime_faults(scenario):
    o = scenario("runtime_faults").result
    assert o["begin_failed"] and o["after_begin"] == [] and o["clean1"]
    assert o["end_failed"] and not o["capturing_after_end"]
    assert o["after_end"] == [] and o["clean2"]
    assert o["malloc_failed"] and o["after_malloc"] == [] and o["clean3"]


@ON_OFF
def test_failed_reset_keeps_the_graph_and_its_blocks(scenario, plugin):
    """NPUGraph.reset() that raises leaves a replayable graph: its input block stays its own
    (the replay reads the captured bytes); a reset that succeeds gives the blocks back."""
    o = scenario("failing_reset", env=env_for(plugin)).result
    assert o["reset_error"] == "injected: reset failed", o
    if plugin:
        assert o["values"] == [3.0] and o["pool_bytes"] == 0, o


@pytest.mark.simulator
def test_fence_record_that_fails_loses_nothing(scenario):
    """A dead graph's fence event whose record fails (507000) leaves the graph unfenced, its
    block held, for the next pass: host_empty_cache() then gives it back, and the next capture
    is correct. (Before: the exception unwound the pass and the graph was lost for good.)"""
    run = scenario("record_fault_in_pass", env={"TASK_QUEUE_ENABLE": "0"})
    assert "recording a fence event failed" in run.stderr  # the fault hit the fence
    o = run.result
    assert o["held_after_retry"] == 0 and o["clean_capture"], o
