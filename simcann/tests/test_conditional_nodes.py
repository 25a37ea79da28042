"""Conditional graph nodes (src/cond.cpp): aclmdlRICondHandleCreate / aclmdlRICondHandleGetCondPtr /
aclmdlRIAddCondTask / aclmdlRICaptureToModelRIBegin, through the ACL C API (ctypes) and through
torch_npu 2.13's ``torch.cond`` capture (NPUGraph.begin_capture_to_if_node).

Each rule cites hicann/runtime in src/cond.cpp. Builds against a wheel whose ACL headers have no
conditional-node API (torch_npu 2.10) do not implement them: the tests skip there.
"""

from __future__ import annotations

import os

import pytest

from .simcann_snippets import ACL, TORCH

pytestmark = pytest.mark.simulator


def _implemented() -> bool:
    lib = os.environ.get("SIMCANN_LIB_DIR", "")
    path = os.path.join(lib, os.pardir, "gen", "implemented.txt")
    try:
        with open(path) as f:
            return "aclmdlRICondHandleCreate" in f.read().split()
    except OSError:
        return False


requires_cond = pytest.mark.skipif(
    not _implemented(),
    reason="the wheel's ACL headers declare no conditional-node API (torch_npu 2.10)",
)

# Bindings and helpers on top of the ACL prelude. A condition task's model array is
# `subs`; `cond_value(h)` reads a handle's 8-byte value (outside any GLOBAL capture).
COND = (
    ACL
    + r"""
class CondParams(ctypes.Structure):
    _fields_ = [("handle", vp), ("type", c_int), ("size", ctypes.c_uint32),
                ("modelRIArray", ctypes.POINTER(vp))]

aclmdlRICondHandleCreate = _fn(
    "aclmdlRICondHandleCreate", args=[vp, ctypes.c_uint32, c_int, ctypes.POINTER(vp)])
aclmdlRICondHandleGetCondPtr = _fn(
    "aclmdlRICondHandleGetCondPtr", args=[vp, ctypes.POINTER(vp)])
aclmdlRIAddCondTask = _fn("aclmdlRIAddCondTask", args=[CondParams, vp, ctypes.c_uint32])
aclmdlRICaptureToModelRIBegin = _fn("aclmdlRICaptureToModelRIBegin", args=[vp, vp, c_int])
aclmdlRIGetId = _fn("aclmdlRIGetId", args=[vp, ctypes.POINTER(ctypes.c_uint32)])
aclrtMemsetAsync = _fn("aclrtMemsetAsync", args=[vp, c_size, c_int, c_size, vp])
aclrtCtxGetCurrentDefaultStream = _fn("aclrtCtxGetCurrentDefaultStream", args=[ctypes.POINTER(vp)])
IF, WHILE, SWITCH = 0, 1, 2
ASSIGN_DEFAULT = 1

def handle(model, default=0, flag=ASSIGN_DEFAULT):
    h = vp()
    rc = aclmdlRICondHandleCreate(model, default, flag, byref(h))
    return rc, h

def cond_ptr(h):
    p = vp()
    assert aclmdlRICondHandleGetCondPtr(h, byref(p)) == 0
    return p

def add_cond(h, stream, kind=IF, size=1, flags=0):
    subs = (vp * max(size, 1))()
    rc = aclmdlRIAddCondTask(CondParams(h, kind, size, subs), stream, flags)
    return rc, [subs[i] for i in range(size)] if rc == 0 else []

def begin_parent(s):
    assert aclmdlRICaptureBegin(s, GLOBAL) == 0
    return info(s)[2]

def cond_value(h):
    return int.from_bytes(read_dev(cond_ptr(h), 8), "little")

def h2d(dst, src, n, s):
    assert aclrtMemcpyAsync(dst, n, src, n, H2D, s) == 0

def d2d(dst, src, n, s):
    assert aclrtMemcpyAsync(dst, n, src, n, D2D, s) == 0

def model_id(m):
    i = ctypes.c_uint32()
    return aclmdlRIGetId(m, byref(i))
"""
)


