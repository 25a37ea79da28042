"""vllm-ascend graph-mode patterns (scenarios test/scenarios/vllm_pool.py, kv_offload.py).

1. One global pool for 5 batch sizes captured with pinned temporaries, 3 sleep/wake cycles
   (graphs dropped by GC without reset, recapture into the same pool id), eager pinned churn from
   another thread between replays.
2. KV offload: long-lived pinned buffers, captured D2H into them, a host function that edits them
   by address, H2D back; 3 sizes in one pool; the persistent buffer's reference dropped while the
   graphs live; junk re-pinned between replays.

What a user relies on: no error, every replay's bytes right, nobody else's pinned bytes written,
all pinned bytes back after the graphs die and one host_empty_cache(). The simulator's violation
count (replay over freed memory) is an extra check where the simulator runs.
"""

from __future__ import annotations

from typing import Any, Callable

OFF = {"TORCH_NPU_PINPOOL": "0"}
_RESULTS: dict[str, Any] = {}


def _result(scenario: Callable[..., Any], name: str) -> Any:
    """One run per scenario and worker process (the byte and the leak checks share it)."""
    if name not in _RESULTS:
        _RESULTS[name] = scenario(name).result
    return _RESULTS[name]


def test_vllm_sleep_wake_replays_right_with_plugin(scenario):
    r = _result(scenario, "vllm_pool")
    assert [c["error"] for c in r["cycles"]] == [None] * 3, r
    assert all(c["right"] for c in r["cycles"]), r
    assert r["churn_bad"] == []
    assert r.get("violations", 0) == 0


def test_vllm_sleep_wake_gives_bytes_back_with_plugin(scenario):
    r = _result(scenario, "vllm_pool")
    assert r["held_after"] == r["baseline"], r


def test_kv_offload_replays_right_with_plugin(scenario):
    r = _result(scenario, "kv_offload")
    assert r["right"] == [True, True, True], r
    assert r["junk_intact"], r
    assert r.get("violations", 0) == 0


def test_kv_offload_gives_bytes_back_with_plugin(scenario):
    r = _result(scenario, "kv_offload")
    assert r["held_after"] == r["baseline"], r


def test_kv_offload_native_replays_into_freed_memory(scenario):
    """Native torch_npu frees the persistent buffer while the graphs still copy into it: the
    replay writes freed (or re-pinned) host memory."""
    run = scenario("kv_offload", env=OFF, expect_ok=False)
    r = run.result
    broken = run.returncode != 0 or r is None or not r["junk_intact"] or not all(r["right"])
    broken = broken or bool(r and r.get("violations"))
    assert broken, r
