"""The public names of the built extension torch_npu_pinpool._C (for the stub check)."""

from _lib.scenario import report

import torch_npu_pinpool._C as ext

report(
    {
        "names": sorted(name for name in vars(ext) if not name.startswith("__")),
        "audit_built": ext.audit_built,
        "sanitizers": ext.sanitizers,
    }
)
