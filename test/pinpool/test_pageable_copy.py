"""A copy between a pageable (not pinned) CPU tensor and the NPU inside graph capture fails with
an error that names the side, the capture and the fix, before anything is enqueued: the capture
can be ended, the graph reset, and the process goes on (eager work, a correct capture, replay).
Scenario: test/scenarios/pageable_copy.py. Guard: csrc/copy/pageable_copy_guard.cpp.

Plugin off shows torch_npu's own failure: "The Inner error is reported as above. The process
exits for this inner error, ... kind=1" (non_blocking) or "aclrtMemcpy, error code is 107030"
(blocking), which name neither the tensor nor the fix.
"""

from __future__ import annotations

import pytest

from ._snippets import pair

# (how, blocking, side the error must name). to_cpu non_blocking pins its destination itself
# (torch_npu), so only the blocking form copies into pageable memory.
CASES = [
    ("copy_h2d", "0", "source"),
    ("copy_h2d", "1", "source"),
    ("copy_d2h", "0", "destination"),
    ("to_npu", "0", "source"),
    ("to_cpu", "1", "destination"),
]


@pytest.mark.parametrize("how,blocking,side", CASES)
def test_pageable_copy_in_capture_is_refused_clearly(scenario, how, blocking, side):
    o = scenario("pageable_copy", env={"COPY_HOW": how, "COPY_BLOCKING": blocking}).result
    error = o["error"]
    assert error is not None, "the copy must not be captured"
    assert o["reset"] is True
    assert not any(o["capturing"]), "a capture registration was left behind"
    if pair() < (2, 10):
        # docs/limitations.md: the guard needs torch >= 2.10; on 2.8 / 2.9 torch_npu's own error
        # stays (and after the non_blocking form the failed capture is in some runs still
        # active, so work after it fails).
        assert ".pin_memory()" not in error
        return
    assert "pageable (not pinned) CPU tensor" in error
    assert f"the copy's {side}" in error
    assert "capturing an ACLGraph" in error
    assert ".pin_memory()" in error and "pin_memory=True" in error
    assert "after_error" not in o, f"work after the refusal failed: {o['after_error']}"
    assert o["eager"] == [2.0], "eager NPU work after the refusal must run"
    assert o["replayed"] == [5.0], "a correct capture after the refusal must replay"


@pytest.mark.parametrize("how,blocking,side", CASES[:3])
def test_native_error_names_no_fix(scenario, how, blocking, side):
    """torch_npu alone also refuses the copy, but its error names neither side nor fix."""
    o = scenario(
        "pageable_copy",
        env={"COPY_HOW": how, "COPY_BLOCKING": blocking, "TORCH_NPU_PINPOOL": "0"},
    ).result
    assert o["error"] is not None
    assert "pin_memory" not in o["error"]
    assert o["reset"] is True
