"""Host functions (aclrtLaunchHostFunc) are stream tasks: one runs on the host once the stream's
earlier tasks completed, and holds the stream's later tasks until it returned
(hicann/runtime docs/zh/api_ref/aclrtLaunchHostFunc.md:
"在Stream的任务队列中下发一个Host回调任务 ... 回调任务默认阻塞本Stream上后续任务的执行";
CANN api_ref 12_execution_control.md; dev_guide 03-02_stream_management.md). A capturing stream
captures it, so every replay of the model runs it again at that point (hicann/runtime
ApiImpl::CallbackLaunchWithEvent, whose capture branch subscribes the capture stream). With a
side stream and two events it runs behind another stream's work and holds it (hicann/runtime's
adump, SetupAsyncDump).

torch_npu_pinpool relies on each: its staged copies of non-contiguous pinned views (Note
[Strided pinned copies in capture]) and the audit report's completion probes
(csrc/audit/completion_probe.cpp, Note [Completion probes])."""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL

pytestmark = pytest.mark.simulator

_PRELUDE = r"""
HOSTFUNC = ctypes.CFUNCTYPE(None, vp)
aclrtLaunchHostFunc = _fn("aclrtLaunchHostFunc", args=[vp, HOSTFUNC, vp])
N = 4096
calls = []

# The middle of a D2H -> host function -> H2D chain: copies what the D2H left in `landed` to
# `outgoing`, which the H2D then sends back to the device.
landed, outgoing = malloc_host(N), malloc_host(N)
def relay(_arg):
    calls.append(get(landed, 1))
    ctypes.memmove(outgoing, landed, N)
relay_fn = HOSTFUNC(relay)  # kept alive: the runtime calls it later

def chain(s, src, dst):
    assert aclrtMemcpyAsync(landed, N, src, N, D2H, s) == 0
    assert aclrtLaunchHostFunc(s, relay_fn, None) == 0
    assert aclrtMemcpyAsync(dst, N, outgoing, N, H2D, s) == 0

def fill_dev(d, byte):
    assert aclrtMemcpy(d, N, ctypes.cast(ctypes.create_string_buffer(bytes([byte]) * N), vp),
                       N, H2D) == 0
"""


def test_host_func_runs_in_stream_order(run_isolated):
    r = run_isolated(
        ACL
        + _PRELUDE
        + r"""
simcann_set_task_delay_us(200000)  # each task 0.2 s: an unordered run would read stale bytes
s = new_stream()
src, dst = malloc_dev(N), malloc_dev(N)
fill_dev(src, 7)
put(landed, bytes([1]) * N)
put(outgoing, bytes([2]) * N)
chain(s, src, dst)
queued = len(calls)  # nothing ran yet: the D2H ahead of it takes 0.2 s
assert aclrtSynchronizeStream(s) == 0
result = {"ran_before_sync": queued, "calls": [c.hex() for c in calls],
          "dst": read_dev(dst, 1).hex()}
"""
    )
    o = r.result
    assert o["ran_before_sync"] == 0
    assert o["calls"] == ["07"], "the host function runs after the D2H ahead of it, once"
    assert o["dst"] == "07", "the H2D behind it waits until it returned"


def test_captured_host_func_runs_at_every_replay(run_isolated):
    r = run_isolated(
        ACL
        + _PRELUDE
        + r"""
s, run = new_stream(), new_stream()
src, dst = malloc_dev(N), malloc_dev(N)
fill_dev(src, 3)
fill_dev(dst, 0)
assert aclmdlRICaptureBegin(s, THREAD_LOCAL) == 0
chain(s, src, dst)
rc, model = end(s)
assert rc == 0, err()
out = {"calls_after_capture": len(calls), "dst_after_capture": read_dev(dst, 1).hex(),
       "replays": []}
simcann_set_task_delay_us(100000)
for byte in (5, 9):
    fill_dev(src, byte)  # what the replay's D2H reads, and so what the host function relays
    assert aclmdlRIExecuteAsync(ctypes.c_void_p(model), run) == 0
    assert aclrtSynchronizeStream(run) == 0
    out["replays"].append([len(calls), read_dev(dst, 1).hex()])
simcann_set_task_delay_us(0)
assert aclmdlRIDestroy(ctypes.c_void_p(model)) == 0
out["violations"] = simcann_violation_count()
result = out
"""
    )
    o = r.result
    assert o["calls_after_capture"] == 0, "a captured host function does not run at capture"
    assert o["dst_after_capture"] == "00"
    assert o["replays"] == [[1, "05"], [2, "09"]], "each replay runs it once, in stream order"
    assert o["violations"] == 0


