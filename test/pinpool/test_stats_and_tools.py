"""Introspection stays truthful (host_memory_stats, pool_stats), the doctor works, and
expandable pinned segments never corrupt a capture silently. Scenarios (runtime-neutral):
test/scenarios/stats_graph_pool.py, stats_in_use.py, expandable_capture.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ._snippets import ON_OFF, env_for, native_pools, pair, simulator_api, with_alloc_conf


@ON_OFF
def test_host_memory_stats_count_graph_pools(scenario, plugin):
    """The bytes a graph pool holds show in ``host_memory_stats()`` and ``pool_stats()``
    while the graph lives and leave when it goes. With the plugin off on >= 2.11 the
    stats never go back down (the block leaks)."""
    o = scenario("stats_graph_pool", env=env_for(plugin)).result
    if plugin:
        assert o["during"] == 16384
        assert o["pools"] == [
            {"graphs": 1, "blocks": 1, "bytes_held": 16384, "bytes_in_use": 0, "released": False}
        ]
        assert o["after"] == 0 and o["pools_after"] == []
    elif native_pools():
        assert o["after"] == 16384, "native >= 2.11 leaks the used capture block"


def test_host_memory_stats_in_use_bytes_return(scenario):
    """The in-use bytes of ``host_memory_stats()`` go back down when a block freed with a
    pending copy event returns to the cache. (ATen 2.8 - 2.12 count size_ + 1 bytes as still
    in use for every such block; the plugin reports the true figure.)"""
    import importlib.metadata

    major, minor = importlib.metadata.version("torch").split(".")[:2]
    if (2, 10) <= (int(major), int(minor)) <= (2, 12):
        pytest.skip(
            "torch 2.10 - 2.12's ATen miscounts both the in-use bytes and the per-bucket in-use "
            "counts of a block handed back after its event (upstream; the same with "
            "TORCH_NPU_PINPOOL=0), so the plugin cannot rebuild the figure there"
        )
    o = scenario("stats_in_use", env=env_for(True)).result
    assert o == {"during": 16384, "after": 0}


def test_doctor(tmp_path):
    """``python -m torch_npu_pinpool doctor`` reports versions, the simulator, the mode, and
    passes its self-test; with the plugin off it exits non-zero."""
    run_main = "import runpy; runpy.run_module('torch_npu_pinpool', run_name='__main__')"
    cmd = [sys.executable, "-c", run_main, "doctor"]  # from tmp_path: not the source tree
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    if simulator_api():  # on a real NPU it names the toolkit's runtime
        assert "simulated CANN runtime" in r.stdout
    assert "backport" in r.stdout or "native-present" in r.stdout
    assert "self-test:          PASS" in r.stdout
    env = {**os.environ, "TORCH_NPU_PINPOOL": "0"}
    off = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert off.returncode != 0


@ON_OFF
@pytest.mark.parametrize(
    "cann",
    [
        pytest.param("", id="old-driver"),
        pytest.param("8.5.0", id="cann-8.5", marks=pytest.mark.simulator),
    ],
)
def test_expandable_segments_refused_at_capture(scenario, plugin, cann):
    """``pin_memory_expandable_segments:True``: eager pinned copies work; a capture is
    refused with a message naming the setting, never silently corrupted. torch_npu >= 2.14
    refuses it itself exactly when its expandable host allocator is in use - only with a
    driver that supports it (on the simulator: ``SIMCANN_CANN_VERSION``, the ``cann-8.5``
    case, where the segments are real mapped virtual memory, simcann/src/vmm.cpp; older
    drivers make it fall back): there the plugin captures whenever torch_npu does, and the
    replay reads the right bytes. Older torch_npu refuses nothing; the plugin refuses on the
    variable's text there (it cannot read torch_npu's decision)."""
    extra = {"SIMCANN_CANN_VERSION": cann} if cann else {}
    env = env_for(plugin, PYTORCH_NPU_ALLOC_CONF="pin_memory_expandable_segments:True", **extra)
    o = with_alloc_conf(scenario, "expandable_capture", env).result
    assert o["eager"] == [3.0]
    error = o.get("error", "")
    # Whether torch_npu's expandable host allocator is in use: known on the simulator (the
    # driver it reports), the driver's business on an NPU.
    in_use = bool(cann) if simulator_api() else None
    if "ACLGraph capture is not supported when pin_memory_expandable_segments" in error:
        assert pair() >= (2, 14) and in_use is not False, o  # torch_npu's own refusal
    elif plugin and pair() < (2, 14):
        assert "torch_npu_pinpool" in error and "pin_memory_expandable_segments" in error, o
    else:
        assert not error and not (pair() >= (2, 14) and in_use), o
        if plugin:  # natively the replay may read a recycled block (docs/problem.md)
            assert o["replay"] == [1.0], o
