"""Activation: import, the torch.backends entry point, twice, after pinned tensors exist,
and the off switch. Scenarios (runtime-neutral): test/scenarios/activate.py, off_switch.py,
entry_point.py, late_activation.py (on the simulator it adds a 2 ms task delay)."""

from __future__ import annotations

import pytest

from ._snippets import audit_built


def test_import_activates_once(scenario):
    """With the plugin off nothing is registered: the same scenario reports inactive."""
    on = scenario("activate").result
    assert on["active"] and on["still"]
    assert (on["again"], on["again_true"]) == ("already_active", False)
    assert on["mode"] in ("backport", "native-present")
    off = scenario("activate", env={"TORCH_NPU_PINPOOL": "0"}).result
    assert off["active"] is False and off["still"] is False
    assert (off["again"], off["again_true"]) == ("switched_off", False)


def test_off_switch_patches_nothing(scenario):
    """``TORCH_NPU_PINPOOL=0``: no allocator registered, no NPUGraph method patched. (The
    plugin-on case of the same scenario is the control.)"""
    off = scenario("off_switch", env={"TORCH_NPU_PINPOOL": "0"}).result
    assert off == {"active": False, "patched": False, "replay_is_native": True}
    on = scenario("off_switch").result
    assert on == {"active": True, "patched": True, "replay_is_native": False}


def test_entry_point_autoload(scenario):
    """Installing is enough: ``import torch`` with backend autoload on activates the plugin
    and logs one INFO line. With TORCH_NPU_PINPOOL=0 the entry point does nothing."""
    r = scenario("entry_point", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert r.result == {"loaded": True, "active": True}
    assert r.stdout.count("torch_npu_pinpool") >= 1 and "active" in r.stdout
    off = scenario(
        "entry_point", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1", "TORCH_NPU_PINPOOL": "0"}
    )
    assert off.result["active"] is False


def test_activation_after_pinned_tensors_exist(scenario):
    """Tensors pinned before activation keep native's deleter; their non_blocking copies
    stay protected (record_event is forwarded). Cannot fail with the plugin off: then the
    native allocator handles everything, which is the behaviour required here."""
    r = scenario("late_activation")
    assert r.result == {"active": True, "ok": True, "fresh_pinned": True}


def test_report_asked_of_a_build_without_the_audit_names_the_fix(scenario):
    """A build with ``TORCH_NPU_PINPOOL_AUDIT=0``: ``TORCH_NPU_PINPOOL_REPORT=1`` warns once at
    activation (the plugin still activates) and ``report()`` raises, both naming the rebuild."""
    if audit_built():
        pytest.skip("the audit report is built in (test_audit.py covers it)")
    o = scenario("report_compiled_out", env={"TORCH_NPU_PINPOOL_REPORT": "1"}).result
    assert o["active"] and o["audit_built"] is False
    assert len(o["warnings"]) == 1, o["warnings"]
    for message in (o["warnings"][0], o["report"]):
        assert "compiled out" in message and "pip install --force-reinstall" in message, message


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
