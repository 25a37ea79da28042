"""torch_npu_pinpool.host_empty_cache() / host_memory_stats() / reset_*: torch_npu.npu's own
functions where the build has them, else the same through ATen's host-allocator registry
(torch_npu 2.8.0.post2 and 2.9.0 have none; csrc/python/host_cache_api.cpp). The registry path
is run on every build, plugin on and off (test/scenarios/host_cache_api.py): where torch_npu has
the functions, it returns the same keys and values as they do."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("plugin", ["on", "off"])
def test_registry_path_matches_torch_npu(scenario, plugin):
    env = {"TORCH_NPU_PINPOOL": "0"} if plugin == "off" else {}
    r = scenario("host_cache_api", env=env).result
    # Freed blocks stay cached, then the registry's empty_cache gives every one back.
    assert r["held_before"] > 0, r
    assert r["held_after"] == 0, r
    assert r["public_matches"], r
    held = next(k for k in r["after_reset"] if k.endswith(".current"))
    stat = held.rsplit(".", 1)[0]
    assert r["after_reset"][f"{stat}.peak"] == r["after_reset"][held], r
    assert r["after_reset"][f"{stat}.allocated"] == 0 and r["after_reset"][f"{stat}.freed"] == 0
    if r["native_api"]:
        assert r["registry_keys"] == r["native_keys"]
        assert r["same_values"], r
