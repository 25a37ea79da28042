"""Misuse and runtime failures around capture leave no dangling registration, lose no block
and say what to do.

These check the plugin's own bookkeeping (``pool_stats()`` and the routing of later pinned
allocations), which does not exist with the plugin off, so they run with the plugin only;
the final "capture still works and replays correctly" step of each scenario is what would
break if a dangling registration were left behind.
"""

from __future__ import annotations

from ._snippets import PRELUDE

CHECK_CLEAN = r"""
def clean_capture_works(value):
    dev = torch.zeros(N, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        x = pinned(value)
        dev.copy_(x, non_blocking=True)
        del x
    others = [pinned(-1.0) for _ in range(4)]
    g.replay(); torch.npu.synchronize()
    ok = values(dev) == [float(value)]
    del g; gc.collect()
    torch.npu.synchronize()   # the pool's retirement waits for its replays
    return ok and torch_npu_pinpool.pool_stats() == []

def error_of(fn):
    try:
        fn()
    except Exception as e:
        return str(e)
    return None
"""

USER_ERRORS = r"""
out = {}
# capture on the default stream: torch_npu refuses; nothing stays registered
g = torch.npu.NPUGraph()
out["default_stream"] = error_of(lambda: g.capture_begin())
out["after_default"] = torch_npu_pinpool.pool_stats()
side = torch.npu.Stream()
torch.npu.set_stream(side)
out["clean1"] = clean_capture_works(1.0)

# end on another stream: refused, the capture is still underway; a correct retry works
dev = torch.zeros(N, device="npu")
g = torch.npu.NPUGraph()
g.capture_begin()
x = pinned(2.0)
dev.copy_(x, non_blocking=True)
del x
torch.npu.set_stream(torch.npu.Stream())
out["wrong_stream"] = error_of(g.capture_end)
out["still_capturing"] = [p["capturing"] for p in torch_npu_pinpool.pool_stats()]
torch.npu.set_stream(side)
g.capture_end()
others = [pinned(-1.0) for _ in range(4)]
g.replay(); torch.npu.synchronize()
out["retry_replay"] = values(dev)
g.reset(); g.reset()  # reset twice is harmless
gc.collect(); torch.npu.synchronize()
out["after_reset"] = torch_npu_pinpool.pool_stats()

# exception inside `with torch.npu.graph`: the capture ends, the graph owns its pool
def body():
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        y = pinned(3.0)
        dev.copy_(y, non_blocking=True)
        raise ValueError("user code failed")
out["with_error"] = error_of(body)
gc.collect(); torch.npu.synchronize()
out["after_with"] = torch_npu_pinpool.pool_stats()
out["clean2"] = clean_capture_works(4.0)
result = out
"""


def test_user_errors(run_isolated):
    r = run_isolated(PRELUDE + CHECK_CLEAN + USER_ERRORS)
    o = r.result
    assert "default stream" in o["default_stream"] or "non-default" in o["default_stream"]
    assert o["after_default"] == []
    assert o["clean1"]
    assert o["wrong_stream"] and "same stream" in o["wrong_stream"]
    assert o["still_capturing"] == [True]
    assert o["retry_replay"] == [2.0]
    assert o["after_reset"] == []
    assert o["with_error"] == "user code failed"
    assert o["after_with"] == []
    assert o["clean2"]


RUNTIME_FAULTS = r"""
out = {}
torch.npu.set_stream(torch.npu.Stream())
dev = torch.zeros(N, device="npu")

# aclmdlRICaptureBegin fails
fail_next("capture_begin")
g = torch.npu.NPUGraph()
out["begin_failed"] = error_of(lambda: g.capture_begin()) is not None
out["after_begin"] = torch_npu_pinpool.pool_stats()
out["clean1"] = clean_capture_works(1.0)

# aclmdlRICaptureEnd fails: the capture is over without a graph
fail_next("capture_end")
g = torch.npu.NPUGraph()
def failing_end():
    with torch.npu.graph(g):
        x = pinned(2.0)
        dev.copy_(x, non_blocking=True)
        del x
out["end_failed"] = error_of(failing_end) is not None
out["capturing_after_end"] = torch.npu.is_current_stream_capturing()
del g; gc.collect(); torch.npu.synchronize()
out["after_end"] = torch_npu_pinpool.pool_stats()
out["clean2"] = clean_capture_works(3.0)

# pinned allocation fails inside a capture
g = torch.npu.NPUGraph()
def failing_malloc():
    with torch.npu.graph(g):
        fail_next("malloc_host")
        x = torch.empty(1 << 20).pin_memory()
out["malloc_failed"] = error_of(failing_malloc) is not None
del g; gc.collect(); torch.npu.synchronize()
out["after_malloc"] = torch_npu_pinpool.pool_stats()
out["clean3"] = clean_capture_works(5.0)
result = out
"""


# torch_npu < 2.10 bug, not ours (the same with TORCH_NPU_PINPOOL=0): its device caching
# allocator keeps a capture whose capture_begin / capture_end failed in `captures_underway`, so
# the torch.npu.empty_cache() every later torch.npu.graph enters with fails "INTERNAL ASSERT
# captures_underway.empty()". That call only trims the device cache: let exactly that assert
# pass, so clean_capture_works() still checks the host allocator after the fault.
TOLERATE_STALE_DEVICE_CAPTURE = r"""
if npu_version() < (2, 10):
    _native_empty_cache = torch.npu.empty_cache
    def _empty_cache():
        try:
            _native_empty_cache()
        except RuntimeError as e:
            if "captures_underway.empty()" not in str(e):
                raise
    torch.npu.empty_cache = _empty_cache
"""


def test_runtime_faults(run_isolated):
    r = run_isolated(PRELUDE + TOLERATE_STALE_DEVICE_CAPTURE + CHECK_CLEAN + RUNTIME_FAULTS)
    o = r.result
    assert o["begin_failed"] and o["after_begin"] == [] and o["clean1"]
    assert o["end_failed"] and not o["capturing_after_end"]
    assert o["after_end"] == [] and o["clean2"]
    assert o["malloc_failed"] and o["after_malloc"] == [] and o["clean3"]
