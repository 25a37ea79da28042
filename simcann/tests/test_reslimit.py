"""Device resource limits (cube / vector cores) of the process, of a stream and of a thread
(src/reslimit.cpp): TorchAir's aclgraph mode reads the capture stream's limits at every capture
and call and recaptures when they change, so they must be stable and true."""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, TORCH

pytestmark = pytest.mark.simulator

_RES = r"""
u32 = ctypes.c_uint32
for n in ("aclrtGetDeviceResLimit", "aclrtGetStreamResLimit"):
    getattr(SIM, n).argtypes = [ctypes.c_int if n == "aclrtGetDeviceResLimit" else vp, c_int,
                                ctypes.POINTER(u32)]
for n in ("aclrtSetDeviceResLimit", "aclrtSetStreamResLimit"):
    getattr(SIM, n).argtypes = [ctypes.c_int if n == "aclrtSetDeviceResLimit" else vp, c_int, u32]
SIM.aclrtResetDeviceResLimit.argtypes = [c_int]
SIM.aclrtResetStreamResLimit.argtypes = [vp]
SIM.aclrtUseStreamResInCurrentThread.argtypes = [vp]
SIM.aclrtUnuseStreamResInCurrentThread.argtypes = [vp]
SIM.aclrtGetResInCurrentThread.argtypes = [c_int, ctypes.POINTER(u32)]
CUBE, VECTOR = 0, 1

def dev_limit(t, d=0):
    v = u32(0)
    rc = SIM.aclrtGetDeviceResLimit(d, t, byref(v))
    return v.value if rc == 0 else rc

def stream_limit(s, t):
    v = u32(0)
    rc = SIM.aclrtGetStreamResLimit(s, t, byref(v))
    return v.value if rc == 0 else rc

def thread_limit(t):
    v = u32(0)
    rc = SIM.aclrtGetResInCurrentThread(t, byref(v))
    return v.value if rc == 0 else rc
"""


def test_limits_priority_and_errors(run_isolated):
    r = run_isolated(
        ACL.replace("assert aclrtSetDevice(0) == 0", "")  # no device yet: set below
        + _RES
        + r"""
out = {}
# no device / context yet: the null stream has no context
out["null_stream_no_context"] = stream_limit(None, CUBE)
out["thread_no_context"] = thread_limit(CUBE)
assert aclrtSetDevice(0) == 0
s1, s2 = new_stream(), new_stream()
out["hardware"] = [dev_limit(CUBE), dev_limit(VECTOR), stream_limit(s1, CUBE),
                   stream_limit(s1, VECTOR), stream_limit(None, VECTOR)]
# the process limit applies to every stream without its own
out["set_process"] = SIM.aclrtSetDeviceResLimit(0, CUBE, 10)
out["process"] = [dev_limit(CUBE), stream_limit(s1, CUBE), stream_limit(s2, CUBE),
                  stream_limit(s1, VECTOR)]
# a stream's own limit wins, and may exceed the process's
out["set_stream"] = [SIM.aclrtSetStreamResLimit(s1, CUBE, 4),
                     SIM.aclrtSetStreamResLimit(s2, CUBE, 20)]
out["stream"] = [stream_limit(s1, CUBE), stream_limit(s2, CUBE), stream_limit(s1, VECTOR)]
# the thread uses the bound stream's own limit, else the process's
out["thread_unbound"] = thread_limit(CUBE)
SIM.aclrtUseStreamResInCurrentThread(s1)
out["thread_bound"] = [thread_limit(CUBE), thread_limit(VECTOR)]
SIM.aclrtUnuseStreamResInCurrentThread(s2)          # not the bound one: stays bound
out["thread_unuse_other"] = thread_limit(CUBE)
SIM.aclrtUnuseStreamResInCurrentThread(s1)
out["thread_unused"] = thread_limit(CUBE)
# reset: the stream falls back to the process, the process to the hardware
SIM.aclrtResetStreamResLimit(s1)
out["stream_reset"] = stream_limit(s1, CUBE)
SIM.aclrtResetDeviceResLimit(0)
out["process_reset"] = [dev_limit(CUBE), stream_limit(s1, CUBE), stream_limit(s2, CUBE)]
# refused: more cores than the device has, an unknown type, a null value, a bad device
v = u32(0)
out["errors"] = [SIM.aclrtSetDeviceResLimit(0, CUBE, 25),
                 SIM.aclrtSetStreamResLimit(s1, VECTOR, 49),
                 SIM.aclrtSetStreamResLimit(s1, 2, 1),
                 SIM.aclrtGetStreamResLimit(s1, 2, byref(v)),
                 SIM.aclrtGetStreamResLimit(s1, CUBE, None),
                 SIM.aclrtGetDeviceResLimit(5, CUBE, byref(v))]
out["after_errors"] = [dev_limit(CUBE), stream_limit(s1, VECTOR)]
result = out
"""
    )
    out = r.result
    assert out["null_stream_no_context"] == 107002 and out["thread_no_context"] == 107002
    assert out["hardware"] == [24, 48, 24, 48, 48]
    assert out["set_process"] == 0 and out["process"] == [10, 10, 10, 48]
    assert out["set_stream"] == [0, 0] and out["stream"] == [4, 20, 48]
    assert out["thread_unbound"] == 10
    assert out["thread_bound"] == [4, 48]
    assert out["thread_unuse_other"] == 4 and out["thread_unused"] == 10
    assert out["stream_reset"] == 10
    assert out["process_reset"] == [24, 24, 20]
    assert out["errors"] == [107000, 107000, 107000, 107000, 107000, 107001]
    assert out["after_errors"] == [24, 48]


def test_torch_npu_stream_limits(run_isolated):
    """What torch.npu.get/set_stream_limit (TorchAir's aclgraph mode) and set_device_limit see."""
    r = run_isolated(
        TORCH
        + r"""
s = torch.npu.Stream()
out = {"default": torch.npu.get_stream_limit(s)}
torch.npu.set_stream_limit(s, 4, 8)
out["set"] = torch.npu.get_stream_limit(s)
torch.npu.set_device_limit(0, 10, 20)
out["device"] = torch.npu.get_device_limit(0)
out["other_stream"] = torch.npu.get_stream_limit(torch.npu.Stream())
torch.npu.reset_stream_limit(s)
out["reset"] = torch.npu.get_stream_limit(s)
try:
    torch.npu.set_stream_limit(s, 25, 8)
    out["too_many"] = "accepted"
except RuntimeError as e:
    out["too_many"] = "107000" in str(e)
result = out
"""
    )
    out = r.result
    assert out["default"] == {"cube_core_num": 24, "vector_core_num": 48}
    assert out["set"] == {"cube_core_num": 4, "vector_core_num": 8}
    assert out["device"] == {"cube_core_num": 10, "vector_core_num": 20}
    assert out["other_stream"] == out["device"] and out["reset"] == out["device"]
    assert out["too_many"] is True
