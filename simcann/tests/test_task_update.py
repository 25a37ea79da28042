"""Capture task groups and task update (aclmdlRICaptureTaskGrpBegin/End,
aclmdlRICaptureTaskUpdateBegin/End) and the stream value write/wait torch_npu orders them with.

Each rule cites hicann/runtime (Note [Task groups] and Note [Task update] in
simcann/src/capture.cpp). Kernels are driven through the simulated aclnnInplaceCopy /
aclnnInplaceZero (ctypes); the last test goes through torch_npu (NPUGraph.update).
"""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, TORCH

pytestmark = pytest.mark.simulator

# Task-group calls, stream value write/wait, and two kernels (aclnn ops) on float32 vectors.
_TG = r"""
aclmdlRICaptureTaskGrpBegin = _fn("aclmdlRICaptureTaskGrpBegin", args=[vp])
aclmdlRICaptureTaskGrpEnd = _fn("aclmdlRICaptureTaskGrpEnd", args=[vp, ctypes.POINTER(vp)])
aclmdlRICaptureTaskUpdateBegin = _fn("aclmdlRICaptureTaskUpdateBegin", args=[vp, vp])
aclmdlRICaptureTaskUpdateEnd = _fn("aclmdlRICaptureTaskUpdateEnd", args=[vp])
aclrtValueWrite = _fn("aclrtValueWrite", args=[vp, ctypes.c_uint64, ctypes.c_uint32, vp])
aclrtValueWait = _fn("aclrtValueWait", args=[vp, ctypes.c_uint64, ctypes.c_uint32, vp])
aclCreateTensor = _fn("aclCreateTensor", res=vp, args=[
    ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, c_int, ctypes.POINTER(ctypes.c_int64),
    ctypes.c_int64, c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64, vp])
aclnnInplaceCopyGetWorkspaceSize = _fn(
    "aclnnInplaceCopyGetWorkspaceSize",
    args=[vp, vp, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(vp)])
aclnnInplaceCopy = _fn("aclnnInplaceCopy", args=[vp, ctypes.c_uint64, vp, vp])
aclnnInplaceZeroGetWorkspaceSize = _fn(
    "aclnnInplaceZeroGetWorkspaceSize",
    args=[vp, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(vp)])
aclnnInplaceZero = _fn("aclnnInplaceZero", args=[vp, ctypes.c_uint64, vp, vp])
simcann_set_task_delay_us(0)
EQ = 1
N = 16  # float32 elements
NB = 4 * N

def tensor(p):
    dims = (ctypes.c_int64 * 1)(N)
    return aclCreateTensor(dims, 1, 0, None, 0, 2, dims, 1, p)  # ACL_FLOAT, ACL_FORMAT_ND

def copy_kernel(dst, src, stream):  # dst[:] = src[:] as a kernel
    ws, ex = ctypes.c_uint64(), vp()
    assert aclnnInplaceCopyGetWorkspaceSize(tensor(dst), tensor(src), byref(ws), byref(ex)) == 0
    return aclnnInplaceCopy(None, 0, ex, stream)

def zero_kernel(dst, stream):
    ws, ex = ctypes.c_uint64(), vp()
    assert aclnnInplaceZeroGetWorkspaceSize(tensor(dst), byref(ws), byref(ex)) == 0
    return aclnnInplaceZero(None, 0, ex, stream)

def floats(v):
    return bytes(ctypes.c_float(v)) * N

def dev_filled(v):
    d = malloc_dev(NB)
    assert aclrtMemcpy(d, NB, ctypes.cast(ctypes.create_string_buffer(floats(v), NB), vp), NB,
                       H2D) == 0
    return d

def host_filled(v):
    h = malloc_host(NB)
    put(h, floats(v))
    return h

def value_of(d):  # the float every element holds, or None if they differ
    raw = read_dev(d, NB)
    vals = {ctypes.c_float.from_buffer_copy(raw, 4 * i).value for i in range(N)}
    return vals.pop() if len(vals) == 1 else sorted(vals)

def grp_end(s):
    h = vp()
    rc = aclmdlRICaptureTaskGrpEnd(s, byref(h))
    return rc, h.value

def replay(m, s):
    assert aclmdlRIExecuteAsync(vp(m), s) == 0
    assert aclrtSynchronizeStream(s) == 0
"""