@requires_cond
def test_if_node_runs_its_child_only_when_the_condition_is_true(run_isolated):
    """torch_npu's shape: the predicate byte is copied (captured, parent stream) into the
    condition value, then the condition task; the child, captured on its own stream, copies a
    pinned host buffer (read at replay time) to the device."""
    r = run_isolated(
        COND
        + r"""
out = {}
s, cs = new_stream(), new_stream()
pred, dst = malloc_dev(8), malloc_dev(8)
host, pflag = malloc_host(8), malloc_host(8)
put(host, b"AAAAAAAA")
assert aclrtMemcpy(dst, 8, ctypes.c_char_p(b"--------"), 8, H2D) == 0
parent = begin_parent(s)
rc, h = handle(parent)
out["create"] = rc
p = cond_ptr(h)
out["ptr_is_device"] = p.value is not None and p.value not in (pred.value, dst.value)
assert aclrtMemsetAsync(p, 8, 0, 8, s) == 0
d2d(p, pred, 1, s)
rc, subs = add_cond(h, s)
out["add"] = [rc, len(subs), subs[0] is not None]
child = subs[0]
out["parent_info_after_add"] = info(s)[1:] == (ACTIVE, parent)
out["child_idle"] = info(cs)[1]
out["to_child"] = aclmdlRICaptureToModelRIBegin(cs, child, GLOBAL)
out["child_info"] = info(cs)[1:] == (ACTIVE, child)
out["parent_info"] = info(s)[1:] == (ACTIVE, parent)
h2d(dst, host, 8, cs)
out["sub_id"] = model_id(child)
rc, m = end(cs)
out["end_child"] = [rc, m == child]
out["child_after"] = info(cs)[1]
rc, m = end(s)
out["end_parent"] = [rc, m == parent]
out["value_after_capture"] = cond_value(h)
seen = []
for flag in (1, 0, 1, 2):
    assert aclrtMemcpy(dst, 8, ctypes.c_char_p(b"--------"), 8, H2D) == 0
    assert aclrtMemcpy(pred, 1, ctypes.c_char_p(bytes([flag])), 1, H2D) == 0
    put(host, bytes([ord("A") + len(seen)]) * 8)
    assert aclmdlRIExecuteAsync(vp(parent), s) == 0
    assert aclrtSynchronizeStream(s) == 0
    seen.append(read_dev(dst, 8).decode())
out["seen"] = seen
dev0 = simcann_device_bytes_live()
out["destroy"] = aclmdlRIDestroy(vp(parent))
out["cond_memory_freed"] = dev0 - simcann_device_bytes_live()
out["handle_after_destroy"] = aclmdlRICondHandleGetCondPtr(h, byref(vp()))
out["child_after_destroy"] = model_id(child)
out["violations"] = simcann_violation_count()
result = out
"""
    )
    o = r.result
    assert o["create"] == 0
    assert o["ptr_is_device"]
    assert o["add"] == [0, 1, True]
    assert o["parent_info_after_add"]
    assert o["child_idle"] == 0
    assert o["to_child"] == 0
    assert o["child_info"] and o["parent_info"]
    assert o["sub_id"] == 0
    assert o["end_child"] == [0, True]
    assert o["child_after"] == 0
    assert o["end_parent"] == [0, True]
    assert o["value_after_capture"] == 0  # zeroed at creation; the captured copy has not run
    # predicate 1: the child copies the host buffer as it is at that replay; 0: it does not;
    # any non-zero value (the low byte here) is true.
    assert o["seen"] == ["AAAAAAAA", "--------", "CCCCCCCC", "DDDDDDDD"]
    assert o["destroy"] == 0
    assert o["cond_memory_freed"] == 8  # the condition value goes with the root model
    assert o["handle_after_destroy"] == 107017
    assert o["child_after_destroy"] == 100000  # aclmdlRIGetId of an unknown model
    assert o["violations"] == 0


