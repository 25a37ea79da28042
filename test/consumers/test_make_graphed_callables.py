"""torch.npu.make_graphed_callables: a 2-layer MLP trained a few steps, forward and backward
graphs in one pool, with a pinned staging copy (H2D) in forward and pinned D2H copies in backward
(scenario test/scenarios/graphed_mlp.py).

What a user relies on: the graphed model trains exactly like the eager one, pinned memory the
caller re-pins between steps is never written by a replay, and dropping the callables gives the
pinned bytes back after one host_empty_cache().
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

_RESULTS: dict[str, Any] = {}


def _plugin_result(scenario: Callable[..., Any]) -> dict:
    """One plugin-on run per worker process (the training and the bytes checks share it)."""
    if "on" not in _RESULTS:
        _RESULTS["on"] = scenario("graphed_mlp").result
    return _RESULTS["on"]


def _check_training(r: dict) -> None:
    assert r["graphed_loss"] == pytest.approx(r["eager_loss"], rel=1e-5, abs=1e-6)
    assert r["weights_equal"], "graphed training diverged from eager"
    assert r["taps_equal"], "the pinned D2H gradient tap differs from eager"
    assert all(r["eager_junk_intact"]) and all(r["graphed_junk_intact"]), r


def test_graphed_mlp_with_plugin(scenario):
    r = _plugin_result(scenario)
    _check_training(r)
    assert r["held_while_alive"] > r["baseline"]


# Not strict: the outcome depends on when the graphs are collected (0 B left by hand, 64 B = the
# kept 4x4 D2H buffer in the CI run on 2.13); strict once #10's fix makes it deterministic.
def test_graphed_mlp_gives_bytes_back_with_plugin(scenario):
    r = _plugin_result(scenario)
    assert r["held_after_drop"] == r["baseline"], r


def test_graphed_mlp_native(scenario):
    """Native shows a defect on every pair. <= 2.10 (no graph pools in the host allocator): the
    staging block freed inside the capture is recycled, replays read freed memory and graphed
    training diverges from eager. >= 2.11: training is right but pinned bytes of the dropped
    callables' pool stay held after host_empty_cache()."""
    r = scenario("graphed_mlp", env={"TORCH_NPU_PINPOOL": "0"}).result
    if tuple(r["npu_version"]) >= (2, 11):
        _check_training(r)
        assert r["held_after_drop"] > r["baseline"], "native gave every pinned byte back"
    else:
        diverged = r["graphed_loss"] != r["eager_loss"] or not r["weights_equal"]
        assert diverged, "native <= 2.10 trained the graphed MLP like eager"
