"""The hazard the plugin fixes (issue #2), on the unmodified torch_npu host allocator.

A pinned block allocated inside a capture and freed inside it is recycled after the capture on
torch_npu < 2.11 (its host allocator knows nothing about graphs; the captured event record makes
the event query fail, which <= 2.10 treats as "completed"): the next pinned tensor gets the same
block and every replay copies that tensor's bytes. On >= 2.11 the block lives in the graph's
private pool and the replay reads what was captured. Only H2D copies are needed.
"""

from __future__ import annotations

import pytest

from .simcann_snippets import TORCH

pytestmark = pytest.mark.simulator


def test_capture_time_pinned_block_recycled(run_isolated):
    r = run_isolated(
        TORCH
        + r"""
N = 1024
static = torch.zeros(N, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    h = torch.full((N,), 1.0).pin_memory()
    captured_ptr = h.data_ptr()
    static.copy_(h, non_blocking=True)
    del h
other = torch.full((N,), 7.0).pin_memory()
g.replay()
torch.npu.synchronize()
result = {
    "version": list(NPU_VERSION),
    "same_block": other.data_ptr() == captured_ptr,
    "replayed": sorted(set(static.cpu().tolist())),
    "violations": simcann_violation_count(),
}
"""
    )
    o = r.result
    if tuple(o["version"]) < (2, 11):
        # documents the bug: the replay reads another tensor's bytes
        assert o["same_block"] and o["replayed"] == [7.0], o
    else:
        assert not o["same_block"] and o["replayed"] == [1.0], o
    assert o["violations"] == 0  # the block was recycled, never freed to the runtime