@requires_cond
def test_condition_task_runs_in_stream_order(run_isolated):
    """Parent work before the condition task, the child, and parent work after it run in that
    order, asynchronously (per-task delay): the child sees what the parent wrote before the
    condition task, the parent's later copy sees what the child wrote; the predicate is set by
    a stream-ordered copy queued before the replay."""
    r = run_isolated(
        COND
        + r"""
simcann_set_task_delay_us(3000)
s, cs = new_stream(), new_stream()
pred, a, b, before, after = (malloc_dev(8) for _ in range(5))
src, csrc, pf, snap = malloc_host(8), malloc_host(8), malloc_host(8), malloc_host(16 * 4)
parent = begin_parent(s)
rc, h = handle(parent)
p = cond_ptr(h)
assert aclrtMemsetAsync(p, 8, 0, 8, s) == 0
d2d(p, pred, 1, s)
h2d(a, src, 8, s)                      # parent, before the condition task
rc, (child,) = add_cond(h, s)
assert aclmdlRICaptureToModelRIBegin(cs, child, GLOBAL) == 0
d2d(before, a, 8, cs)                  # child: sees the parent's earlier copy
h2d(b, csrc, 8, cs)                    # child: its own write
assert end(cs)[0] == 0
d2d(after, b, 8, s)                    # parent, after: sees the child's write
assert end(s)[0] == 0
for i, flag in enumerate((1, 0, 1, 1)):
    put(pf, bytes([flag]) + bytes(7))
    put(src, bytes([ord("a") + i]) * 8)
    put(csrc, bytes([ord("A") + i]) * 8)
    assert aclrtMemcpyAsync(pred, 1, pf, 1, H2D, s) == 0
    assert aclrtMemsetAsync(b, 8, ord("-"), 8, s) == 0
    assert aclrtMemsetAsync(before, 8, ord("-"), 8, s) == 0
    assert aclmdlRIExecuteAsync(vp(parent), s) == 0
    row = vp(snap.value + 16 * i)
    assert aclrtMemcpyAsync(row, 8, before, 8, D2H, s) == 0
    assert aclrtMemcpyAsync(vp(row.value + 8), 8, after, 8, D2H, s) == 0
    assert aclrtSynchronizeStream(s) == 0  # the host buffers are rewritten next
raw = get(snap, 64)
result = {"rows": [[raw[16 * i:16 * i + 8].decode(), raw[16 * i + 8:16 * i + 16].decode()]
                   for i in range(4)],
          "violations": simcann_violation_count()}
"""
    )
    o = r.result
    assert o["rows"] == [
        ["aaaaaaaa", "AAAAAAAA"],
        ["--------", "--------"],
        ["cccccccc", "CCCCCCCC"],
        ["dddddddd", "DDDDDDDD"],
    ]
    assert o["violations"] == 0


@requires_cond
def test_queued_replays_keep_their_own_condition(run_isolated):
    """Several replays queued without a synchronize, each with its own predicate (set by a
    stream-ordered copy before it): each replay's condition task reads its own predicate. The
    host-side reset to the default value at aclmdlRIExecuteAsync does not disturb them, because
    torch_npu's captured memset + copy rewrite the value inside each replay."""
    r = run_isolated(
        COND
        + r"""
simcann_set_task_delay_us(2000)
s, cs = new_stream(), new_stream()
pred, counter = malloc_dev(8), malloc_dev(8)
row = malloc_dev(8)
parent = begin_parent(s)
rc, h = handle(parent)
p = cond_ptr(h)
assert aclrtMemsetAsync(p, 8, 0, 8, s) == 0
d2d(p, pred, 1, s)
rc, (child,) = add_cond(h, s)
assert aclmdlRICaptureToModelRIBegin(cs, child, GLOBAL) == 0
assert aclrtMemsetAsync(row, 8, ord("T"), 8, cs) == 0
assert end(cs)[0] == 0
assert end(s)[0] == 0
flags = [1, 0, 0, 1, 1, 0]
snap = malloc_host(8 * len(flags))
pins = []
for i, flag in enumerate(flags):
    pf = malloc_host(8)
    pins.append(pf)
    put(pf, bytes([flag]) + bytes(7))
    assert aclrtMemcpyAsync(pred, 1, pf, 1, H2D, s) == 0
    assert aclrtMemsetAsync(row, 8, ord("F"), 8, s) == 0
    assert aclmdlRIExecuteAsync(vp(parent), s) == 0
    assert aclrtMemcpyAsync(vp(snap.value + 8 * i), 8, row, 8, D2H, s) == 0
assert aclrtSynchronizeStream(s) == 0
raw = get(snap, 8 * len(flags))
result = {"rows": [raw[8 * i:8 * i + 1].decode() for i in range(len(flags))],
          "violations": simcann_violation_count()}
"""
    )
    assert r.result == {"rows": ["T", "F", "F", "T", "T", "F"], "violations": 0}


