"""Fault injection (environment variables and the control API)."""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, TORCH

pytestmark = pytest.mark.simulator


def test_fault_codes_through_the_acl_api(run_isolated):
    r = run_isolated(
        ACL
        + r"""
out = {}
p = vp()
out["malloc_host"] = [aclrtMallocHost(byref(p), 64) for _ in range(3)]
s = new_stream()
out["begin"] = [aclmdlRICaptureBegin(s, GLOBAL), aclmdlRICaptureBegin(s, GLOBAL), end(s)[0]]
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
out["end"] = end(s)
out["status_after"] = info(s)[1]
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
out["end_next"] = end(s)[0]
result = out
""",
        env={
            "SIMCANN_FAIL_MALLOC_HOST_AT": "2",
            "SIMCANN_FAIL_CAPTURE_BEGIN_AT": "1",
            "SIMCANN_FAIL_CAPTURE_END_AT": "2",
        },
    )
    o = r.result
    assert o["malloc_host"] == [0, 207001, 0]
    assert o["begin"] == [207001, 0, 0]
    assert o["end"] == [507903, None]
    assert o["status_after"] == 0
    assert o["end_next"] == 0


def test_model_destroy_fault_leaves_the_model_replayable(run_isolated):
    """simcann_set_fault("model_destroy"): aclmdlRIDestroy fails once with 507000
    (ACL_ERROR_RT_INTERNAL_ERROR) and changes nothing - the model still replays its captured
    copy - and the next destroy succeeds."""
    r = run_isolated(
        ACL
        + r"""
s = new_stream()
h, d = malloc_host(64), malloc_dev(64)
put(h, b"\x07" * 64)
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclrtMemcpyAsync(d, 64, h, 64, 1, s) == 0
code, model = end(s)
assert code == 0
assert simcann_set_fault(b"model_destroy", 1) == 0
failed = aclmdlRIDestroy(model)
replayed = [aclmdlRIExecuteAsync(model, s), aclrtSynchronizeStream(s)]
result = [failed, replayed, read_dev(d, 64) == b"\x07" * 64, aclmdlRIDestroy(model)]
"""
    )
    assert r.result == [507000, [0, 0], True, 0], r.result


def test_record_event_fault_records_nothing(run_isolated):
    """simcann_set_fault("record_event"): aclrtRecordEvent fails once with 507000
    (ACL_ERROR_RT_INTERNAL_ERROR) and records nothing - the event is still unrecorded, so a
    query says so - and the next record succeeds."""
    r = run_isolated(
        ACL
        + r"""
s = new_stream()
ev = vp()
assert aclrtCreateEvent(ctypes.byref(ev)) == 0
assert simcann_set_fault(b"record_event", 1) == 0
failed = aclrtRecordEvent(ev, s)
retried = aclrtRecordEvent(ev, s)
result = [failed, retried, aclrtSynchronizeStream(s)]
"""
    )
    assert r.result == [507000, 0, 0], r.result


# One process per fault: after a failed capture torch_npu's own allocators keep capture state
# (2.8/2.9: the device allocator's captures_underway; 2.13: the host allocator's pool mode), so a
# second capture in the same process would test torch_npu, not the simulator.
@pytest.mark.parametrize("fault", ["capture_begin", "capture_end", "invalidate_capture"])
def test_faults_through_torch_npu(run_isolated, fault):
    r = run_isolated(
        TORCH
        + r"""
out = {}
def attempt(f):
    try:
        f()
        return "ok"
    except Exception as e:
        return str(e)
N = 64
static = torch.zeros(N, device="npu")
h = torch.ones(N).pin_memory()
def capture():
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        static.copy_(h, non_blocking=True)
    return g
out["clean"] = attempt(capture)
simcann_set_fault(b"malloc_host", 1)
# torch_npu swallows a failed pinned allocation: the tensor comes back with a null data pointer
# and not pinned (keep it alive: freeing that null block poisons torch_npu's cache).
failed = torch.empty(1 << 20, pin_memory=True)
out["pin"] = [failed.is_pinned(), failed.data_ptr()]
out["pin_next"] = torch.empty(1 << 20, pin_memory=True).is_pinned()
simcann_set_fault(FAULT.encode(), 1)
out["fault"] = attempt(capture)
out["after"] = attempt(torch.npu.synchronize)
result = out
""".replace("FAULT", repr(fault))
    )
    o = r.result
    assert o["clean"] == "ok", o
    assert o["pin"] == [False, 0] and o["pin_next"] is True, o
    assert o["fault"] != "ok", o
    if fault == "capture_begin":
        assert "207001" in o["fault"] and o["after"] == "ok", o
    elif fault == "capture_end":
        assert "507903" in o["fault"] and o["after"] == "ok", o
    else:
        # Either torch_npu's task queue reports the failed captured copy before capture_end calls
        # aclmdlRICaptureEnd (the stream stays in the invalidated capture: synchronize -> 107027),
        # or aclmdlRICaptureEnd runs first and reports the invalidated capture (507903).
        assert "107027" in o["after"] or "507903" in o["fault"], o
