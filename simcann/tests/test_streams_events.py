"""Streams run asynchronously and in order; events complete when their stream reaches them."""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, TORCH

pytestmark = pytest.mark.simulator


def test_async_ordering_and_events(run_isolated):
    r = run_isolated(
        TORCH
        + r"""
out = {}
N = 4096
# (1 s: generous, so that a loaded CI machine cannot make the race go the other way)
simcann_set_task_delay_us(1000000)
# 1. A host write issued right after a non_blocking H2D copy (no synchronize) reaches the device:
#    the copy runs later, on the stream's worker.
p = torch.full((N,), 1.0).pin_memory()
x = p.to("npu", non_blocking=True)
p.fill_(2.0)
torch.npu.synchronize()
out["copy_is_async"] = bool((x.cpu() == 2.0).all())

# 2. Events: never recorded = complete; pending until the stream reaches the record.
never = torch.npu.Event()
out["never_recorded"] = never.query()
e = torch.npu.Event()
y = p.to("npu", non_blocking=True)
e.record()
import time; time.sleep(0.05)
out["pending"] = e.query()
out["stream_pending"] = torch.npu.current_stream().query()
e.synchronize()
out["done"] = e.query()
out["stream_done"] = torch.npu.current_stream().query()
# ...and the other way round: a stream synchronized past a record has completed its event.
e2 = torch.npu.Event()
z2 = p.to("npu", non_blocking=True)
e2.record()
torch.npu.current_stream().synchronize()
out["event_done_after_stream_sync"] = e2.query()
simcann_set_task_delay_us(200000)

# 3. Cross-stream order through wait_event: s2's D2H waits for s1's (slow) H2D.
s1, s2 = torch.npu.Stream(), torch.npu.Stream()
src = torch.arange(N, dtype=torch.float32).pin_memory()
with torch.npu.stream(s1):
    d = src.to("npu", non_blocking=True)
    ev = s1.record_event()
s2.wait_event(ev)
back = torch.empty(N, pin_memory=True)
with torch.npu.stream(s2):
    back.copy_(d, non_blocking=True)
s2.synchronize()
out["wait_event_orders"] = torch.equal(back, src)

# 4. In-order within a stream: two copies into the same device tensor, the last one wins.
a = torch.full((N,), 3.0).pin_memory()
b = torch.full((N,), 4.0).pin_memory()
z = torch.empty(N, device="npu")
z.copy_(a, non_blocking=True)
z.copy_(b, non_blocking=True)
out["in_order"] = bool((z.cpu() == 4.0).all())
simcann_set_task_delay_us(0)
result = out
"""
    )
    o = r.result
    assert o["copy_is_async"], "the queued copy must read the host buffer when it runs"
    assert o["never_recorded"] is True
    assert o["pending"] is False and o["stream_pending"] is False
    assert o["done"] is True and o["stream_done"] is True
    assert o["event_done_after_stream_sync"] is True
    assert o["wait_event_orders"] and o["in_order"]


def test_task_delay_env_and_stream_query(run_isolated):
    r = run_isolated(
        ACL
        + r"""
import time
SIM.simcann_get_task_delay_us.restype = ctypes.c_int64
s = new_stream()
h, d = malloc_host(64), malloc_dev(64)
t0 = time.monotonic()
assert aclrtMemcpyAsync(d, 64, h, 64, H2D, s) == 0
st = c_int(-1)
assert aclrtStreamQuery(s, byref(st)) == 0
queued = st.value
assert aclrtSynchronizeStream(s) == 0
waited = time.monotonic() - t0
assert aclrtStreamQuery(s, byref(st)) == 0
result = [SIM.simcann_get_task_delay_us(), queued, st.value, waited >= 0.25]
""",
        env={"SIMCANN_TASK_DELAY_US": "300000"},
    )
    assert r.result == [300000, 1, 0, True]  # NOT_READY = 1, COMPLETE = 0 (aclrtStreamStatus)
