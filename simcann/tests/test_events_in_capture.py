"""Event waits and records on capturing streams, by how the event was made and last recorded.

Rules: Note [Events in capture] in simcann/src/stream.cpp (hicann/runtime
ApiErrorDecorator::StreamWaitEvent / EventRecord in src/runtime/api/impl/api_error.cc,
ApiImpl::StreamWaitEvent / EventRecord in src/runtime/api/impl/api_impl.cc, Event::WaitSendCheck in
src/runtime/core/src/event/event.cc, Event::IsCapturing in src/runtime/feature/aclgraph/
event_capture.cc). Driven through the ACL C API (ctypes); one torch_npu case at the end.
"""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, TORCH

pytestmark = pytest.mark.simulator


def test_wait_on_an_event_recorded_outside_the_capture(run_isolated):
    """107024 in every capture mode, whether the record is done, pending or on the same stream;
    the capture stays ACTIVE and ends normally."""
    r = run_isolated(
        ACL
        + r"""
out = {}
h, d = malloc_host(64), malloc_dev(64)
for name, mode in (("global", GLOBAL), ("thread_local", THREAD_LOCAL), ("relaxed", RELAXED)):
    s, other = new_stream(), new_stream()
    done, pending, same = new_event(), new_event(), new_event()
    assert aclrtRecordEvent(done, other) == 0
    assert aclrtSynchronizeStream(other) == 0
    assert list(event_status(done)) == [0, COMPLETE]
    simcann_set_task_delay_us(300000)
    assert aclrtMemcpyAsync(d, 64, h, 64, H2D, other) == 0
    assert aclrtRecordEvent(pending, other) == 0
    assert aclrtRecordEvent(same, s) == 0
    assert aclmdlRICaptureBegin(s, mode) == 0
    out[name] = [aclrtStreamWaitEvent(s, ev) for ev in (done, pending, same)]
    out[name + "_msg"] = err()
    out[name + "_status"] = info(s)[1]
    out[name + "_pending_still"] = event_status(pending)[1]
    assert aclrtMemcpyAsync(d, 64, h, 64, H2D, s) == 0
    rc, m = end(s)
    out[name + "_end"] = rc
    simcann_set_task_delay_us(0)
    assert aclmdlRIExecuteAsync(vp(m), s) == 0
    assert aclrtSynchronizeStream(s) == 0
    assert aclmdlRIDestroy(vp(m)) == 0
    assert aclrtSynchronizeStream(other) == 0
result = out
"""
    )
    o = r.result
    for name in ("global", "thread_local", "relaxed"):
        assert o[name] == [107024, 107024, 107024], name
        assert "107024" in o[name + "_msg"]
        assert o[name + "_status"] == 1, "the refusal leaves the capture ACTIVE"
        assert o[name + "_pending_still"] == 0  # the test really waited on a pending record
        assert o[name + "_end"] == 0


def test_wait_on_an_event_never_recorded_outside_a_capture(run_isolated):
    """A new-mode event never recorded eagerly (never, or only by ended captures): the wait is
    accepted and captures nothing -- even in an invalidated capture; one eager record later, the
    same wait is refused."""
    r = run_isolated(
        ACL
        + r"""
out = {}
s, s2 = new_stream(), new_stream()
never, by_old_capture = new_event(), new_event()
assert aclmdlRICaptureBegin(s2, GLOBAL) == 0
assert aclrtRecordEvent(by_old_capture, s2) == 0
rc, m_old = end(s2)
assert rc == 0
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
out["never"] = aclrtStreamWaitEvent(s, never)
out["by_old_capture"] = aclrtStreamWaitEvent(s, by_old_capture)
simcann_set_fault(b"invalidate_capture", 1)
h, d = malloc_host(64), malloc_dev(64)
assert aclrtMemcpyAsync(d, 64, h, 64, H2D, s) == 507903
out["invalidated_status"] = info(s)[1]
out["never_invalidated"] = aclrtStreamWaitEvent(s, never)   # no task: not 507903
out["record_invalidated"] = aclrtRecordEvent(new_event(), s)  # a task: 507903
assert end(s)[0] == 507903
# one eager record: from now on the event is "recorded outside the capture"
assert aclrtRecordEvent(never, s2) == 0
assert aclrtSynchronizeStream(s2) == 0
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
out["after_eager_record"] = aclrtStreamWaitEvent(s, never)
out["status"] = info(s)[1]
out["end"] = end(s)[0]
assert aclmdlRIDestroy(vp(m_old)) == 0
result = out
"""
    )
    o = r.result
    assert o["never"] == 0 and o["by_old_capture"] == 0
    assert o["invalidated_status"] == 2
    assert o["never_invalidated"] == 0, "nothing is captured, so nothing fails"
    assert o["record_invalidated"] == 507903
    assert o["after_eager_record"] == 107024
    assert o["status"] == 1 and o["end"] == 0


def test_event_captured_then_recorded_eagerly_stays_captured(run_isolated):
    """An eager record of an event whose record a running capture holds does not release it:
    queries still say 107028, streams waiting on it join that capture; after the end, the event
    reports the eager record."""
    r = run_isolated(
        ACL
        + r"""
out = {}
s, side, other = new_stream(), new_stream(), new_stream()
e = new_event()
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclrtRecordEvent(e, s) == 0
assert aclrtRecordEvent(e, other) == 0                 # eager, during the capture
out["query"] = event_status(e)[0]
out["wait_origin"] = aclrtStreamWaitEvent(s, e)      # waits on the captured record
out["wait_side"] = aclrtStreamWaitEvent(side, e)     # joins the capture
out["side_status"] = info(side)[1]
e2 = new_event()
assert aclrtRecordEvent(e2, side) == 0
assert aclrtStreamWaitEvent(s, e2) == 0
rc, m = end(s)
out["end"] = rc
assert aclrtSynchronizeStream(other) == 0
out["after"] = event_status(e)
assert aclmdlRIDestroy(vp(m)) == 0
result = out
"""
    )
    o = r.result
    assert o["query"] == 107028
    assert o["wait_origin"] == 0 and o["wait_side"] == 0 and o["side_status"] == 1
    assert o["end"] == 0
    assert o["after"] == [0, 1]


