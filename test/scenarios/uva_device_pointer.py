"""vllm-ascend's UVA path (issue #35): with PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True
torch_npu registers each pinned block (aclrtHostRegisterV2, CANN >= 8.5), and vllm-ascend asks
``aclrtHostGetDevicePointer`` for the device address of a pinned tensor's storage, which its
kernels then read directly. Does that work on the blocks the registered host allocator hands out
as on torch_npu's own? Owned by test/pinpool/test_uva_device_pointer.py.

Calls ``aclrtHostGetDevicePointer`` through ctypes on the libascendcl.so this process loaded
(torch_npu exposes no binding; whether torch_npu turned pinned_mem_register off, CANN < 8.5,
its warning on stderr says). Reports ``has_api`` (the symbol exists) and, per block kind, ``[rc,
non_null]``: ``eager`` (pinned outside a capture), ``in_capture`` (pinned inside one: a graph-pool
block with the plugin), ``large`` (48 MiB).
"""

from __future__ import annotations

import ctypes

import torch
from _lib.scenario import N, report, side_stream

MiB = 1 << 20


def device_pointer(lib: ctypes.CDLL, t: torch.Tensor) -> list:
    """[aclError, whether a non-null device address came back] for t's storage."""
    get = lib.aclrtHostGetDevicePointer
    get.restype = ctypes.c_int
    get.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint32]
    out = ctypes.c_void_p()
    rc = get(ctypes.c_void_p(t.untyped_storage().data_ptr()), ctypes.byref(out), 0)
    return [int(rc), bool(out.value)]


lib = ctypes.CDLL("libascendcl.so")  # the runtime torch_npu loaded (one handle per soname)
result: dict = {"has_api": hasattr(lib, "aclrtHostGetDevicePointer")}
eager = torch.full((N,), 1.0).pin_memory()
if result["has_api"]:
    result["eager"] = device_pointer(lib, eager)
    large = torch.empty(48 * MiB, dtype=torch.uint8, pin_memory=True)
    result["large"] = device_pointer(lib, large)
    side_stream()
    dev = torch.zeros(N, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        staged = torch.full((N,), 2.0).pin_memory()
        dev.copy_(staged, non_blocking=True)
    result["in_capture"] = device_pointer(lib, staged)
    g.replay()
    torch.npu.synchronize()
    result["replay"] = sorted(set(dev.cpu().tolist()))
    g.reset()
report(result)
