"""A capture that fails (issue #35; docs/problem.md, "A capture that fails"): a synchronize the
runtime refuses inside the capture, or a side stream never joined back (capture_end fails), with
``torch.npu.NPUGraph`` and ``torch.accelerator.Graph``. Plugin on: once the failed graph is gone
every pinned block is back, and a later capture into the same pool handle replays its own bytes;
plugin off: what native torch_npu keeps, as measured on the simulated runtime (2.14.0 and
2.10.0.post7; on other pairs only the plugin's side is asserted); and what the audit report names.
Scenario (runtime-neutral, no simulator state): test/scenarios/failed_capture.py.
"""

from __future__ import annotations

import pytest

from ._snippets import env_for, native_measured, native_pools, pair, skip_without_audit

KiB = 1024
REPORT = {"TORCH_NPU_PINPOOL_REPORT": "1"}


# device_sync / stream_sync: the runtime refuses the synchronize (107027) and the capture goes on,
# so the `with` block raises but capture_end succeeds (the graph replays). unjoined: a side stream
# is never joined back, capture_end fails (107025) and the graph cannot replay.
HOWS = pytest.mark.parametrize("how", ["device_sync", "stream_sync", "unjoined"])
ENDS = pytest.mark.parametrize("end", ["reset", "gc"])
APIS = pytest.mark.parametrize("api", ["npu_graph", "accelerator"])
NOT_CAPTURED = "without a preceding successful capture"
# torch_npu 2.10's and 2.11's *device* caching allocator: a failed capture_end leaves the pool
# recording, so the next capture into the same pool id fails, plugin or not (the host side is the
# plugin's; 2.11's capture_end checks the runtime's answer before it ends the pool, docs/matrix.md;
# 2.12 ends it first). Its words differ by build: 2.10.0.post7 and 2.11.0.post3 "already recording
# to mempool_id", 2.10.0.post6 an INTERNAL ASSERT on captures_underway.empty()
# (NPUCachingAllocator.cpp).
STILL_RECORDING = ("already recording to mempool_id", "captures_underway.empty()")
DEVICE_POOL_LEFT_RECORDING = pair() <= (2, 11)


def _still_recording(r: dict) -> bool:
    return any(words in r.get("second_error", "") for words in STILL_RECORDING)


def _failed(
    scenario, plugin: bool, how: str, end: str, api: str = "npu_graph", **extra: str
) -> dict:
    env = env_for(plugin, FAIL_HOW=how, FAIL_END=end, FAIL_API=api, **extra)
    r = scenario("failed_capture", env=env).result
    if not r["available"]:
        pytest.skip("torch.accelerator.Graph does not capture on the NPU here (torch_npu < 2.13)")
    assert r["error"], "the capture raised"
    if how == "unjoined":
        assert NOT_CAPTURED in r["first"], r
    else:
        assert r["first"] == [1.0], "capture_end succeeded: the failed graph replays"
    return r


@APIS
@HOWS
@ENDS
def test_failed_capture_gives_every_block_back(scenario, api, how, end):
    """Plugin on: once the failed graph is gone every pinned block is back (12 KiB pinned in it),
    and a capture into the same pool handle afterwards replays its own bytes."""
    r = _failed(scenario, True, how, end, api)
    assert (r["held_after"], r["held_end"], r["pools"]) == (0, 0, 0), r
    if how == "unjoined" and DEVICE_POOL_LEFT_RECORDING:
        assert _still_recording(r), r
    else:
        assert r.get("second") == [2.0], r


@APIS
@HOWS
@ENDS
def test_failed_capture_is_what_native_does(scenario, api, how, end):
    """Plugin off, as measured. torch_npu 2.14 keeps the block a stream used (4 KiB) after an
    illegal synchronize and then cannot capture into that pool id again (use_count > 0); after a
    failed capture_end it keeps the whole pool for good (4 + 8 KiB, then the later capture's
    4 KiB too). torch_npu 2.10 keeps nothing but hands the later capture's freed input to the
    next pin_memory()."""
    native_measured()
    r = _failed(scenario, False, how, end, api)
    if native_pools() and how == "unjoined":
        assert (r["held_after"], r["held_end"]) == (12 * KiB, 16 * KiB), r
        assert r.get("second") == [2.0], r
    elif native_pools():
        assert (r["held_after"], r["held_end"]) == (4 * KiB, 4 * KiB), r
        assert "use_count > 0" in r.get("second_error", ""), r
    elif how == "unjoined":
        assert (r["held_after"], r["held_end"]) == (0, 0), r
        assert _still_recording(r), r
    else:
        assert (r["held_after"], r["held_end"]) == (0, 0), r
        assert r.get("second") not in (None, [2.0]), r


def _leaked(r: dict) -> dict:
    h = r["hazards"]["leaked_by_native"]
    assert r["pin_site"] in h["sites"], h
    return h


@pytest.mark.parametrize("how", ["device_sync", "stream_sync"])
def test_audit_names_what_a_synchronize_in_a_capture_leaves(scenario, how):
    """The audit report: the capture-time blocks a stream used (the failed capture's and the
    later capture's, 4 KiB each) are leaked_by_native, and the capture into the pool id whose
    graph was released is released_pool_recapture (native: use_count > 0)."""
    skip_without_audit()
    r = _failed(scenario, True, how, "reset", **REPORT)
    h = _leaked(r)
    assert (h["count"], h["bytes"]) == (2, 8 * KiB), h
    assert h["affects"].startswith("a capture-time block a stream used: torch_npu 2.11-2.14")
    assert "capture_end failed" not in h["affects"], h["affects"]
    assert r["hazards"]["released_pool_recapture"]["count"] == 1, r["hazards"]


@pytest.mark.parametrize("pool", ["handle", "none"])
def test_audit_names_the_pool_a_failed_capture_end_leaves(scenario, pool):
    """After a failed capture_end torch_npu >= 2.11 never gives the pool back: the report counts
    the pool's two blocks (12 KiB) when the plugin lets the graph go, and the later capture's
    stream-used block (4 KiB): 16 KiB, what native holds at the end. A later capture into that
    pool id is no released_pool_recapture (natively the pool is still in use, so it works)."""
    skip_without_audit()
    r = _failed(scenario, True, "unjoined", "reset", FAIL_POOL=pool, **REPORT)
    h = _leaked(r)
    later = "second" in r  # torch_npu 2.10 refuses the later capture (STILL_RECORDING)
    assert (h["count"], h["bytes"]) == ((3, 16 * KiB) if later else (2, 12 * KiB)), h
    assert "the pool of a capture whose capture_end failed: torch_npu 2.11-2.14" in h["affects"]
    assert r["hazards"]["released_pool_recapture"]["count"] == 0, r["hazards"]