@requires_cond
def test_default_value_is_assigned_at_each_execute_and_user_values_persist(run_isolated):
    """ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT: the value is set to the default at every
    aclmdlRIExecuteAsync (on the host, at the call); flag 0: the user's value stays."""
    r = run_isolated(
        COND
        + r"""
out = {}
s, cs = new_stream(), new_stream()
row = malloc_dev(8)
def build(default, flag):
    parent = begin_parent(s)
    rc, h = handle(parent, default, flag)
    rc, (child,) = add_cond(h, s)
    assert aclmdlRICaptureToModelRIBegin(cs, child, GLOBAL) == 0
    assert aclrtMemsetAsync(row, 8, ord("T"), 8, cs) == 0
    assert end(cs)[0] == 0
    assert end(s)[0] == 0
    return parent, h
def run(parent, value=None, h=None):
    if value is not None:
        assert aclrtMemcpy(cond_ptr(h), 8, ctypes.c_char_p(value.to_bytes(8, "little")), 8,
                           H2D) == 0
    assert aclrtMemset(row, 8, ord("F"), 8) == 0
    assert aclmdlRIExecuteAsync(vp(parent), s) == 0
    assert aclrtSynchronizeStream(s) == 0
    return read_dev(row, 1).decode()
pd, hd = build(1, ASSIGN_DEFAULT)
out["default_1"] = [run(pd), run(pd, 0, hd), cond_value(hd)]
pz, hz = build(0, ASSIGN_DEFAULT)
out["default_0"] = [run(pz), run(pz, 5, hz), cond_value(hz)]
pu, hu = build(1, 0)   # user-managed: the default is never assigned
out["user"] = [run(pu), run(pu, 7, hu), run(pu), run(pu, 0, hu), cond_value(hu)]
result = out
"""
    )
    o = r.result
    # written 0 before the call, the call assigns 1 again
    assert o["default_1"] == ["T", "T", 1]
    assert o["default_0"] == ["F", "F", 0]
    assert o["user"] == ["F", "T", "T", "F", 0]


@requires_cond
def test_if_else_while_and_switch(run_isolated):
    """IF with two sub models runs the second when the value is zero; WHILE reruns its body
    while the value stays non-zero (the body clears it: once); SWITCH runs sub[value] or, out of
    range, nothing."""
    r = run_isolated(
        COND
        + r"""
out = {}
s = new_stream()
streams = [new_stream() for _ in range(3)]
row, zero = malloc_dev(8), malloc_dev(8)
assert aclrtMemset(zero, 8, 0, 8) == 0
def build(kind, size, body=None):
    parent = begin_parent(s)
    rc, h = handle(parent, 0, 0)
    rc, subs = add_cond(h, s, kind, size)
    assert rc == 0, rc
    for i, sub in enumerate(subs):
        cs = streams[i]
        assert aclmdlRICaptureToModelRIBegin(cs, sub, GLOBAL) == 0
        assert aclrtMemsetAsync(vp(row.value + i), 1, ord("0") + i, 1, cs) == 0
        if body:
            body(h, cs)
        assert end(cs)[0] == 0
    assert end(s)[0] == 0
    return parent, h
def run(parent, h, value):
    assert aclrtMemcpy(cond_ptr(h), 8, ctypes.c_char_p(value.to_bytes(8, "little")), 8,
                       H2D) == 0
    assert aclrtMemset(row, 8, ord("."), 8) == 0
    assert aclmdlRIExecuteAsync(vp(parent), s) == 0
    assert aclrtSynchronizeStream(s) == 0
    return read_dev(row, 4).decode()
pi, hi = build(IF, 2)
out["if_else"] = [run(pi, hi, 1), run(pi, hi, 0), run(pi, hi, 1 << 40)]
pw, hw = build(WHILE, 1, lambda h, cs: d2d(cond_ptr(h), zero, 8, cs))
out["while"] = [run(pw, hw, 3), run(pw, hw, 0), cond_value(hw)]
ps, hs = build(SWITCH, 3)
out["switch"] = [run(ps, hs, 0), run(ps, hs, 2), run(ps, hs, 3), run(ps, hs, 1 << 33)]
result = out
"""
    )
    o = r.result
    assert o["if_else"] == ["0...", ".1..", "0..."]  # the full 64-bit value is compared
    assert o["while"] == ["0...", "....", 0]
    assert o["switch"] == ["0...", "..2.", "....", "...."]


