"""TEST ENVIRONMENT ONLY: lets torch_npu import into PyPI's CUDA build of torch.

Installed by ci/lib/cudafix/install.py into a test venv whose torch is a CUDA build (PyPI has
no CPU build of torch for Linux x86_64), as the package ``_pinpool_testenv`` plus a ``.pth``
line that imports it at interpreter start. Never installed on, or needed by, a real
Ascend machine, which runs the CPU build of torch.

Importing it only adds a meta-path finder (cheap: it imports nothing else). The first time
anything imports ``torch_npu``, the finder removes itself, imports ``torch`` (torch_npu would
import it first anyway) and calls ``libkeyfix.so``, which removes the allocator-config keys the
CUDA build registered (every key but the ones in ``base_keys.json``, which install.py measured),
so that torch_npu's library can register its own instead of aborting with "Duplicated key
'pinned_reserve_segment_size_mb'". See README.md beside install.py.

Set ``PINPOOL_KEYFIX=0`` to disable it (to see the original abort), ``PINPOOL_KEYFIX_VERBOSE=1``
to print the keys it removes.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIB = os.path.join(_HERE, "libkeyfix.so")
_BASE_KEYS = os.path.join(_HERE, "base_keys.json")
removed_keys: list[str] | None = None


def apply() -> list[str]:
    """Remove the CUDA build's allocator-config keys once; return the keys removed."""
    global removed_keys
    if removed_keys is not None:
        return removed_keys
    import ctypes
    import json

    import torch

    removed_keys = []
    if not torch.version.cuda:
        return removed_keys
    with open(_BASE_KEYS) as f:
        base = ",".join(json.load(f))
    lib = ctypes.CDLL(_LIB)
    buf = ctypes.create_string_buffer(8192)
    lib.pinpool_keyfix_apply.restype = ctypes.c_int
    lib.pinpool_keyfix_apply(base.encode(), buf, ctypes.c_size_t(len(buf)))
    removed_keys = [k for k in buf.value.decode().split(",") if k]
    if os.environ.get("PINPOOL_KEYFIX_VERBOSE") == "1":
        print(
            "[_pinpool_testenv] removed CUDA allocator-config keys before torch_npu loads: "
            + ", ".join(sorted(removed_keys)),
            file=sys.stderr,
        )
    return removed_keys


def current_keys() -> list[str]:
    """The allocator-config key set as it is now (needs torch imported)."""
    import ctypes

    lib = ctypes.CDLL(_LIB)
    buf = ctypes.create_string_buffer(8192)
    lib.pinpool_keyfix_list(buf, ctypes.c_size_t(len(buf)))
    return sorted(k for k in buf.value.decode().split(",") if k)


class _BeforeTorchNpu:
    """Meta-path finder that runs :func:`apply` right before ``torch_npu`` is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch_npu":
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            apply()
        return None  # let the normal finders import it


if os.environ.get("PINPOOL_KEYFIX", "1") != "0" and "torch_npu" not in sys.modules:
    sys.meta_path.insert(0, _BeforeTorchNpu())