HOST_FUNC = r"""
import time
HOSTFN = ctypes.CFUNCTYPE(None, vp)
aclrtLaunchHostFunc = _fn("aclrtLaunchHostFunc", args=[vp, HOSTFN, vp])
N = 4096
src = malloc_host(N)
dev = malloc_dev(N)
dst = malloc_host(N)
later = malloc_host(N)
put(src, b"\x07" * N)
put(dst, b"\x00" * N)
put(later, b"\x00" * N)
seen = {}
"""


def test_host_function_runs_after_the_work_before_it_and_holds_the_work_after(run_isolated):
    r = run_isolated(
        ACL
        + HOST_FUNC
        + r"""
s = new_stream()
simcann_set_task_delay_us(100000)  # the copies take a while: the host would win any race

@HOSTFN
def probe(_):
    seen["copied_before"] = get(dst, N) == b"\x07" * N
    time.sleep(0.2)
    seen["later_after_sleep"] = get(later, N) == b"\x00" * N

assert aclrtMemcpyAsync(dev, N, src, N, H2D, s) == 0
assert aclrtMemcpyAsync(dst, N, dev, N, D2H, s) == 0
assert aclrtLaunchHostFunc(s, probe, None) == 0
assert aclrtMemcpyAsync(later, N, dev, N, D2H, s) == 0
seen["host_not_blocked"] = get(dst, N) == b"\x00" * N
assert aclrtSynchronizeStream(s) == 0
simcann_set_task_delay_us(0)
seen["later_done"] = get(later, N) == b"\x07" * N
result = seen
"""
    )
    assert r.result == {
        "host_not_blocked": True,  # asynchronous: the launch returns at once
        "copied_before": True,  # the work before it has run
        "later_after_sleep": True,  # the work after it waits for it to return
        "later_done": True,
    }


def test_side_stream_probe_holds_the_main_stream(run_isolated):
    """S: copy, record(after_work), wait(after_probe), copy; P: wait(after_work), host function,
    record(after_probe). The host function sees S's first copy done and S's second copy not
    started; an event recorded on S after the pattern completes only after it returned."""
    r = run_isolated(
        ACL
        + HOST_FUNC
        + r"""
s, p = new_stream(), new_stream()
after_work, after_probe, user = new_event(), new_event(), new_event()
simcann_set_task_delay_us(100000)

@HOSTFN
def probe(_):
    seen["copied_before"] = get(dst, N) == b"\x07" * N
    time.sleep(0.2)
    seen["s_held"] = get(later, N) == b"\x00" * N and event_status(user) == (0, NOT_READY)

assert aclrtMemcpyAsync(dev, N, src, N, H2D, s) == 0
assert aclrtMemcpyAsync(dst, N, dev, N, D2H, s) == 0
assert aclrtRecordEvent(after_work, s) == 0
assert aclrtStreamWaitEvent(p, after_work) == 0
assert aclrtLaunchHostFunc(p, probe, None) == 0
assert aclrtRecordEvent(after_probe, p) == 0
assert aclrtStreamWaitEvent(s, after_probe) == 0
assert aclrtMemcpyAsync(later, N, dev, N, D2H, s) == 0
assert aclrtRecordEvent(user, s) == 0
assert aclrtSynchronizeEvent(user) == 0
simcann_set_task_delay_us(0)
seen["probe_ran"] = "s_held" in seen
result = seen
"""
    )
    assert r.result == {"copied_before": True, "s_held": True, "probe_ran": True}
