"""Snippet preludes for the simcann runtime tests (run through ``run_isolated``).

``ACL`` drives the simulated runtime directly through ctypes (no torch import: fast, and it reaches
rules torch_npu does not expose). ``TORCH`` imports torch + torch_npu over the simulator and also
opens the library (same handle, same state) for the control API.
``VMM`` (after ``ACL``) adds the virtual-memory calls and helpers.

The test files using them carry the ``simulator`` marker: conftest.py here skips them when
SIMCANN_LIB_DIR is not set (no simulator built: ``source ci/sim-env.sh PAIR``).
"""

from __future__ import annotations

ACL = r"""
import ctypes, os, threading
SIM = ctypes.CDLL(os.path.join(os.environ["SIMCANN_LIB_DIR"], "libascendcl.so"))
vp, c_int, c_size, byref = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.byref

def _fn(name, res=c_int, args=None):
    f = getattr(SIM, name)
    f.restype = res
    if args is not None:
        f.argtypes = args
    return f

aclrtSetDevice = _fn("aclrtSetDevice", args=[c_int])
aclrtCreateStream = _fn("aclrtCreateStream", args=[ctypes.POINTER(vp)])
aclrtDestroyStream = _fn("aclrtDestroyStream", args=[vp])
aclrtSynchronizeStream = _fn("aclrtSynchronizeStream", args=[vp])
aclrtStreamQuery = _fn("aclrtStreamQuery", args=[vp, ctypes.POINTER(c_int)])
aclrtSynchronizeDevice = _fn("aclrtSynchronizeDevice", args=[])
aclrtMalloc = _fn("aclrtMalloc", args=[ctypes.POINTER(vp), c_size, c_int])
aclrtFree = _fn("aclrtFree", args=[vp])
aclrtMallocHost = _fn("aclrtMallocHost", args=[ctypes.POINTER(vp), c_size])
aclrtFreeHost = _fn("aclrtFreeHost", args=[vp])
aclrtMemcpy = _fn("aclrtMemcpy", args=[vp, c_size, vp, c_size, c_int])
aclrtMemset = _fn("aclrtMemset", args=[vp, c_size, c_int, c_size])
aclrtMemcpyAsync = _fn("aclrtMemcpyAsync", args=[vp, c_size, vp, c_size, c_int, vp])
aclrtCreateEvent = _fn("aclrtCreateEvent", args=[ctypes.POINTER(vp)])
aclrtCreateEventWithFlag = _fn(
    "aclrtCreateEventWithFlag", args=[ctypes.POINTER(vp), ctypes.c_uint32])
aclrtCreateEventExWithFlag = _fn(
    "aclrtCreateEventExWithFlag", args=[ctypes.POINTER(vp), ctypes.c_uint32])
aclrtRecordEvent = _fn("aclrtRecordEvent", args=[vp, vp])
aclrtQueryEventStatus = _fn("aclrtQueryEventStatus", args=[vp, ctypes.POINTER(c_int)])
aclrtSynchronizeEvent = _fn("aclrtSynchronizeEvent", args=[vp])
aclrtStreamWaitEvent = _fn("aclrtStreamWaitEvent", args=[vp, vp])
aclmdlRICaptureBegin = _fn("aclmdlRICaptureBegin", args=[vp, c_int])
aclmdlRICaptureGetInfo = _fn(
    "aclmdlRICaptureGetInfo", args=[vp, ctypes.POINTER(c_int), ctypes.POINTER(vp)])
aclmdlRICaptureEnd = _fn("aclmdlRICaptureEnd", args=[vp, ctypes.POINTER(vp)])
aclmdlRICaptureThreadExchangeMode = _fn(
    "aclmdlRICaptureThreadExchangeMode", args=[ctypes.POINTER(c_int)])
aclmdlRIExecuteAsync = _fn("aclmdlRIExecuteAsync", args=[vp, vp])
aclmdlRIDestroy = _fn("aclmdlRIDestroy", args=[vp])
aclGetRecentErrMsg = _fn("aclGetRecentErrMsg", res=ctypes.c_char_p, args=[])
simcann_violation_count = _fn("simcann_violation_count", res=ctypes.c_int64, args=[])
simcann_host_bytes_live = _fn("simcann_host_bytes_live", res=ctypes.c_int64, args=[])
simcann_device_bytes_live = _fn("simcann_device_bytes_live", res=ctypes.c_int64, args=[])
simcann_set_task_delay_us = _fn("simcann_set_task_delay_us", res=None, args=[ctypes.c_int64])
simcann_set_fault = _fn("simcann_set_fault", args=[ctypes.c_char_p, ctypes.c_int64])
simcann_reset_faults = _fn("simcann_reset_faults", res=None, args=[])

H2H, H2D, D2H, D2D = 0, 1, 2, 3
GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2
NONE, ACTIVE, INVALIDATED = 0, 1, 2
NOT_READY, COMPLETE = 0, 1
# acl_rt.h event flags
EV_SYNC, EV_STREAM_PROGRESS, EV_TIME_LINE, EV_DEVICE_ONLY, EV_EXTERNAL, EV_IPC = (
    0x1, 0x2, 0x8, 0x10, 0x20, 0x40)

def err():
    m = aclGetRecentErrMsg()
    return m.decode() if m else ""

def new_stream():
    s = vp()
    assert aclrtCreateStream(byref(s)) == 0
    return s

def malloc_host(n):
    p = vp()
    assert aclrtMallocHost(byref(p), n) == 0
    return p

def malloc_dev(n):
    p = vp()
    assert aclrtMalloc(byref(p), n, 0) == 0
    return p

# An event as torch_npu makes one: aclrtCreateEventExWithFlag (ACL_EVENT_SYNC by default).
def new_event(flags=EV_SYNC):
    e = vp()
    assert aclrtCreateEventExWithFlag(byref(e), flags) == 0
    return e

# An old-mode event: aclrtCreateEvent, or aclrtCreateEventWithFlag(flags).
def new_event_old(flags=None):
    e = vp()
    if flags is None:
        assert aclrtCreateEvent(byref(e)) == 0
    else:
        assert aclrtCreateEventWithFlag(byref(e), flags) == 0
    return e

def info(s):
    st, m = c_int(-1), vp()
    rc = aclmdlRICaptureGetInfo(s, byref(st), byref(m))
    return rc, st.value, m.value

def end(s):
    m = vp()
    rc = aclmdlRICaptureEnd(s, byref(m))
    return rc, m.value

def event_status(e):
    st = c_int(-1)
    rc = aclrtQueryEventStatus(e, byref(st))
    return rc, st.value

def put(p, data):
    ctypes.memmove(p, data, len(data))

def get(p, n):
    return ctypes.string_at(p, n)

def read_dev(d, n):
    buf = ctypes.create_string_buffer(n)
    assert aclrtMemcpy(ctypes.cast(buf, vp), n, d, n, D2H) == 0
    return buf.raw

def exchange_mode(mode):
    m = c_int(mode)
    assert aclmdlRICaptureThreadExchangeMode(byref(m)) == 0
    return m.value

assert aclrtSetDevice(0) == 0
"""

