"""Activation state after import: active, activate() again is a no-op, the mode.

Plugin on and off alike (``TORCH_NPU_PINPOOL=0``: inactive, activate() still returns False).
"""

from scenario import report, torch_npu_pinpool

out = {}
out["active"] = torch_npu_pinpool.is_active()
out["again"] = torch_npu_pinpool.activate()  # no-op
out["mode"] = torch_npu_pinpool.mode()
out["still"] = torch_npu_pinpool.is_active()
report(out)
