"""Activation: import, the torch.backends entry point, twice, after pinned tensors exist, in
worker processes that import only torch_npu (autoload on and off), hooks that cannot be installed,
and the off switch. Scenarios (runtime-neutral): test/scenarios/activate.py, off_switch.py,
entry_point.py, late_activation.py (on the simulator it adds a 2 ms task delay),
autoload_workers.py, hook_install_fails.py."""

from __future__ import annotations

import pytest

from ._snippets import audit_built, env_for


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


def _workers(scenario, how: str, env: dict[str, str]) -> dict:
    """What a worker started by ``how`` (subprocess or spawn) reported."""
    return scenario("autoload_workers", args=[how], env=env).result[how]


@pytest.mark.parametrize("how", ["subprocess", "spawn"])
def test_workers_that_import_only_torch_npu_are_activated_by_autoload(scenario, how):
    """A worker that only imports torch_npu (vLLM's one process per NPU) gets the plugin through
    torch's backend autoload (the torch.backends entry point): active, and its replay reads the
    input it captured. With TORCH_NPU_PINPOOL=0 the entry point loads but activates nothing, and
    the same replay reads another owner's bytes (torch_npu alone: defect 3)."""
    on = _workers(scenario, how, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert on == {"loaded": True, "active": True, "replay": [2.0]}, on
    w = _workers(scenario, how, env_for(False, TORCH_DEVICE_BACKEND_AUTOLOAD="1"))
    assert (w["loaded"], w["active"]) == (True, False) and w["replay"] != [2.0], w


@pytest.mark.parametrize("how", ["subprocess", "spawn"])
def test_workers_without_autoload_run_without_the_plugin(scenario, how):
    """TORCH_DEVICE_BACKEND_AUTOLOAD=0: nothing imports the plugin in a worker that only imports
    torch_npu, so it runs on torch_npu's own allocator (docs/usage.md: add
    ``import torch_npu_pinpool`` to the worker)."""
    r = _workers(scenario, how, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert (r["loaded"], r["active"]) == (False, False) and r["replay"] != [2.0], r


def test_hooks_that_cannot_be_installed_leave_nothing_registered(scenario):
    """Activation raises when the graph hooks cannot go in, registers nothing, and a later
    activation installs allocator and hooks together."""
    r = scenario("hook_install_fails").result
    assert r["first_import"] == "AttributeError", r
    assert r["active"] and r["hooked"], r
    assert r["values"] == [3.0], r
