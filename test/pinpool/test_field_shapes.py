"""Capture shapes seen in the field that no other test names (issue #35): captures that fail,
``torch.accelerator.Graph``, a mixed-dtype ``non_blocking`` H2D copy, worker processes activated
by autoload, and vllm-ascend's UVA path (``aclrtHostGetDevicePointer`` on registered pinned
memory). Each runs the same scenario with the plugin and with ``TORCH_NPU_PINPOOL=0`` and
asserts what a user relies on: the bytes a replay delivers, the pinned bytes still held
(``torch_npu_pinpool.host_memory_stats()``), the errors raised. Native's figures are the ones
measured on the simulated runtime with torch_npu 2.14.0 and 2.10.0.post7 (docs/problem.md, "A
capture that fails"); on other pairs only the plugin's side is asserted.

Scenarios (runtime-neutral, no simulator state): test/scenarios/failed_capture.py,
accelerator_graph.py, mixed_dtype_h2d.py, autoload_workers.py (+ autoload_worker.py),
uva_device_pointer.py.
"""

from __future__ import annotations

import pytest

from ._snippets import (
    CANN_8_5,
    ON_OFF,
    env_for,
    native_pools,
    pair,
    skip_without_audit,
    with_alloc_conf,
)

KiB = 1024
REPORT = {"TORCH_NPU_PINPOOL_REPORT": "1"}
MEASURED = ((2, 14), (2, 10))  # the pairs native's figures below were measured on


def _native_measured() -> None:
    if pair() not in MEASURED:
        pytest.skip(f"native's figures were measured on {MEASURED}, not {pair()}")


# --- captures that fail ------------------------------------------------------------------------
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
    _native_measured()
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


# --- torch.accelerator.Graph -------------------------------------------------------------------


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
        _native_measured()
        assert r["second"] != [2.0] and r["held_after"] == 4 * KiB, r


# --- a mixed-dtype non_blocking H2D copy -------------------------------------------------------


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
    _native_measured()
    if native_pools() and shape == "inside":
        assert (r["values"], r["held_after"]) == (right, 4 * KiB), r
    else:
        assert r["values"] != right and r["held_after"] == 0, r


# --- worker processes --------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["subprocess", "spawn"])
def test_workers_that_import_only_torch_npu_are_activated_by_autoload(scenario, how):
    """A worker that only imports torch_npu (vLLM's one process per NPU) gets the plugin through
    torch's backend autoload (the torch.backends entry point): active, and its replay reads the
    input it captured. With TORCH_NPU_PINPOOL=0 the entry point loads but activates nothing, and
    the same replay reads another owner's bytes (torch_npu alone: defect 3)."""
    on = scenario("autoload_workers", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}).result[how]
    assert on == {"loaded": True, "active": True, "replay": [2.0]}, on
    off = scenario("autoload_workers", env=env_for(False, TORCH_DEVICE_BACKEND_AUTOLOAD="1"))
    w = off.result[how]
    assert (w["loaded"], w["active"]) == (True, False) and w["replay"] != [2.0], w


@pytest.mark.parametrize("how", ["subprocess", "spawn"])
def test_workers_without_autoload_run_without_the_plugin(scenario, how):
    """TORCH_DEVICE_BACKEND_AUTOLOAD=0: nothing imports the plugin in a worker that only imports
    torch_npu, so it runs on torch_npu's own allocator (docs/usage.md: add
    ``import torch_npu_pinpool`` to the worker)."""
    r = scenario("autoload_workers", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}).result[how]
    assert (r["loaded"], r["active"]) == (False, False) and r["replay"] != [2.0], r


# --- UVA: registered pinned memory -------------------------------------------------------------


@ON_OFF
def test_registered_block_has_a_device_pointer(scenario, plugin):
    """PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True (CANN >= 8.5): aclrtHostGetDevicePointer
    succeeds on the pinned blocks the registered host allocator hands out - eager, pinned inside
    a capture (a graph-pool block with the plugin), 48 MiB - with the plugin as without it."""
    env = env_for(plugin, PYTORCH_NPU_ALLOC_CONF="pinned_mem_register:True", **CANN_8_5)
    run = with_alloc_conf(scenario, "uva_device_pointer", env)
    r = run.result
    if not r["has_api"]:
        pytest.skip("this CANN's libascendcl has no aclrtHostGetDevicePointer")
    if "pinned_mem_register setting failure" in run.stderr:
        pytest.skip("torch_npu turned pinned_mem_register off (CANN < 8.5 or an old driver)")
    assert (r["eager"], r["in_capture"], r["large"]) == ([0, True],) * 3, r
    assert r["replay"] == [2.0], r
