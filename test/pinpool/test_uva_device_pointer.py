"""vllm-ascend's UVA path: ``aclrtHostGetDevicePointer`` on the registered pinned memory the
host allocator hands out (PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True, CANN >= 8.5), with
the plugin as without it (issue #35). Scenario (runtime-neutral):
test/scenarios/uva_device_pointer.py."""

from __future__ import annotations

import pytest

from ._snippets import CANN_8_5, ON_OFF, env_for, with_alloc_conf


@ON_OFF
def test_registered_block_has_a_device_pointer(scenario, plugin):
    """PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True (CANN >= 8.5): aclrtHostGetDevicePointer
    succeeds on the pinned blocks the registered host allocator hands out - eager, pinned inside
    a capture (a graph-pool block with the plugin), 48 MiB - with the plugin as without it."""
    env = env_for(plugin, PYTORCH_NPU_ALLOC_CONF="pinned_mem_register:True", **CANN_8_5)
    run = with_alloc_conf(scenario, "uva_device_pointer", env)
    r = run.result
    if not r["has_api"]:
        pytest.skip("this CANN's libascendcl has no aclrtHostGetDevicePointer")
    if "pinned_mem_register setting failure" in run.stderr:
        pytest.skip("torch_npu turned pinned_mem_register off (CANN < 8.5 or an old driver)")
    assert (r["eager"], r["in_capture"], r["large"]) == ([0, True],) * 3, r
    assert r["replay"] == [2.0], r
