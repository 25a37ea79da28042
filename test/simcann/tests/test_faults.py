"""Fault injection (environment variables and the control API)."""

from __future__ import annotations

import pytest
from simcann_snippets import ACL, TORCH, require_simulator

pytestmark = pytest.mark.simulator


def setup_module() -> None:
    require_simulator()


def test_fault_codes_through_the_acl_api(run_isolated):
    r = run_isolated(
        ACL
        + r'''
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
''',
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


def test_faults_through_torch_npu(run_isolated):
    r = run_isolated(
        TORCH
        + r'''
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
simcann_set_fault(b"malloc_host", 1)
# torch_npu swallows a failed pinned allocation: the tensor comes back with a null data pointer
# and not pinned (keep it alive: freeing that null block poisons torch_npu's cache).
failed = torch.empty(1 << 20, pin_memory=True)
out["pin"] = [failed.is_pinned(), failed.data_ptr()]
out["pin_next"] = torch.empty(1 << 20, pin_memory=True).is_pinned()
# (2.13: after a failed aclmdlRICaptureBegin torch_npu's host allocator stays in its
# capture-pool mode and stops pinning; so the pinned-allocation fault goes first.)
simcann_set_fault(b"capture_begin", 1)
out["begin"] = attempt(capture)
simcann_set_fault(b"capture_end", 1)
out["end"] = attempt(capture)
simcann_reset_faults()
out["clean"] = attempt(capture)
# Last: torch_npu raises from its task queue before calling aclmdlRICaptureEnd, so the stream
# stays in the (invalidated) capture -- later device synchronization is refused, as on hardware.
simcann_set_fault(b"invalidate_capture", 1)
out["invalidate"] = attempt(capture)
out["after_invalidate"] = attempt(torch.npu.synchronize)
result = out
'''
    )
    o = r.result
    assert o["begin"] != "ok" and "207001" in o["begin"]
    assert o["end"] != "ok" and "507903" in o["end"]
    assert o["invalidate"] != "ok"
    assert "107027" in o["after_invalidate"]
    assert o["clean"] == "ok"
    assert o["pin"] == [False, 0] and o["pin_next"] is True
