"""Activation: import, the torch.backends entry point, twice, after pinned tensors exist,
and the off switch."""

from __future__ import annotations

from ._snippets import PRELUDE

ACTIVATE = r"""
import logging
out = {}
out["active"] = torch_npu_pinpool.is_active()
out["again"] = torch_npu_pinpool.activate()          # no-op
out["mode"] = torch_npu_pinpool.mode()
out["still"] = torch_npu_pinpool.is_active()
result = out
"""


def test_import_activates_once(run_isolated):
    """With the plugin off nothing is registered: the same snippet reports inactive."""
    on = run_isolated(PRELUDE + ACTIVATE).result
    assert on["active"] and on["still"] and on["again"] is False
    assert on["mode"] in ("backport", "native-present")
    off = run_isolated(PRELUDE + ACTIVATE, env={"TORCH_NPU_PINPOOL": "0"}).result
    assert off["active"] is False and off["again"] is False and off["still"] is False


OFF_SWITCH = r"""
import os, ctypes
import torch, torch_npu
from torch_npu.npu.graphs import NPUGraph
import torch_npu_pinpool
result = {
    "active": torch_npu_pinpool.is_active(),
    "patched": getattr(NPUGraph, "_pinpool_hooked", False),
    "replay_is_native": not hasattr(NPUGraph.replay, "__wrapped__"),
}
"""


def test_off_switch_patches_nothing(run_isolated):
    """``TORCH_NPU_PINPOOL=0``: no allocator registered, no NPUGraph method patched. (The
    plugin-on case of the same snippet is the control.)"""
    off = run_isolated(OFF_SWITCH, env={"TORCH_NPU_PINPOOL": "0"}).result
    assert off == {"active": False, "patched": False, "replay_is_native": True}
    on = run_isolated(OFF_SWITCH).result
    assert on == {"active": True, "patched": True, "replay_is_native": False}


ENTRY_POINT = r"""
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout)
import torch   # autoloads torch_npu and torch_npu_pinpool through torch.backends
result = {
    "loaded": "torch_npu_pinpool" in sys.modules,
    "active": "torch_npu_pinpool" in sys.modules and sys.modules["torch_npu_pinpool"].is_active(),
}
"""


def test_entry_point_autoload(run_isolated):
    """Installing is enough: ``import torch`` with backend autoload on activates the plugin
    and logs one INFO line. With TORCH_NPU_PINPOOL=0 the entry point does nothing."""
    r = run_isolated(ENTRY_POINT, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert r.result == {"loaded": True, "active": True}
    assert r.stdout.count("torch_npu_pinpool") >= 1 and "active" in r.stdout
    off = run_isolated(
        ENTRY_POINT, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1", "TORCH_NPU_PINPOOL": "0"}
    )
    assert off.result["active"] is False


LATE = r"""
import torch, torch_npu, os, ctypes
torch.npu.set_device(0)
N = 1024
SIM = ctypes.CDLL(os.path.join(os.environ["SIMCANN_LIB_DIR"], "libascendcl.so"))
set_delay = SIM.simcann_set_task_delay_us
set_delay.argtypes = [ctypes.c_int64]
early = [torch.full((N,), float(i)).pin_memory() for i in range(8)]   # native's tensors
import torch_npu_pinpool                                              # activate late
set_delay(2000)
devs = []
for i, t in enumerate(early):
    d = torch.empty(N, device="npu")
    d.copy_(t, non_blocking=True)      # record_event forwarded to native
    devs.append(d)
del early, t                           # freed to native
fresh = [torch.full((N,), -1.0).pin_memory() for _ in range(8)]
torch.npu.synchronize()
set_delay(0)
result = {
    "active": torch_npu_pinpool.is_active(),
    "ok": all(sorted(set(d.cpu().tolist())) == [float(i)] for i, d in enumerate(devs)),
    "fresh_pinned": all(t.is_pinned() for t in fresh),
}
"""


def test_activation_after_pinned_tensors_exist(run_isolated):
    """Tensors pinned before activation keep native's deleter; their non_blocking copies
    stay protected (record_event is forwarded). Cannot fail with the plugin off: then the
    native allocator handles everything, which is the behaviour required here."""
    r = run_isolated(LATE)
    assert r.result == {"active": True, "ok": True, "fresh_pinned": True}
