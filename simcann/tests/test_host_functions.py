"""Host functions (aclrtLaunchHostFunc) run on the host once their stream reached them, and hold
the stream's later tasks until they returned (hicann/runtime docs/zh/api_ref/
aclrtLaunchHostFunc.md: "在Stream的任务队列中下发一个Host回调任务 ... 回调任务默认阻塞本Stream上后续
任务的执行"); with a side stream and two events they run behind another stream's work and hold
it (hicann/runtime's adump, SetupAsyncDump) - the completion probes of torch_npu_pinpool's audit
report rely on both (csrc/audit/completion_probe.cpp, Note [Completion probes])."""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL

pytestmark = pytest.mark.simulator

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
