"""Host functions (aclrtLaunchHostFunc) are stream tasks: one runs once the stream's earlier
tasks completed, later tasks wait until it returns, and a capturing stream captures it, so every
replay of the model runs it again at that point (CANN api_ref 12_execution_control.md,
"aclrtLaunchHostFunc"; dev_guide 03-02_stream_management.md; hicann/runtime
ApiImpl::CallbackLaunchWithEvent, whose capture branch subscribes the capture stream).
torch_npu_pinpool's staged copies of non-contiguous pinned views rely on exactly this
(Note [Strided pinned copies in capture])."""

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