@requires_cond
def test_misuse_codes(run_isolated):
    r = run_isolated(
        COND
        + r"""
out = {}
s, s2, cs, cs2 = new_stream(), new_stream(), new_stream(), new_stream()
default_stream = vp()
assert aclrtCtxGetCurrentDefaultStream(byref(default_stream)) == 0
# handle creation
out["create_null_model"] = handle(None)[0]
out["create_null_out"] = aclmdlRICondHandleCreate(vp(1), 0, 0, None)
out["getptr_null"] = aclmdlRICondHandleGetCondPtr(None, byref(vp()))
parent = begin_parent(s)
out["create_bad_flag"] = handle(parent, 0, 2)[0]
rc, h = handle(parent)
# condition task
out["add_null_stream"] = add_cond(h, None)[0]
out["add_bad_type"] = add_cond(h, s, kind=3)[0]
out["add_flags"] = add_cond(h, s, flags=1)[0]
out["add_null_handle"] = add_cond(None, s)[0]
out["add_null_array"] = aclmdlRIAddCondTask(CondParams(h, IF, 1, None), s, 0)
out["add_if_size_0"] = add_cond(h, s, IF, 0)[0]
out["add_if_size_3"] = add_cond(h, s, IF, 3)[0]
out["add_while_size_2"] = add_cond(h, s, WHILE, 2)[0]
out["add_switch_size_0"] = add_cond(h, s, SWITCH, 0)[0]
out["add_not_capturing"] = add_cond(h, s2)[0]
other = begin_parent(s2)
out["add_other_model"] = add_cond(h, s2)[0]
rc, subs = add_cond(h, s)
assert rc == 0
child = subs[0]
out["add_used_handle"] = add_cond(h, s)[0]
# capture into the sub model
out["to_null"] = aclmdlRICaptureToModelRIBegin(None, child, GLOBAL)
out["to_root_model"] = aclmdlRICaptureToModelRIBegin(cs, parent, GLOBAL)
out["to_bad_mode"] = aclmdlRICaptureToModelRIBegin(cs, child, 3)
out["to_default_stream"] = aclmdlRICaptureToModelRIBegin(default_stream, child, GLOBAL)
out["to_capturing_stream"] = aclmdlRICaptureToModelRIBegin(s2, child, GLOBAL)
out["exec_sub_before"] = aclmdlRIExecuteAsync(child, cs)
assert aclmdlRICaptureToModelRIBegin(cs, child, GLOBAL) == 0
out["to_again"] = aclmdlRICaptureToModelRIBegin(cs2, child, GLOBAL)
out["end_parent_child_capturing"] = end(s)[0]
# the failed end destroyed the parent: its handle is dead and the child capture invalidated
out["parent_after"] = [info(s)[1], model_id(parent), aclmdlRICondHandleGetCondPtr(h, byref(vp()))]
out["create_on_dead_model"] = handle(parent)[0]
out["child_capture_after"] = info(cs)[1]
out["end_child_after"] = end(cs)[0]
assert end(s2)[0] == 0
# a sub model never captured also fails the parent's end
p3 = begin_parent(s)
rc, h3 = handle(p3)
rc, (never,) = add_cond(h3, s)
out["end_parent_child_never_captured"] = end(s)[0]
# an ended model takes no new handle; a sub model cannot be executed or destroyed
p4 = begin_parent(s)
rc, h4 = handle(p4)
rc, (c4,) = add_cond(h4, s)
assert aclmdlRICaptureToModelRIBegin(cs, c4, GLOBAL) == 0
out["end_child_null_out"] = aclmdlRICaptureEnd(cs, None)
out["end_root_null_out"] = [aclmdlRICaptureEnd(s, None), info(s)[1]]
rc, m4 = end(s)
assert rc == 0 and m4 == p4
out["create_on_ended"] = handle(p4)[0]
out["to_ended_child"] = aclmdlRICaptureToModelRIBegin(cs2, c4, GLOBAL)
out["exec_sub"] = aclmdlRIExecuteAsync(c4, s)
out["destroy_sub"] = aclmdlRIDestroy(c4)
out["destroy_root"] = aclmdlRIDestroy(vp(p4))
result = out
"""
    )
    o = r.result
    assert o["create_null_model"] == 100000
    assert o["create_null_out"] == 100000
    assert o["getptr_null"] == 100000
    assert o["create_bad_flag"] == 107000
    assert o["add_null_stream"] == 100000
    for k in ("add_bad_type", "add_flags", "add_null_handle", "add_null_array", "add_if_size_0",
              "add_if_size_3", "add_while_size_2", "add_switch_size_0", "add_other_model",
              "add_used_handle"):
        assert o[k] == 107000, (k, o[k])
    assert o["add_not_capturing"] == 107029
    assert o["to_null"] == 100000
    assert o["to_root_model"] == 107000
    assert o["to_bad_mode"] == 107000
    assert o["to_default_stream"] == 207000
    assert o["to_capturing_stream"] == 107027
    assert o["exec_sub_before"] == 207000
    assert o["to_again"] == 107026
    # ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING: 107046 in the 2.13 wheel's rt_error_codes.h
    assert o["end_parent_child_capturing"] == 107046
    assert o["parent_after"] == [0, 100000, 107017]
    assert o["create_on_dead_model"] == 107017
    # the simulator's choice for the runtime's undefined case (src/cond.cpp)
    assert o["child_capture_after"] == 2
    assert o["end_child_after"] == 507903
    assert o["end_parent_child_never_captured"] == 107046
    assert o["end_child_null_out"] == 0
    assert o["end_root_null_out"] == [107000, 1]
    assert o["create_on_ended"] == 107000
    assert o["to_ended_child"] == 107026
    assert o["exec_sub"] == 207000
    assert o["destroy_sub"] == 207000
    assert o["destroy_root"] == 0