TORCH = (
    ACL.replace("assert aclrtSetDevice(0) == 0", "")
    + r"""
import torch, torch_npu
torch.npu.set_device(0)
NPU_VERSION = tuple(int(x) for x in torch_npu.__version__.split("+")[0].split(".")[:2])
"""
)

# Virtual memory (src/vmm.cpp) on top of ACL: test_vmm.py, test_free_wait.py.
VMM = r"""
class Loc(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("type", ctypes.c_int)]
class Prop(ctypes.Structure):  # aclrtPhysicalMemProp
    _fields_ = [("handleType", c_int), ("allocationType", c_int), ("memAttr", c_int),
                ("location", Loc), ("reserve", ctypes.c_uint64)]
aclrtReserveMemAddress = _fn("aclrtReserveMemAddress",
                             args=[ctypes.POINTER(vp), c_size, c_size, vp, ctypes.c_uint64])
aclrtReleaseMemAddress = _fn("aclrtReleaseMemAddress", args=[vp])
aclrtMallocPhysical = _fn("aclrtMallocPhysical",
                          args=[ctypes.POINTER(vp), c_size, ctypes.POINTER(Prop), ctypes.c_uint64])
aclrtFreePhysical = _fn("aclrtFreePhysical", args=[vp])
aclrtMapMem = _fn("aclrtMapMem", args=[vp, c_size, c_size, vp, ctypes.c_uint64])
aclrtUnmapMem = _fn("aclrtUnmapMem", args=[vp])
aclrtMemMapNoAccess = _fn("aclrtMemMapNoAccess", args=[vp, c_size, c_size, vp, ctypes.c_uint64])
class AccessDesc(ctypes.Structure):  # aclrtMemAccessDesc
    _fields_ = [("flags", c_int), ("location", Loc), ("rsv", ctypes.c_uint8 * 12)]
aclrtMemSetAccess = _fn("aclrtMemSetAccess", args=[vp, c_size, ctypes.POINTER(AccessDesc), c_size])
aclrtMemGetAccess = _fn("aclrtMemGetAccess",
                        args=[vp, ctypes.POINTER(Loc), ctypes.POINTER(ctypes.c_uint64)])
aclrtMemRetainAllocationHandle = _fn("aclrtMemRetainAllocationHandle",
                                     args=[vp, ctypes.POINTER(vp)])
aclrtMemGetAddressRange = _fn("aclrtMemGetAddressRange",
                              args=[vp, ctypes.POINTER(vp), ctypes.POINTER(c_size)])
NONE, READ, READWRITE = 0, 1, 3
HOST, DEVICE = 0, 1
HBM_MEM_HUGE = 4
SEG = 2 << 20

def reserve(n):
    p = vp()
    assert aclrtReserveMemAddress(byref(p), n, 0, None, 1) == 0
    return p.value

def physical(n, where=HOST, attr=HBM_MEM_HUGE):
    h = vp()
    rc = aclrtMallocPhysical(byref(h), n, byref(Prop(0, 0, attr, Loc(0, where), 0)), 0)
    return rc, h
"""