def test_updated_group_replays_the_new_work(run_isolated):
    r = run_isolated(
        ACL
        + _TG
        + r"""
out = {}
s, u = new_stream(), new_stream()
a, b, c, dst = dev_filled(1.0), dev_filled(2.0), dev_filled(3.0), dev_filled(0.0)
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert copy_kernel(dst, a, s) == 0  # before the group: stays as captured
assert aclmdlRICaptureTaskGrpBegin(s) == 0
assert copy_kernel(dst, b, s) == 0  # the group's one task
rc, h = grp_end(s)
out["grp_end"] = [rc, h is not None]
rc, m = end(s)
assert rc == 0
replay(m, s)
out["before_update"] = value_of(dst)
assert aclmdlRICaptureTaskUpdateBegin(u, vp(h)) == 0
out["info_updating"] = info(u)
out["update_kernel"] = copy_kernel(dst, c, u)  # replaces the group's copy: now reads c
out["update_end"] = aclmdlRICaptureTaskUpdateEnd(u)
assert aclrtSynchronizeStream(u) == 0
out["dst_untouched_by_update"] = value_of(dst)  # the update stream ran no copy itself
replay(m, s)
out["after_update"] = value_of(dst)
# The update takes effect when the update stream runs it: held back behind a value wait, the
# replay still runs the old task; once the stream gets past the wait, the new one.
flag, w = malloc_dev(8), new_stream()
assert aclrtMemset(flag, 8, 0, 8) == 0
assert aclrtValueWait(flag, 1, EQ, u) == 0
assert aclmdlRICaptureTaskUpdateBegin(u, vp(h)) == 0
assert copy_kernel(dst, a, u) == 0
assert aclmdlRICaptureTaskUpdateEnd(u) == 0
replay(m, s)
out["update_still_queued"] = value_of(dst)
assert aclrtValueWrite(flag, 1, 0, w) == 0
assert aclrtSynchronizeStream(u) == 0
replay(m, s)
out["update_applied"] = value_of(dst)
out["violations"] = simcann_violation_count()
result = out
"""
    )
    o = r.result
    assert o["grp_end"] == [0, True]
    assert o["before_update"] == 2.0
    assert o["info_updating"] == [0, 0, None], "an updating stream is not capturing"
    assert [o["update_kernel"], o["update_end"]] == [0, 0]
    assert o["dst_untouched_by_update"] == 2.0
    assert o["after_update"] == 3.0
    assert o["update_still_queued"] == 3.0
    assert o["update_applied"] == 1.0
    assert o["violations"] == 0


def test_task_group_rules(run_isolated):
    r = run_isolated(
        ACL
        + _TG
        + r"""
out = {}
s, other = new_stream(), new_stream()
a, dst = dev_filled(1.0), dev_filled(0.0)
out["begin_null"] = aclmdlRICaptureTaskGrpBegin(None)
out["end_null_handle"] = aclmdlRICaptureTaskGrpEnd(s, None)
out["begin_idle"] = aclmdlRICaptureTaskGrpBegin(s)
out["end_idle"] = grp_end(s)[0]
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
out["end_without_begin"] = grp_end(s)[0]
assert aclmdlRICaptureTaskGrpBegin(s) == 0
out["begin_twice"] = aclmdlRICaptureTaskGrpBegin(s)
out["first_end"] = grp_end(s)[0]
assert aclmdlRICaptureTaskGrpBegin(s) == 0
rc, h_empty = grp_end(s)
out["empty_handle"] = [rc, h_empty is not None]
rc, m = end(s)
out["capture_end"] = rc
out["empty_update"] = [aclmdlRICaptureTaskUpdateBegin(other, vp(h_empty)),
                       aclmdlRICaptureTaskUpdateEnd(other)]
# aclmdlRICaptureEnd with a group open: 107033, model destroyed; the stream keeps SAMPLE.
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclmdlRICaptureTaskGrpBegin(s) == 0
assert copy_kernel(dst, a, s) == 0
rc, m2 = end(s)
out["end_with_open_group"] = [rc, m2]
out["info_after"] = info(s)
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
out["sticky_begin"] = aclmdlRICaptureTaskGrpBegin(s)
out["sticky_end"] = grp_end(s)[0]
assert end(s)[0] == 0
out["sticky_update_begin"] = aclmdlRICaptureTaskUpdateBegin(s, vp(h_empty))
out["violations"] = simcann_violation_count()
result = out
"""
    )
    o = r.result
    assert [o["begin_null"], o["end_null_handle"]] == [100000, 100000]
    assert [o["begin_idle"], o["end_idle"]] == [107029, 107029]
    assert o["end_without_begin"] == 107033
    assert o["begin_twice"] == 107033
    assert o["first_end"] == 0
    assert o["empty_handle"] == [0, True]
    assert o["capture_end"] == 0
    assert o["empty_update"] == [0, 0], "an empty group is updated by no task"
    assert o["end_with_open_group"] == [107033, None]
    assert o["info_after"] == [0, 0, None]
    assert o["sticky_begin"] == 107033
    assert o["sticky_end"] == 507000
    assert o["sticky_update_begin"] == 107033
    assert o["violations"] == 0


