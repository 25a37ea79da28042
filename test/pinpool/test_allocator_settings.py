"""The user's allocator settings: activation at any time leaves them as torch_npu alone has them,
and ``pin_memory_expandable_segments:True`` never corrupts a capture silently. Scenarios
(runtime-neutral): test/scenarios/allocator_settings.py, expandable_capture.py."""

from __future__ import annotations

import pytest

from ._snippets import ON_OFF, env_for, pair, simulator_api, with_alloc_conf

USER_CONF = "max_split_size_mb:64,garbage_collection_threshold:0.6"


@pytest.mark.parametrize("order", ["autoload", "import_first", "after_device"])
def test_user_allocator_settings_untouched(scenario, order):
    """Activation at any time leaves the user's allocator settings as torch_npu alone has them
    (issue #47): c10's settings string, and the device allocator's behaviour (a 256 MiB block
    above max_split_size_mb:64 is an oversize allocation), plugin on against off."""
    env = {"PYTORCH_NPU_ALLOC_CONF": USER_CONF, "SETTINGS_ORDER": order}
    if order == "autoload":
        env.update(TORCH_DEVICE_BACKEND_AUTOLOAD="1", SETTINGS_ORDER="import_first")
    ours = scenario("allocator_settings", env=env).result
    native = scenario("allocator_settings", env={**env, "TORCH_NPU_PINPOOL": "0"}).result
    assert ours.pop("active") and not native.pop("active"), (ours, native)
    assert ours == native
    assert native["oversize_allocations"] > 0, native  # the test can see the user's setting


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
