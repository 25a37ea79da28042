"""torch.npu.make_graphed_callables: a 2-layer MLP trained a few steps, forward and backward
graphs in one pool, with a pinned staging copy (H2D) in forward and pinned D2H copies in backward
(scenario test/scenarios/graphed_mlp.py).

What a user relies on: the graphed model trains exactly like the eager one, pinned memory the
caller re-pins between steps is never written by a replay, and dropping the callables gives the
pinned bytes back after one host_empty_cache().
"""

from __future__ import annotations

import pytest


def _check_training(r: dict) -> None:
    assert r["graphed_loss"] == pytest.approx(r["eager_loss"], rel=1e-5, abs=1e-6)
    assert r["weights_equal"], "graphed training diverged from eager"
    assert r["taps_equal"], "the pinned D2H gradient tap differs from eager"
    assert all(r["eager_junk_intact"]) and all(r["graphed_junk_intact"]), r


def test_graphed_mlp_with_plugin(scenario):
    r = scenario("graphed_mlp").result
    _check_training(r)
    assert r["held_while_alive"] > r["baseline"]
    assert r["held_after_drop"] == r["baseline"], r


def test_graphed_mlp_native(scenario):
    """Native trains right here too; from 2.11 on (torch_npu's own graph pools) it keeps pinned
    bytes of the dropped callables' pool after host_empty_cache()."""
    r = scenario("graphed_mlp", env={"TORCH_NPU_PINPOOL": "0"}).result
    _check_training(r)
    if tuple(r["npu_version"]) >= (2, 11):
        assert r["held_after_drop"] > r["baseline"], "native 2.13 gave every pinned byte back"