def test_only_kernels_join_a_group(run_isolated):
    r = run_isolated(
        ACL
        + _TG
        + r"""
out = {}
h, d = host_filled(5.0), dev_filled(0.0)

def group_with(launch):
    s = new_stream()
    assert aclmdlRICaptureBegin(s, GLOBAL) == 0
    assert aclmdlRICaptureTaskGrpBegin(s) == 0
    rc = launch(s)
    st = info(s)[1]
    rc_end, handle = grp_end(s)
    return [rc, st, rc_end, handle, end(s)[0]]

out["pinned_h2d"] = group_with(lambda s: aclrtMemcpyAsync(d, NB, h, NB, H2D, s))
out["event_record"] = group_with(lambda s: aclrtRecordEvent(new_event(), s))
out["value_write"] = group_with(lambda s: aclrtValueWrite(d, 1, 0, s))
# kernel first, then a copy: the whole capture is lost
out["kernel_then_copy"] = group_with(
    lambda s: copy_kernel(d, d, s) or aclrtMemcpyAsync(d, NB, h, NB, H2D, s))
# a group open on the origin, a task on a joined stream: 107034
s, s2, e1, e2 = new_stream(), new_stream(), new_event(), new_event()
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclrtRecordEvent(e1, s) == 0
assert aclrtStreamWaitEvent(s2, e1) == 0  # s2 joins
assert aclmdlRICaptureTaskGrpBegin(s) == 0
out["other_stream_task"] = copy_kernel(d, d, s2)
out["other_info"] = info(s)[1]
out["other_grp_end"] = list(grp_end(s))
out["other_end"] = end(s)[0]
result = out
"""
    )
    o = r.result
    for what in ("pinned_h2d", "event_record", "value_write"):
        # refused (507009), capture INVALIDATED, TaskGrpEnd repeats the code with no handle,
        # aclmdlRICaptureEnd 507903
        assert o[what] == [507009, 2, 507009, None, 507903], what
    assert o["kernel_then_copy"] == [507009, 2, 507009, None, 507903]
    assert o["other_stream_task"] == 107034
    assert o["other_info"] == 2
    assert o["other_grp_end"] == [107034, None]
    assert o["other_end"] == 507903


