"""The audit report (TORCH_NPU_PINPOOL_REPORT, `python -m torch_npu_pinpool audit`): each hazard
kind counted with its bytes and the lines of the user's code (csrc/audit.h), vllm-ascend's races
between host writes and queued copies / replays reported and their fixes not, a correct graphed
decode loop reporting nothing, stderr untouched with the report off.

Scenarios: test/scenarios/audit_*.py. Where a race has to be certain, the simulator's task delay
keeps the work queued (marker `simulator`); without it the same scenarios run as a real NPU sees
them, where only what holds at any timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ._snippets import env_for, native_pools, pair

REPORT = {"TORCH_NPU_PINPOOL_REPORT": "1"}
KINDS = [
    "recycled_by_native",
    "leaked_by_native",
    "released_pool_recapture",
    "pageable_copy_in_capture",
    "written_while_queued",
]
DELAY_US = "200000"  # keeps a copy queued far longer than the host takes to rewrite its bytes
SLOW = pytest.mark.simulator  # the task delay is the simulator's
SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios")


def _only(hazards: dict, kind: str) -> dict:
    """The entry of `kind`; every other kind counted nothing."""
    assert [h["kind"] for h in hazards.values()] == KINDS, "every kind is listed, in order"
    others = {k: h["count"] for k, h in hazards.items() if k != kind and h["count"]}
    assert others == {}, others
    return hazards[kind]


@pytest.mark.parametrize(
    "shape", ["before_freed_in_capture", "pinned_in_capture", "before_freed_after"]
)
def test_recycled_by_native(scenario, shape):
    """A block a captured copy reads, freed while its graph lives: the replay still reads the
    captured bytes, and the report counts one recycled block of 4096 B at its pin_memory()."""
    o = scenario("audit_recycled_by_native", env=dict(REPORT, AUDIT_SHAPE=shape)).result
    assert o["replay"] == [2.0]
    h = _only(o["hazards"], "recycled_by_native")
    assert (h["count"], h["bytes"], h["sites"]) == (1, 4096, [o["pin_site"]])
    native = {
        "before_freed_in_capture": "pinned before the capture, freed inside it",
        "pinned_in_capture": "pinned inside the capture",
        "before_freed_after": "pinned before the capture, freed after it",
    }[shape]
    assert h["affects"].startswith(native + ": torch_npu 2.8-"), h["affects"]


@pytest.mark.parametrize(
    "shape", ["before_freed_in_capture", "pinned_in_capture", "before_freed_after"]
)
def test_recycled_by_native_is_what_native_does(scenario, shape):
    """The same programs without the plugin: where the report's `affects` says this torch_npu
    recycles the block, the replay reads another owner's bytes (or freed memory)."""
    o = scenario("audit_recycled_by_native", env=env_for(False, AUDIT_SHAPE=shape)).result
    if shape == "pinned_in_capture" and native_pools():
        assert o["replay"] == [2.0], "torch_npu >= 2.11 keeps a capture-time block"
    else:
        assert o["replay"] != [2.0], "native hands the block to the next pin_memory()"


def test_leaked_by_native(scenario):
    """Three capture-time blocks a stream used, given back once their graphs were reset."""
    o = scenario("audit_leaked_by_native", env=REPORT).result
    assert o["held_after"] == o["held_before"], "the plugin gives them back"
    h = _only(o["hazards"], "leaked_by_native")
    assert (h["count"], h["bytes"], h["sites"]) == (3, 3 * 4096, [o["pin_site"]])
    assert "torch_npu 2.11-" in h["affects"]


def test_leaked_by_native_is_what_native_does(scenario):
    o = scenario("audit_leaked_by_native", env=env_for(False)).result
    if native_pools():
        assert o["held_after"] >= o["held_before"] + 3 * 4096, "native >= 2.11 keeps them"
    else:
        assert o["held_after"] == o["held_before"]


