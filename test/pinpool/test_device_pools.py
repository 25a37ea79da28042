"""One pool handle (``torch.npu.graph_pool_handle()``) captured into on two devices: the device
allocator keeps a pool per device, and so does the plugin (Note [Pools per device] in
csrc/core/graph_registry.cpp). Captures on two devices into one handle run at once, each
device's graph owns its block (replays read 40 / 41 while another thread pins bait, -9), a reset of
one device's graph leaves the other's pool alone, and every pinned byte comes back after reset; two
captures into one pool on the *same* device stay refused.

Scenario: test/scenarios/one_pool_two_devices.py (explicit ``stream=`` per device, thread-local
capture mode). Plugin off shows what torch_npu does alone, per pair (measured on the simulated
runtime): 2.13 refuses the second concurrent capture in ATen's host allocator, whose pools are
keyed by id alone ("beginAllocateToPool: already recording to mempool_id"), and keeps each
capture-time block for good; 2.10 lets both run with no host-side capture awareness, so the
replays read the bait.
"""

from __future__ import annotations

import re

import pytest

from ._snippets import ON_OFF, TWO_DEVICES, env_for, native_pools

DELAYS = pytest.mark.parametrize(
    "delay",
    [pytest.param(0, id="delay0"), pytest.param(2000, id="delay2000", marks=pytest.mark.simulator)],
)
RIGHT = [[40.0], [41.0]]  # what device 0's and device 1's graph copy in


def _run(scenario, plugin: bool, shape: str, delay: int = 0) -> dict:
    env = env_for(plugin, PINPOOL_SHAPE=shape, PINPOOL_DELAY_US=str(delay), **TWO_DEVICES)
    o = scenario("one_pool_two_devices", env=env).result
    if "skip" in o:
        pytest.skip(o["skip"])
    return o


def _assert_plugin_gives_everything_back(o: dict) -> None:
    assert o["held_after"] == o["baseline"], o
    assert o["pools_after"] == 0, o
    assert o.get("violations", 0) == 0, o


@ON_OFF
@DELAYS
def test_concurrent_captures_on_two_devices_into_one_pool(scenario, plugin, delay):
    o = _run(scenario, plugin, "concurrent", delay)
    if plugin:
        assert o["errors"] == [None, None], o["errors"]
        assert o["rounds"] == [RIGHT] * 3, o["rounds"]
        assert sorted((p["device"], p["graphs"], p["blocks"]) for p in o["pools"]) == [
            (0, 1, 1),
            (1, 1, 1),
        ], o["pools"]
        _assert_plugin_gives_everything_back(o)
    elif native_pools():
        assert o["errors"].count(None) == 1, o["errors"]
        assert "already recording to mempool_id" in "".join(e or "" for e in o["errors"])
    else:
        assert o["errors"] == [None, None], o["errors"]
        assert any(r != RIGHT for r in o["rounds"]), "native <= 2.10 hands the blocks to the bait"


@ON_OFF
@DELAYS
def test_sequential_captures_on_two_devices_into_one_pool(scenario, plugin, delay):
    o = _run(scenario, plugin, "sequential", delay)
    assert o["errors"] == [None, None], o["errors"]
    if plugin:
        assert o["rounds"] == [RIGHT] * 3, o["rounds"]
        assert sorted(p["device"] for p in o["pools"]) == [0, 1], o["pools"]
        _assert_plugin_gives_everything_back(o)
    elif native_pools():
        assert o["rounds"] == [RIGHT] * 3, o["rounds"]
        assert o["held_after"] > o["baseline"], "native >= 2.11 keeps the capture-time blocks"
    else:
        assert any(r != RIGHT for r in o["rounds"]), "native <= 2.10 hands the blocks to the bait"


@ON_OFF
@DELAYS
def test_reset_of_one_devices_graph_while_the_other_replays(scenario, plugin, delay):
    """Device 0's graph is reset (device 1 current) while device 1's replay is queued, another
    thread pinning bait and emptying the cache: device 1's graph keeps reading 41, its pool
    stays and device 0's goes."""
    o = _run(scenario, plugin, "reset_one", delay)
    assert o["errors"] == [None, None], o["errors"]
    if plugin:
        assert o["rounds"] == [RIGHT] + [[[41.0]]] * 5, o["rounds"]
        assert [(p["device"], p["graphs"]) for p in o["pools_after_reset"]] == [(1, 1)], o
        _assert_plugin_gives_everything_back(o)
    elif native_pools():
        assert o["rounds"] == [RIGHT] + [[[41.0]]] * 5, o["rounds"]
    else:
        assert o["rounds"][0] != RIGHT, "native <= 2.10 hands the blocks to the bait"


@ON_OFF
@DELAYS
def test_unannounced_graphs_on_two_devices_sharing_a_pool(scenario, plugin, delay):
    """Captures through torch_npu's C++ methods (no plugin hooks; torch_npu >= 2.11 calls the
    pool hooks itself) on two devices into one pool, device 0's graph reset with device 1
    current: torch_npu's release_pool names no device, so the plugin cannot tell which graph
    died and keeps both until both are released (Note [Pools per device]): device 1's graph
    keeps reading 41, and every byte comes back once both are gone."""
    o = _run(scenario, plugin, "unannounced", delay)
    assert o["errors"] == [None, None], o["errors"]
    assert o["rounds"] == [RIGHT] + [[[41.0]]] * 5, o["rounds"]
    if plugin:
        assert sorted((p["device"], p["graphs"]) for p in o["pools_after_reset"]) == [
            (0, 1),
            (1, 1),
        ], o["pools_after_reset"]
        _assert_plugin_gives_everything_back(o)


@ON_OFF
def test_concurrent_captures_into_one_pool_on_one_device_are_refused(scenario, plugin):
    """Two threads, two streams, one device, one pool: the second capture is refused (torch_npu's
    device allocator refuses it too), the first replays its bytes and gives them back."""
    o = _run(scenario, plugin, "same_device")
    assert o["errors"].count(None) == 1, o["errors"]
    error = "".join(e or "" for e in o["errors"])
    if plugin and not native_pools():
        # Backport mode: the plugin's hook runs before torch_npu's capture_begin.
        assert re.search(r"memory pool \(\d+, \d+\) on device 0 is already underway", error)
        assert "end the other capture first, or capture into a different pool" in error
    else:
        # torch_npu (>= 2.11, or the plugin off) refuses first: its device allocator.
        assert "already recording to mempool_id" in error
    if plugin or native_pools():  # native <= 2.10 hands the block to the bait
        ok = o["errors"].index(None)
        assert o["rounds"] == [[[40.0 + ok]]] * 3, o["rounds"]
    if plugin:
        _assert_plugin_gives_everything_back(o)