def test_task_update_rules(run_isolated):
    r = run_isolated(
        ACL
        + _TG
        + r"""
out = {}
s, u, u2 = new_stream(), new_stream(), new_stream()
a, b, c, dst = dev_filled(1.0), dev_filled(2.0), dev_filled(3.0), dev_filled(0.0)
h_pinned = host_filled(7.0)
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclmdlRICaptureTaskGrpBegin(s) == 0
assert copy_kernel(dst, a, s) == 0
assert copy_kernel(b, dst, s) == 0  # two tasks: dst = a; b = dst
rc, h = grp_end(s)
assert rc == 0
out["begin_on_capturing"] = aclmdlRICaptureTaskUpdateBegin(s, vp(h))
out["end_on_capturing"] = aclmdlRICaptureTaskUpdateEnd(s)
rc, m = end(s)
assert rc == 0
out["begin_null_stream"] = aclmdlRICaptureTaskUpdateBegin(None, vp(h))
out["begin_null_handle"] = aclmdlRICaptureTaskUpdateBegin(u, None)
out["end_null"] = aclmdlRICaptureTaskUpdateEnd(None)
out["end_without_begin"] = aclmdlRICaptureTaskUpdateEnd(u)
v0 = simcann_violation_count()
out["bogus_handle"] = aclmdlRICaptureTaskUpdateBegin(u, h_pinned)
out["bogus_violation"] = simcann_violation_count() - v0
assert aclmdlRICaptureTaskUpdateBegin(u, vp(h)) == 0
out["nested_begin"] = aclmdlRICaptureTaskUpdateBegin(u, vp(h))
out["second_stream"] = aclmdlRICaptureTaskUpdateBegin(u2, vp(h))
# nothing but kernels may be launched on an updating stream
out["memcpy"] = aclrtMemcpyAsync(dst, NB, h_pinned, NB, H2D, u)
out["record"] = aclrtRecordEvent(new_event(), u)
out["wait"] = aclrtStreamWaitEvent(u, new_event())
out["value_write"] = aclrtValueWrite(dst, 1, 0, u)
out["execute"] = aclmdlRIExecuteAsync(vp(m), u)
out["other_kernel"] = zero_kernel(dst, u)  # the runtime counts it, then refuses its type
out["second_kernel"] = copy_kernel(c, dst, u)  # task 2: b = dst -> c = dst
out["one_too_many"] = copy_kernel(c, dst, u)
out["update_end"] = aclmdlRICaptureTaskUpdateEnd(u)
assert aclrtSynchronizeStream(u) == 0
replay(m, s)
out["replayed"] = [value_of(dst), value_of(b), value_of(c)]
# fewer kernels than the group holds: 507000; the ones launched stay updated
assert aclmdlRICaptureTaskUpdateBegin(u, vp(h)) == 0
assert copy_kernel(dst, b, u) == 0  # task 1 -> dst = b (2.0)
out["short_end"] = aclmdlRICaptureTaskUpdateEnd(u)
out["after_short_end"] = aclmdlRICaptureTaskUpdateBegin(u, vp(h))  # left update mode
assert aclmdlRICaptureTaskUpdateEnd(u) == 507000
assert aclrtSynchronizeStream(u) == 0
replay(m, s)
out["partial"] = [value_of(dst), value_of(c)]
# the model destroyed: its handles are dead
assert aclmdlRIDestroy(vp(m)) == 0
v0 = simcann_violation_count()
out["dead_handle"] = aclmdlRICaptureTaskUpdateBegin(u, vp(h))
out["dead_violation"] = simcann_violation_count() - v0
result = out
"""
    )
    o = r.result
    assert [o["begin_on_capturing"], o["end_on_capturing"]] == [107027, 107027]
    assert [o["begin_null_stream"], o["begin_null_handle"], o["end_null"]] == [100000] * 3
    assert o["end_without_begin"] == 107033
    assert [o["bogus_handle"], o["bogus_violation"]] == [100000, 1]
    assert o["nested_begin"] == 107033
    assert o["second_stream"] == 107033
    for what in ("memcpy", "record", "wait", "value_write", "execute"):
        assert o[what] == 507009, what
    assert o["other_kernel"] == 507000
    assert o["second_kernel"] == 0
    assert o["one_too_many"] == 507000
    assert o["update_end"] == 0
    # task 1 kept its capture (its update was refused), task 2 now writes c
    assert o["replayed"] == [1.0, 2.0, 1.0]
    assert o["short_end"] == 507000
    assert o["after_short_end"] == 0
    assert o["partial"] == [2.0, 2.0]
    assert [o["dead_handle"], o["dead_violation"]] == [100000, 1]


def test_pinned_copy_in_an_update(run_isolated):
    """A copy cannot be updated: the group's kernel is updated to read a new device buffer, which
    an eager copy from pinned memory on the update stream (outside update mode) fills."""
    r = run_isolated(
        ACL
        + _TG
        + r"""
out = {}
s, u = new_stream(), new_stream()
pin_a, pin_b, pin_c = host_filled(1.0), host_filled(2.0), host_filled(3.0)
stage_a, stage_b, dst = malloc_dev(NB), malloc_dev(NB), dev_filled(0.0)
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclrtMemcpyAsync(stage_a, NB, pin_a, NB, H2D, s) == 0  # captured, outside the group
assert aclmdlRICaptureTaskGrpBegin(s) == 0
assert copy_kernel(dst, stage_a, s) == 0
rc, h = grp_end(s)
rc, m = end(s)
assert rc == 0
replay(m, s)
out["replay_a"] = value_of(dst)
assert aclmdlRICaptureTaskUpdateBegin(u, vp(h)) == 0
out["pinned_h2d_in_update"] = aclrtMemcpyAsync(stage_b, NB, pin_b, NB, H2D, u)
out["abandon"] = aclmdlRICaptureTaskUpdateEnd(u)  # nothing launched: 507000, update mode left
assert aclrtMemcpyAsync(stage_b, NB, pin_b, NB, H2D, u) == 0  # eager, on the update stream
assert aclmdlRICaptureTaskUpdateBegin(u, vp(h)) == 0
assert copy_kernel(dst, stage_b, u) == 0
assert aclmdlRICaptureTaskUpdateEnd(u) == 0
assert aclrtSynchronizeStream(u) == 0
assert aclrtFreeHost(pin_b) == 0  # its bytes are on the device already
replay(m, s)
out["replay_b"] = value_of(dst)
# the updated kernel reads its new source when it runs: refill it, replay again
assert aclrtMemcpyAsync(stage_b, NB, pin_c, NB, H2D, u) == 0
assert aclrtSynchronizeStream(u) == 0
replay(m, s)
out["replay_c"] = value_of(dst)
# the captured copy still reads pin_a at each replay
put(pin_a, floats(4.0))
replay(m, s)
out["stage_a"] = value_of(stage_a)
# the updated kernel's new source freed: the replay is reported and the task not run
assert aclrtFree(stage_b) == 0
v0 = simcann_violation_count()
replay(m, s)
out["freed_source_violations"] = simcann_violation_count() - v0
result = out
"""
    )
    o = r.result
    assert o["replay_a"] == 1.0
    assert o["pinned_h2d_in_update"] == 507009
    assert o["abandon"] == 507000
    assert o["replay_b"] == 2.0
    assert o["replay_c"] == 3.0
    assert o["stage_a"] == 4.0
    assert o["freed_source_violations"] >= 1


