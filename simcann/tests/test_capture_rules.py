"""Capture rules and their CANN error codes, driven through the ACL C API (ctypes).

Each rule cites hicann/runtime (see simcann/src/capture.cpp); the codes are the facts note's.
"""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL

pytestmark = pytest.mark.simulator


def test_rejections_leave_the_capture_active(run_isolated):
    r = run_isolated(
        ACL
        + r"""
out = {}
s, other = new_stream(), new_stream()
h, d = malloc_host(64), malloc_dev(64)
pageable = ctypes.create_string_buffer(64)
out["begin_null"] = aclmdlRICaptureBegin(None, GLOBAL)
out["info_idle"] = info(s)
out["end_idle"] = end(s)[0]
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
rc, st, model = info(s)
out["info_active"] = [rc, st, model is not None]
out["begin_again"] = aclmdlRICaptureBegin(s, GLOBAL)
out["sync_stream"] = aclrtSynchronizeStream(s)
out["query_stream"] = aclrtStreamQuery(s, byref(c_int()))
out["destroy_stream"] = aclrtDestroyStream(s)
out["sync_device"] = aclrtSynchronizeDevice()
out["destroy_model"] = aclmdlRIDestroy(model)
out["exec_on_capturing"] = None
out["pageable_h2d"] = aclrtMemcpyAsync(d, 64, ctypes.cast(pageable, vp), 64, H2D, s)
out["pageable_d2h"] = aclrtMemcpyAsync(ctypes.cast(pageable, vp), 64, d, 64, D2H, s)
out["pageable_msg"] = err()
out["pinned_h2d"] = aclrtMemcpyAsync(d, 64, h, 64, H2D, s)
out["sync_memcpy"] = aclrtMemcpy(d, 64, h, 64, H2D)
out["sync_memcpy_msg"] = err()
out["sync_memset"] = aclrtMemset(d, 64, 0, 64)
old = exchange_mode(RELAXED)
out["sync_memcpy_relaxed"] = aclrtMemcpy(d, 64, h, 64, H2D)
exchange_mode(old)
# allocation has no capture restriction
h2, d2 = vp(), vp()
out["malloc_host"] = aclrtMallocHost(byref(h2), 32)
out["free_host"] = aclrtFreeHost(h2)
out["malloc"] = aclrtMalloc(byref(d2), 32, 0)
out["free"] = aclrtFree(d2)
out["info_after"] = info(s)[1]
rc, m = end(s)
out["end"] = [rc, m == model]
out["info_ended"] = info(s)
out["exec_on_capturing"] = None
# ExecuteAsync on a capturing stream
assert aclmdlRICaptureBegin(other, GLOBAL) == 0
out["exec_on_capturing"] = aclmdlRIExecuteAsync(vp(m), other)
assert end(other)[0] == 0
# eager sync memcpy is fine again
out["sync_memcpy_after"] = aclrtMemcpy(d, 64, h, 64, H2D)
out["exec"] = aclmdlRIExecuteAsync(vp(m), s)
out["sync"] = aclrtSynchronizeStream(s)
out["destroy"] = aclmdlRIDestroy(vp(m))
result = out
"""
    )
    o = r.result
    assert o["begin_null"] == 100000
    assert o["info_idle"] == [0, 0, None]
    assert o["end_idle"] == 107029
    assert o["info_active"] == [0, 1, True]
    assert o["begin_again"] == 107027
    assert o["sync_stream"] == 107027
    assert o["query_stream"] == 107027
    assert o["destroy_stream"] == 107027
    assert o["sync_device"] == 107027
    assert o["destroy_model"] == 107026
    assert o["pageable_h2d"] == 107000
    assert o["pageable_d2h"] == 107000
    assert "107000" in o["pageable_msg"]
    assert o["pinned_h2d"] == 0
    assert o["sync_memcpy"] == 107030
    assert "107030" in o["sync_memcpy_msg"]
    assert o["sync_memset"] == 107030
    assert o["sync_memcpy_relaxed"] == 0
    assert [o["malloc_host"], o["free_host"], o["malloc"], o["free"]] == [0, 0, 0, 0]
    assert o["info_after"] == 1, "rejections must leave the capture ACTIVE"
    assert o["end"] == [0, True]
    assert o["info_ended"] == [0, 0, None]
    assert o["exec_on_capturing"] == 107027
    assert o["sync_memcpy_after"] == 0
    assert [o["exec"], o["sync"], o["destroy"]] == [0, 0, 0]


