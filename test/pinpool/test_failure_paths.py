"""Misuse and runtime failures around capture leave no dangling registration, lose no block
and say what to do.

These check the plugin's own bookkeeping (``pool_stats()`` and the routing of later pinned
allocations), which does not exist with the plugin off, so they run with the plugin only;
the final "capture still works and replays correctly" step of each scenario is what would
break if a dangling registration were left behind. Scenarios: test/scenarios/user_errors.py
(runtime-neutral), runtime_faults.py (fault injection: simulator only).
"""

from __future__ import annotations

import pytest


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