@requires_cond
def test_torch_cond_captured_as_if_nodes(run_isolated):
    """torch_npu 2.13: ``torch.cond`` under NPUGraphCaptureControlFlowOpDispatchMode is captured
    as two IF nodes (pred, logical_not(pred)); a replay queued behind its own ``pred.fill_``
    gives that predicate's branch, in stream order. Each replay is waited for before the next is
    issued: the next aclmdlRIExecuteAsync writes the handles' default value on the host, so a
    replay still queued may read it instead of its own predicate (Note [Conditional nodes])."""
    r = run_isolated(
        TORCH
        + r"""
from torch_npu.npu._npugraph_conditional_nodes import (
    NPUGraphCaptureControlFlowOpDispatchMode as CondMode)
simcann_set_task_delay_us(500)
torch.npu.set_stream(torch.npu.Stream())
pred = torch.tensor(True, device="npu")
x = torch.arange(4, dtype=torch.float32, device="npu")
torch.npu.synchronize()
g = torch.npu.NPUGraph()
with torch.npu.graph(g), CondMode():
    out = torch.cond(pred, lambda t: t * 2.0, lambda t: t - 10.0, (x,))
torch.npu.synchronize()
flags = [True, False, False, True]
rows = torch.empty(len(flags), 4, device="npu")
for i, p in enumerate(flags):
    pred.fill_(p)
    g.replay()
    rows[i].copy_(out)
    torch.npu.synchronize()
result = {"rows": rows.cpu().tolist(), "violations": simcann_violation_count()}
"""
    )
    t, f = [0.0, 2.0, 4.0, 6.0], [-10.0, -9.0, -8.0, -7.0]
    assert r.result == {"rows": [t, f, f, t], "violations": 0}