def test_thread_rules_and_modes(run_isolated):
    r = run_isolated(
        ACL
        + r"""
out = {}
h, d = malloc_host(64), malloc_dev(64)

def in_thread(f):
    box = {}
    def run():
        aclrtSetDevice(0)
        box["v"] = f()
    t = threading.Thread(target=run)
    t.start(); t.join()
    return box["v"]

# End from another thread: 107038 unless RELAXED (the stream then leaves the capture).
s = new_stream()
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
out["end_other_thread"] = in_thread(lambda: end(s)[0])
out["after_wrong_thread"] = info(s)[1]
s2 = new_stream()
assert aclmdlRICaptureBegin(s2, RELAXED) == 0
out["end_other_thread_relaxed"] = in_thread(lambda: end(s2)[0])

# GLOBAL capture: sync copies refused in every thread whose exchange mode is not RELAXED.
s3 = new_stream()
assert aclmdlRICaptureBegin(s3, GLOBAL) == 0
out["global_other_thread"] = in_thread(lambda: aclrtMemcpy(d, 64, h, 64, H2D))
assert end(s3)[0] == 0
# THREAD_LOCAL capture: only the capturing thread is refused.
assert aclmdlRICaptureBegin(s3, THREAD_LOCAL) == 0
out["tl_same_thread"] = aclrtMemcpy(d, 64, h, 64, H2D)
out["tl_other_thread"] = in_thread(lambda: aclrtMemcpy(d, 64, h, 64, H2D))
assert end(s3)[0] == 0
# RELAXED capture: nobody is refused.
assert aclmdlRICaptureBegin(s3, RELAXED) == 0
out["relaxed_same_thread"] = aclrtMemcpy(d, 64, h, 64, H2D)
assert end(s3)[0] == 0

# Capture state is per stream: another thread enqueues into a capture this thread began.
s4 = new_stream()
assert aclmdlRICaptureBegin(s4, GLOBAL) == 0
out["enqueue_other_thread"] = in_thread(lambda: aclrtMemcpyAsync(d, 64, h, 64, H2D, s4))
put(h, b"\x05" * 64)
rc, m = end(s4)
out["end_s4"] = rc
out["captured_not_run"] = read_dev(d, 64) != b"\x05" * 64
assert aclmdlRIExecuteAsync(vp(m), s4) == 0
assert aclrtSynchronizeStream(s4) == 0
out["replayed"] = read_dev(d, 64) == b"\x05" * 64
result = out
"""
    )
    o = r.result
    assert o["end_other_thread"] == 107038
    assert o["after_wrong_thread"] == 0
    assert o["end_other_thread_relaxed"] == 0
    assert o["global_other_thread"] == 107030
    assert o["tl_same_thread"] == 107030
    assert o["tl_other_thread"] == 0
    assert o["relaxed_same_thread"] == 0
    assert o["enqueue_other_thread"] == 0
    assert o["end_s4"] == 0
    assert o["captured_not_run"] and o["replayed"]