def test_released_pool_recapture(scenario):
    o = scenario("audit_released_pool_recapture", env=REPORT).result
    assert "error" not in o, o
    assert (o["first"], o["second"]) == ([1.0], [2.0])
    h = _only(o["hazards"], "released_pool_recapture")
    assert (h["count"], h["bytes"], h["sites"]) == (1, 0, [o["recapture_site"]])


def test_released_pool_recapture_is_what_native_does(scenario):
    o = scenario("audit_released_pool_recapture", env=env_for(False)).result
    if native_pools():
        assert "use_count" in o.get("error", ""), o
    else:
        assert o.get("second") == [2.0], o


@pytest.mark.skipif(pair() < (2, 10), reason="the pageable-copy guard needs torch >= 2.10")
def test_pageable_copy_in_capture(scenario):
    o = scenario("audit_pageable_copy_in_capture", env=REPORT).result
    assert "pageable (not pinned) CPU tensor" in o["error"]
    h = _only(o["hazards"], "pageable_copy_in_capture")
    assert (h["count"], h["bytes"], h["sites"]) == (1, 4096, [o["copy_site"]])


DELAYS = pytest.mark.parametrize(
    "delay", [pytest.param("0", id="delay0"), pytest.param(DELAY_US, id="queued", marks=SLOW)]
)


@DELAYS
@pytest.mark.parametrize("shape", ["refill", "table"])
def test_written_while_queued(scenario, shape, delay):
    """vllm-ascend's races. With the work held in the queue (the race certain) the device gets
    the rewritten bytes, and the report counts every step whose bytes changed before the
    device had read them (all but the last), naming the copy or replay and the allocation.
    Without the delay the program is just as wrong, but whether the device loses depends on
    timing: what is counted must still be told right."""
    env = dict(REPORT, AUDIT_SHAPE=shape, PINPOOL_DELAY_US=delay)
    o = scenario("audit_written_while_queued", env=env).result
    h = _only(o["hazards"], "written_while_queued")
    enqueued = o["sites"]["copy" if shape == "refill" else "replay"]
    if delay != "0":
        assert o["wrong_steps"] == [0, 1, 2], "the delay makes the race certain"
        assert h["count"] == 3
    if h["count"]:
        assert h["bytes"] == 4096 * h["count"]
        assert h["sites"] == [enqueued, o["sites"]["alloc"]]
    checks = o["checks"]
    assert checks["copies" if shape == "refill" else "replays"] + checks["unchecked"] == 4


@DELAYS
@pytest.mark.parametrize("shape", ["refill", "table"])
def test_fixed_races_report_nothing(scenario, shape, delay):
    """The fixes (an event guard before the rewrite) report nothing, the work queued or not,
    although every copy / replay was compared at its completion."""
    env = dict(REPORT, AUDIT_SHAPE=shape, AUDIT_FIXED="1", PINPOOL_DELAY_US=delay, STEPS="4")
    o = scenario("audit_written_while_queued", env=env).result
    assert o["wrong_steps"] == []
    assert all(h["count"] == 0 for h in o["hazards"].values()), o["hazards"]
    assert o["checks"]["copies" if shape == "refill" else "replays"] == 4
    assert o["checks"]["unchecked"] == 0


@DELAYS
def test_clean_decode_loop_reports_nothing(scenario, delay):
    """Persistent pinned input and output, event-guarded, recaptured into one pool 3 times."""
    env = dict(REPORT, PINPOOL_DELAY_US=delay)
    o = scenario("audit_clean_decode", env=env).result
    assert o["wrong"] == []
    assert all(h["count"] == 0 for h in o["hazards"].values()), o["hazards"]
    assert o["checks"]["replays"] == 12


def test_report_off_leaves_stderr_unchanged(scenario):
    """TORCH_NPU_PINPOOL_REPORT unset: not a byte on stderr; set: the report at exit."""
    env = {"TORCH_NPU_PINPOOL_REPORT": ""}
    off = scenario("audit_clean_decode", env=env)
    assert off.stderr == ""
    assert off.result["hazards"] == {}
    on = scenario("audit_clean_decode", env=REPORT)
    assert "torch_npu_pinpool report (pid" in on.stderr
    assert "no hazard seen" in on.stderr
