"""A free waits only for a running task that touches the memory being freed (Note [Range checks]
in src/state.h; issue #47).

CANN: aclrtFreeHost / aclrtFree release the memory at once, "接口内部不会进行隐式的Device同步或流
同步、也不会等待使用该内存的任务完成" (hicann/runtime docs/api_docs/aclrtFreeHost.md, aclrtFree.md).
The simulator keeps one rule of its own: memory a task is touching (between its range check and
its end) cannot disappear under it, so a free of THAT memory waits for the task. A free of other
memory must not wait: before issue #47 one process-wide gate made every free wait for every
running task (an idle 1 MiB pinned block's aclrtFreeHost waited ~0.5 s for an unrelated 242 MiB
copy, and the differential fuzzer blamed whichever allocator happened to free meanwhile).

The slow task is a large copy: the per-task delay (SIMCANN_TASK_DELAY_US) runs BEFORE a task's
range check, so it cannot keep a task's memory in use. A host function ahead of the copy says when
the stream reaches it, one behind it when the copy is done.
"""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, VMM

pytestmark = pytest.mark.simulator

_PRELUDE = r"""
import time
HOSTFUNC = ctypes.CFUNCTYPE(None, vp)
aclrtLaunchHostFunc = _fn("aclrtLaunchHostFunc", args=[vp, HOSTFUNC, vp])
started = threading.Event()
times = {}
def _on_start(_arg):
    times["start"] = time.perf_counter()
    started.set()
def _on_end(_arg):
    times["end"] = time.perf_counter()
on_start, on_end = HOSTFUNC(_on_start), HOSTFUNC(_on_end)  # kept alive: the runtime calls them

def free_during_copy(s, dst, src, n, free, ptr):
    # One run: an H2D copy of n bytes between a start and an end marker, and free(ptr) once the
    # stream is inside the copy. The free's timings, relative to the copy's.
    started.clear()
    times.clear()
    assert aclrtLaunchHostFunc(s, on_start, None) == 0
    assert aclrtMemcpyAsync(dst, n, src, n, H2D, s) == 0
    assert aclrtLaunchHostFunc(s, on_end, None) == 0
    assert started.wait(60)
    time.sleep(0.02)  # the worker goes on from the marker into the copy's range check
    t0 = time.perf_counter()
    rc = free(ptr)
    t1 = time.perf_counter()
    assert aclrtSynchronizeStream(s) == 0, err()
    start, end = times["start"], times["end"]
    return {"rc": rc, "copy_s": end - start, "free_s": t1 - t0, "rest_s": end - t0,
            "early": end - t0 >= 0.5 * (end - start)}

def first_early(run, tries=5):
    # A loaded machine may wake this thread late, after most of the copy: such a run tells
    # nothing, so it is repeated (run() sets up again what the last one freed).
    for _ in range(tries):
        r = run()
        if r["early"]:
            break
    return r
"""


def _check_idle(r):
    """The free of memory the copy does not touch returned at once (before the fix it waited for
    the rest of the copy)."""
    assert r["rc"] == 0
    assert r["copy_s"] > 0.03, f"the copy is too fast to tell anything: {r}"
    assert r["early"], f"never called in the first half of the copy: {r}"
    assert r["free_s"] < r["copy_s"] / 5, r


def _check_touched(r):
    """The free of memory the running copy touches waited for the copy (the simulator never
    touches freed memory; the copy, past its range check, is no violation)."""
    assert r["rc"] == 0
    assert r["early"], f"never called in the first half of the copy: {r}"
    assert r["free_s"] >= 0.5 * r["rest_s"], r


def test_free_of_idle_memory_does_not_wait_for_a_running_copy(run_isolated):
    o = run_isolated(
        ACL
        + _PRELUDE
        + r"""
N = 512 << 20
s = new_stream()
dst = malloc_dev(N)
src = malloc_host(N)
ctypes.memset(src, 0x11, N)
out = {
    "idle_host": first_early(
        lambda: free_during_copy(s, dst, src, N, aclrtFreeHost, malloc_host(1 << 20))),
    "idle_dev": first_early(
        lambda: free_during_copy(s, dst, src, N, aclrtFree, malloc_dev(1 << 20))),
}
assert aclrtFreeHost(src) == 0

def touched():
    # The copy's own source: a fresh one each run, since the run frees it.
    p = malloc_host(N)
    ctypes.memset(p, 0x5A, N)
    assert aclrtMemset(dst, N, 0, N) == 0
    r = free_during_copy(s, dst, p, N, aclrtFreeHost, p)
    r["dst"] = [read_dev(ctypes.c_void_p(dst.value + off), 1).hex() for off in (0, N // 2, N - 1)]
    return r
out["touched"] = first_early(touched)
out["violations"] = simcann_violation_count()
out["host_bytes_live"] = simcann_host_bytes_live()
result = out
"""
    ).result
    _check_idle(o["idle_host"])
    _check_idle(o["idle_dev"])
    _check_touched(o["touched"])
    assert o["touched"]["dst"] == ["5a", "5a", "5a"], "the copy ran on the memory to its end"
    assert o["violations"] == 0
    assert o["host_bytes_live"] == 0


def test_unmap_waits_only_for_a_copy_over_that_mapping(run_isolated):
    """A range running on through adjacent mappings of one reservation resolves to the first
    mapping; the second is in use too (its unmap waits), a third, idle one is not."""
    o = run_isolated(
        ACL
        + VMM
        + _PRELUDE
        + r"""
M = 256 << 20
va = reserve(2 * M + SEG)
rc_a, ha = physical(M)
rc_b, hb = physical(M)
rc_c, hc = physical(SEG)
assert (rc_a, rc_b, rc_c) == (0, 0, 0)
a, b, c = va, va + M, va + 2 * M
def map_(p, h, n):
    assert aclrtMapMem(vp(p), n, 0, h, 0) == 0, err()
map_(a, ha, M)
ctypes.memset(a, 0x11, M)
dst = malloc_dev(2 * M)
s = new_stream()

def idle():
    map_(c, hc, SEG)  # mapped again for each run (the run unmaps it)
    return free_during_copy(s, dst, vp(a), 2 * M, aclrtUnmapMem, vp(c))

def touched():
    map_(b, hb, M)
    ctypes.memset(b, 0x22, M)
    assert aclrtMemset(dst, 2 * M, 0, 2 * M) == 0
    r = free_during_copy(s, dst, vp(a), 2 * M, aclrtUnmapMem, vp(b))
    r["dst"] = [read_dev(ctypes.c_void_p(dst.value + off), 1).hex()
                for off in (0, M - 1, M, 2 * M - 1)]
    return r

map_(b, hb, M)  # the copy's range, one over mappings a and b, while c is unmapped
ctypes.memset(b, 0x22, M)
out = {"idle": first_early(idle)}
assert aclrtUnmapMem(vp(b)) == 0
out["touched"] = first_early(touched)
out["violations"] = simcann_violation_count()
assert aclrtUnmapMem(vp(a)) == 0
for h in (ha, hb, hc):
    assert aclrtFreePhysical(h) == 0
assert aclrtReleaseMemAddress(vp(va)) == 0
result = out
"""
    ).result
    _check_idle(o["idle"])
    _check_touched(o["touched"])
    assert o["touched"]["dst"] == ["11", "11", "22", "22"], "the copy ran on both mappings"
    assert o["violations"] == 0
