"""Activation state after import: active, activate() again is a no-op, the mode.

Plugin on and off alike (``TORCH_NPU_PINPOOL=0``: inactive, activate() says it is switched off).
"""

from _lib.scenario import report, torch_npu_pinpool

out = {}
out["active"] = torch_npu_pinpool.is_active()
again = torch_npu_pinpool.activate()  # no-op
out["again"] = again.value
out["again_true"] = bool(again)
out["mode"] = torch_npu_pinpool.mode()
out["still"] = torch_npu_pinpool.is_active()
report(out)