def test_old_mode_events_in_capture(run_isolated):
    """aclrtCreateEvent / aclrtCreateEventWithFlag events cannot be recorded or waited on in a
    capture (207000, capture ACTIVE); eagerly, waiting before any record is 107000 unless the event
    has ACL_EVENT_SYNC."""
    r = run_isolated(
        ACL
        + r"""
out = {}
s, other = new_stream(), new_stream()
recorded, never, sync_never = new_event_old(), new_event_old(), new_event_old(EV_SYNC)
out["eager_wait_never"] = aclrtStreamWaitEvent(other, never)
out["eager_wait_never_msg"] = err()
out["eager_wait_sync_never"] = aclrtStreamWaitEvent(other, sync_never)
assert aclrtRecordEvent(recorded, other) == 0
out["eager_wait_recorded"] = aclrtStreamWaitEvent(s, recorded)
assert aclrtSynchronizeStream(other) == 0
assert aclrtSynchronizeStream(s) == 0
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
out["wait_recorded"] = aclrtStreamWaitEvent(s, recorded)
out["wait_never"] = aclrtStreamWaitEvent(s, never)
out["record"] = aclrtRecordEvent(never, s)
out["record_msg"] = err()
out["query_after_refused_record"] = event_status(never)[0]
out["status"] = info(s)[1]
out["end"] = end(s)[0]
result = out
"""
    )
    o = r.result
    assert o["eager_wait_never"] == 107000 and "107000" in o["eager_wait_never_msg"]
    assert o["eager_wait_sync_never"] == 0
    assert o["eager_wait_recorded"] == 0
    assert o["wait_recorded"] == 207000 and o["wait_never"] == 207000
    assert o["record"] == 207000 and "207000" in o["record_msg"]
    assert o["query_after_refused_record"] == 0, "a refused record does not capture the event"
    assert o["status"] == 1 and o["end"] == 0


def test_event_flags(run_isolated):
    """Without ACL_EVENT_SYNC an event cannot be waited on (207000, capturing or not); recorded in a
    capture it is silently left alone (not captured: it keeps answering queries). Device-only
    events: 107000."""
    r = run_isolated(
        ACL
        + r"""
out = {}
s, other = new_stream(), new_stream()
progress = new_event(EV_STREAM_PROGRESS)   # torch_npu's host-allocator events
timing = new_event(EV_TIME_LINE)
timing_sync = new_event(EV_TIME_LINE | EV_SYNC)
device_only = new_event(EV_DEVICE_ONLY)
old_timing = new_event_old(EV_TIME_LINE)
assert aclrtRecordEvent(progress, other) == 0
assert aclrtSynchronizeStream(other) == 0
out["eager_wait"] = [aclrtStreamWaitEvent(other, ev)
                     for ev in (progress, timing, timing_sync, old_timing)]
out["device_only"] = [aclrtRecordEvent(device_only, other),
                      aclrtStreamWaitEvent(other, device_only)]
assert aclrtSynchronizeStream(other) == 0
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
out["capture_record"] = [aclrtRecordEvent(progress, s), aclrtRecordEvent(timing, s)]
out["capture_query"] = [event_status(progress), event_status(timing)]
out["capture_wait"] = [aclrtStreamWaitEvent(s, progress), aclrtStreamWaitEvent(s, timing)]
out["side_wait"] = aclrtStreamWaitEvent(other, progress)
out["side_status"] = info(other)[1]
out["status"] = info(s)[1]
out["end"] = end(s)[0]
result = out
"""
    )
    o = r.result
    assert o["eager_wait"] == [207000, 207000, 0, 207000]
    assert o["device_only"] == [107000, 107000]
    assert o["capture_record"] == [0, 0]
    assert o["capture_query"] == [[0, 1], [0, 1]], "not captured: no 107028"
    assert o["capture_wait"] == [207000, 207000]
    assert o["side_wait"] == 207000 and o["side_status"] == 0
    assert o["status"] == 1 and o["end"] == 0


def test_torch_npu_wait_on_an_eager_event_in_a_graph(run_isolated):
    """Through torch_npu: a graph's stream waiting on an event recorded before the capture. The
    refusal (107024) happens on torch_npu's task-queue thread; the test records what the caller
    sees, and that nothing was silently accepted."""
    r = run_isolated(
        TORCH
        + r"""
out = {}
side = torch.npu.Stream()
x = torch.ones(16, device="npu")
with torch.npu.stream(side):
    y = x * 2
ev = torch.npu.Event()
ev.record(side)
torch.npu.synchronize()
g = torch.npu.NPUGraph()
try:
    with torch.npu.graph(g):
        torch.npu.current_stream().wait_event(ev)
        z = y + 1
    torch.npu.synchronize()
    out["raised"] = None
except Exception as exc:  # noqa: BLE001 - record whatever torch_npu turns the code into
    out["raised"] = str(exc)
result = out
"""
    )
    raised = r.result["raised"]
    assert raised is not None and "107024" in raised, raised