def test_events_in_capture(run_isolated):
    r = run_isolated(
        ACL
        + r"""
out = {}
s = new_stream()
never, before = new_event(), new_event()
simcann_set_task_delay_us(200000)
h, d = malloc_host(64), malloc_dev(64)
assert aclrtMemcpyAsync(d, 64, h, 64, H2D, s) == 0
assert aclrtRecordEvent(before, s) == 0          # recorded eagerly, still pending
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclrtRecordEvent(never, s) == 0           # captured record of a never-recorded event
assert aclrtRecordEvent(before, s) == 0          # captured record of a pending event
out["query_captured"] = event_status(never)[0]
out["sync_captured"] = aclrtSynchronizeEvent(never)
out["query_captured_pending"] = event_status(before)[0]
assert end(s)[0] == 0
out["never_after"] = event_status(never)
out["before_after"] = event_status(before)
simcann_set_task_delay_us(0)
out["sync_before"] = aclrtSynchronizeEvent(before)
out["before_done"] = event_status(before)
result = out
"""
    )
    o = r.result
    assert o["query_captured"] == 107028
    assert o["sync_captured"] == 107028
    assert o["query_captured_pending"] == 107028
    assert o["never_after"] == [0, 1], "never recorded = COMPLETE"
    assert o["before_after"] == [0, 0], "reports its pre-capture (pending) state"
    assert o["sync_before"] == 0
    assert o["before_done"] == [0, 1]


def test_cross_stream_capture(run_isolated):
    r = run_isolated(
        ACL
        + r"""
out = {}
h, d, d2 = malloc_host(64), malloc_dev(64), malloc_dev(64)

def fork_join(join):
    s, side = new_stream(), new_stream()
    e1, e2 = new_event(), new_event()
    assert aclmdlRICaptureBegin(s, GLOBAL) == 0
    assert aclrtRecordEvent(e1, s) == 0
    out.setdefault("side_before", info(side)[1])
    assert aclrtStreamWaitEvent(side, e1) == 0     # pulls side into the capture
    out.setdefault("side_joined", info(side)[1])
    out.setdefault("same_model", info(side)[2] == info(s)[2])
    assert aclrtMemcpyAsync(d, 64, h, 64, H2D, side) == 0
    assert aclrtMemcpyAsync(d2, 64, d, 64, D2D, side) == 0
    out.setdefault("end_on_side", end(side)[0])
    if join:
        assert aclrtRecordEvent(e2, side) == 0
        assert aclrtStreamWaitEvent(s, e2) == 0
    rc, m = end(s)
    return rc, m, s, side

rc, m, s, side = fork_join(join=False)
out["unjoined"] = rc
out["unjoined_model"] = m
out["side_after_unjoined"] = info(side)[1]
rc, m, s, side = fork_join(join=True)
out["joined"] = rc
out["side_after"] = info(side)[1]
put(h, b"\x07" * 64)
assert aclmdlRIExecuteAsync(vp(m), s) == 0
assert aclrtSynchronizeStream(s) == 0
out["replay"] = read_dev(d2, 64) == b"\x07" * 64
result = out
"""
    )
    o = r.result
    assert o["side_before"] == 0 and o["side_joined"] == 1 and o["same_model"]
    assert o["end_on_side"] == 107036
    assert o["unjoined"] == 107025 and o["unjoined_model"] is None
    assert o["side_after_unjoined"] == 0
    assert o["joined"] == 0 and o["side_after"] == 0
    assert o["replay"]


def test_invalidated_capture(run_isolated):
    r = run_isolated(
        ACL
        + r"""
out = {}
s = new_stream()
h, d = malloc_host(64), malloc_dev(64)
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclrtMemcpyAsync(d, 64, h, 64, H2D, s) == 0
simcann_set_fault(b"invalidate_capture", 1)   # the next captured task fails to be added
out["add_fails"] = aclrtMemcpyAsync(d, 64, h, 64, H2D, s)
out["status"] = info(s)[1]
out["add_after"] = aclrtMemcpyAsync(d, 64, h, 64, H2D, s)
out["end"] = end(s)
out["status_after"] = info(s)[1]
result = out
"""
    )
    o = r.result
    assert o["add_fails"] == 507903
    assert o["status"] == 2
    assert o["add_after"] == 507903
    assert o["end"] == [507903, None]
    assert o["status_after"] == 0
