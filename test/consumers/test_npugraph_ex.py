"""torch.compile(backend="npugraph_ex") (torch_npu/dynamo/npugraph_ex: pure Python over
NPUGraph, no GE library) with a pinned CPU input freed by the caller after the first call
(scenario test/scenarios/npugraph_ex_pinned_input.py).

npugraph_ex reads a CPU input at its captured address on every replay (later calls' own inputs
are not copied in: every call returns the first input + 1, on the plugin and natively). What a
user relies on with the plugin: that address is never recycled under the graph (no call returns
junk 9 + 1) and the bytes come back after the compiled function is dropped.
"""

from __future__ import annotations

import pytest


def test_npugraph_ex_pinned_input_with_plugin(scenario):
    r = scenario("npugraph_ex_pinned_input").result
    first = r["seen"][0]
    assert first == [11.0], r
    assert all(v == first for v in r["seen"]), "a replay read bytes other than the captured input"
    assert r["held_after"] == r["baseline"], r
    assert r.get("violations", 0) == 0, r


@pytest.mark.simulator
def test_npugraph_ex_pinned_input_native_reads_freed_memory(scenario):
    """Natively the freed input's block goes back to the cache: each replay's H2D reads freed
    host memory (the simulator refuses to run it and counts a violation)."""
    r = scenario("npugraph_ex_pinned_input", env={"TORCH_NPU_PINPOOL": "0"}).result
    assert r["violations"] > 0, r
