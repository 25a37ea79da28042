"""TorchAir reduce-overhead (aclgraph) mode with pinned host memory, in each of TorchAir's three
memory-reuse modes (scenario test/scenarios/torchair_reduce_overhead.py): a pinned CPU input the
caller frees after each call and re-pins junk over, and a pinned temporary staged inside the graph.

What a user relies on with the plugin: every call returns what TorchAir's semantics give (with
clone_input, the default, a CPU input is read at its captured address on every replay, so a
call returns the captured input's result; with clone_input=False, its own), never bytes of
another owner; nobody else's pinned bytes written; one pinned temporary per aclgraph held in the
graph pool and the captured input adopted, nothing added by replays; every byte back after the
compiled functions are dropped and one host_empty_cache().
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

OFF = {"TORCH_NPU_PINPOOL": "0"}
MODES = ["default", "no_fx_reuse", "no_clone", "custom_pool"]
CLONE_MODES = ["default", "no_fx_reuse", "custom_pool"]  # debug.aclgraph.clone_input on
_RESULTS: dict[bool, Any] = {}


def _run(scenario: Callable[..., Any], plugin: bool) -> dict:
    """One scenario run (all four modes) per plugin setting and worker process."""
    if plugin not in _RESULTS:
        _RESULTS[plugin] = scenario("torchair_reduce_overhead", env=None if plugin else OFF).result
    r = _RESULTS[plugin]
    if "skip" in r:
        pytest.skip(r["skip"])
    assert r["plugin"] is plugin, r
    return r


def _mode(r: dict, mode: str) -> dict:
    m = r["modes"][mode]
    if "skip" in m:
        pytest.skip(m["skip"])
    return m


@pytest.mark.parametrize("mode", MODES)
def test_torchair_replays_right_with_plugin(scenario, mode):
    m = _mode(_run(scenario, True), mode)
    want = m["captured"] if mode in CLONE_MODES else m["own"]
    assert m["seen"] == want, m
    assert m["junk_clobbered"] == [], m
    assert m.get("violations", 0) == 0, m


@pytest.mark.parametrize("mode", MODES)
def test_torchair_pinned_bytes_per_graph_with_plugin(scenario, mode):
    r = _run(scenario, True)
    m, n = _mode(r, mode), r["n"]
    fx_graphs = 2 if mode == "custom_pool" else 1
    if m["aclgraphs_per_fx_graph"] is not None:  # None: this TorchAir does not count them
        assert m["aclgraphs_per_fx_graph"] == [2] * fx_graphs, m  # one aclgraph per input size
    sizes: list[int] = []
    for call, pools in enumerate(m["pools"]):
        size = n * (1 + call % 2)
        if size not in sizes:
            sizes.append(size)
        # one pool (per FX graph; custom_pool: shared by both), one pinned temporary per aclgraph
        # (float32: 4 bytes an element), the captured input of each size adopted; replays add
        # nothing
        assert pools == [
            {
                "graphs": fx_graphs * len(sizes),
                "blocks": fx_graphs * len(sizes),
                "bytes_held": fx_graphs * 4 * sum(sizes),
                "adopted_blocks": len(sizes),
            }
        ], (call, m["pools"])


@pytest.mark.parametrize("mode", MODES)
def test_torchair_gives_bytes_back_with_plugin(scenario, mode):
    m = _mode(_run(scenario, True), mode)
    assert m["held_with_graphs"] > m["baseline"], m
    assert m["held_after"] == m["baseline"], m


def test_torchair_native_keeps_capture_blocks(scenario):
    """torch_npu >= 2.11 alone never gives back a capture-time block a stream used: each mode
    leaves its pinned temporaries held after its graphs are gone."""
    r = _run(scenario, False)
    if not r["native_pools"]:
        pytest.skip("torch_npu < 2.11 has no host graph pools: its temporaries go back at once")
    leaked = {
        mode: m["held_after"] - m["baseline"] for mode, m in r["modes"].items() if "skip" not in m
    }
    assert all(v > 0 for v in leaked.values()), leaked


@pytest.mark.simulator
def test_torchair_native_replays_read_freed_memory(scenario):
    """Natively, with clone_input on, the caller's freed input block goes back to the cache and
    (after host_empty_cache) to the system while the aclgraphs still read it; on torch_npu < 2.11
    the pinned temporary freed inside the capture is recycled too (every mode). The simulator
    reports each replay over freed host memory."""
    r = _run(scenario, False)
    broken = CLONE_MODES if r["native_pools"] else MODES
    counts = {mode: m["violations"] for mode, m in r["modes"].items() if "skip" not in m}
    assert all(counts[mode] > 0 for mode in broken if mode in counts), counts
