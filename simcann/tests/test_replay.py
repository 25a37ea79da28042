"""Replay re-executes the captured work, reading host memory at replay time; freed memory is
reported."""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, TORCH

pytestmark = pytest.mark.simulator


def test_graph_replay_reads_host_memory_at_replay_time(run_isolated):
    r = run_isolated(
        TORCH
        + r"""
out = {}
N = 1024
h = torch.full((N,), 1.0).pin_memory()
static = torch.zeros(N, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    static.copy_(h, non_blocking=True)
torch.npu.synchronize()
out["not_run_by_capture"] = bool((static.cpu() == 0).all())
values = []
for v in (5.0, 6.0):
    h.fill_(v)
    g.replay()
    torch.npu.synchronize()
    values.append(float(static.cpu()[0]))
out["replays"] = values

# Cross-stream capture through torch streams: fork onto s2, join back.
d2 = torch.zeros(N, device="npu")
back = torch.zeros(N, pin_memory=True)
s2 = torch.npu.Stream()
g2 = torch.npu.NPUGraph()
with torch.npu.graph(g2):
    cur = torch.npu.current_stream()
    s2.wait_stream(cur)
    with torch.npu.stream(s2):
        d2.copy_(h, non_blocking=True)
    cur.wait_stream(s2)
    back.copy_(d2, non_blocking=True)
h.fill_(9.0)
g2.replay()
torch.npu.synchronize()
out["cross_stream"] = [float(d2.cpu()[0]), float(back[0])]
out["violations"] = simcann_violation_count()
result = out
"""
    )
    o = r.result
    assert o["not_run_by_capture"]
    assert o["replays"] == [5.0, 6.0]
    assert o["cross_stream"] == [9.0, 9.0]
    assert o["violations"] == 0


_FREED = r"""
out = {}
s = new_stream()
h, d = malloc_host(256), malloc_dev(256)
assert aclmdlRICaptureBegin(s, GLOBAL) == 0
assert aclrtMemcpyAsync(d, 256, h, 256, H2D, s) == 0
rc, m = end(s)
assert rc == 0
assert aclmdlRIExecuteAsync(vp(m), s) == 0 and aclrtSynchronizeStream(s) == 0
out["before"] = simcann_violation_count()
assert aclrtFreeHost(h) == 0          # the model still holds the address
assert aclmdlRIExecuteAsync(vp(m), s) == 0
assert aclrtSynchronizeStream(s) == 0
out["after_host_free"] = simcann_violation_count()
# an eager copy whose pinned source is freed while the copy is still queued
simcann_set_task_delay_us(200000)
h2 = malloc_host(256)
assert aclrtMemcpyAsync(d, 256, h2, 256, H2D, s) == 0
assert aclrtFreeHost(h2) == 0
assert aclrtSynchronizeStream(s) == 0
simcann_set_task_delay_us(0)
out["after_queued_free"] = simcann_violation_count()
result = out
"""


def test_replay_over_freed_memory_is_reported(run_isolated):
    r = run_isolated(ACL + _FREED)
    assert r.result == {"before": 0, "after_host_free": 1, "after_queued_free": 2}
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("SIMCANN VIOLATION:")]
    assert len(lines) == 2 and "freed" in lines[0]


def test_strict_mode_aborts(run_isolated):
    r = run_isolated(ACL + _FREED, env={"SIMCANN_STRICT": "1"}, expect_ok=False)
    assert r.returncode != 0 and r.result is None
    assert "SIMCANN VIOLATION:" in r.stderr
