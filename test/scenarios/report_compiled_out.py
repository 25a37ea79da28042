"""``TORCH_NPU_PINPOOL_REPORT=1`` with a build that has the audit report compiled out
(``TORCH_NPU_PINPOOL_AUDIT=0`` at build time): activation warns, naming the fix, and the plugin
is active without the report; ``report()`` raises with the same words."""

import warnings

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch  # noqa: F401  (the autoload may activate the plugin here)
    import torch_npu  # noqa: F401

    import torch_npu_pinpool

from _lib.scenario import report  # noqa: E402

out = {
    "warnings": [str(w.message) for w in caught if "TORCH_NPU_PINPOOL_AUDIT" in str(w.message)],
    "active": torch_npu_pinpool.is_active(),
    "audit_built": torch_npu_pinpool._C.audit_built,
}
try:
    torch_npu_pinpool.report()
    out["report"] = None
except RuntimeError as e:
    out["report"] = str(e)
report(out)