def test_value_wait_orders_the_replay_after_the_update(run_isolated):
    """torch_npu's ExternalEvent pattern: the graph waits on a value the update stream writes after
    the update (docs/zh/dev_guide/04-03_task_update.md: update concurrent with the replay)."""
    r = run_isolated(
        ACL
        + _TG
        + r"""
out = {}
s, u = new_stream(), new_stream()
a, b, c, dst = dev_filled(1.0), dev_filled(2.0), dev_filled(3.0), dev_filled(0.0)
flag = malloc_dev(8)
assert aclrtMemset(flag, 8, 0, 8) == 0
out["bad"] = [aclrtValueWrite(None, 1, 0, u), aclrtValueWait(None, 1, EQ, u),
              aclrtValueWrite(vp(flag.value + 4), 1, 0, u), aclrtValueWait(flag, 1, 4, u)]
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclrtValueWait(flag, 1, EQ, s) == 0
assert aclrtValueWrite(flag, 0, 0, s) == 0
assert aclmdlRICaptureTaskGrpBegin(s) == 0
assert copy_kernel(dst, a, s) == 0
rc, h = grp_end(s)
rc, m = end(s)
assert rc == 0
got = []
for src in (b, c):
    simcann_set_task_delay_us(20000)  # the update stream is slow
    assert aclmdlRIExecuteAsync(vp(m), s) == 0  # enqueued first: blocks at the wait
    assert aclmdlRICaptureTaskUpdateBegin(u, vp(h)) == 0
    assert copy_kernel(dst, src, u) == 0
    assert aclmdlRICaptureTaskUpdateEnd(u) == 0
    assert aclrtValueWrite(flag, 1, 0, u) == 0
    assert aclrtSynchronizeStream(s) == 0
    simcann_set_task_delay_us(0)
    got.append(value_of(dst))
out["replays"] = got
out["flag_reset_by_replay"] = int.from_bytes(read_dev(flag, 8), "little")
result = out
"""
    )
    o = r.result
    assert o["bad"] == [100000, 100000, 107000, 107000]
    assert o["replays"] == [2.0, 3.0]
    assert o["flag_reset_by_replay"] == 0


def test_npugraph_update_through_torch_npu(run_isolated):
    """NPUGraph.update (auto_dispatch_capture) with a handler registered for an op the simulator
    has (add.out -> aclnnAdd): torch_npu's ExternalEvent + task group + update stream flow."""
    r = run_isolated(
        TORCH
        + r"""
from torch_npu.npu import NpuGraphOpHandler, register_npu_graph_handler

@register_npu_graph_handler(["add.out"])
class AddOut(NpuGraphOpHandler):
    # By hand: the base class reads UPDATE_SPECS only from torch_npu 2.10.0.post4.
    @classmethod
    def update_args(cls, record, update_input):
        record.args[1] = update_input["other"]

s = torch.npu.Stream()
a = torch.ones(8, device="npu")
b, c = torch.full((8,), 2.0, device="npu"), torch.full((8,), 5.0, device="npu")
out = torch.zeros(8, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g, stream=s, auto_dispatch_capture=True):
    torch.add(a, b, out=out)
got = []
for other in (c, b, c):
    g.update([{"other": other}])
    g.replay()
    torch.npu.synchronize()
    got.append(sorted(set(out.cpu().tolist())))
result = {"got": got, "violations": simcann_violation_count()}
"""
    )
    assert r.result == {"got": [[6.0], [3.0], [6.0]], "violations": 0}
