"""aclrtHostRegister / aclrtHostRegisterV2 / aclrtHostUnregister with CANN's rules (page
alignment, double registration, unregistering what a queued copy still reads), and the CANN
version the simulator reports (SIMCANN_CANN_VERSION), which decides torch_npu's
pinned_mem_register. Rules and sources: aclrtHostRegister in simcann/src/memory.cpp,
aclsysGetCANNVersion in simcann/src/device.cpp."""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, TORCH

pytestmark = pytest.mark.simulator

REGISTER = r"""
aclrtHostRegisterV2 = _fn("aclrtHostRegisterV2", args=[vp, ctypes.c_uint64, ctypes.c_uint32])
aclrtHostUnregister = _fn("aclrtHostUnregister", args=[vp])
MAPPED, PINNED = 0x2, 0x10000000
def page_buffer(n):
    raw = ctypes.create_string_buffer(n + 8192)
    KEEP.append(raw)
    return (ctypes.addressof(raw) + 4095) // 4096 * 4096
KEEP = []
"""


def test_register_needs_a_page_aligned_address(run_isolated):
    o = run_isolated(
        ACL
        + REGISTER
        + r"""
p = page_buffer(8192)
result = {
    "unaligned": aclrtHostRegisterV2(vp(p + 64), 4096, MAPPED),
    "aligned": aclrtHostRegisterV2(vp(p), 8192, MAPPED | PINNED),
    "unregister": aclrtHostUnregister(vp(p)),
    "pinned_aligned": malloc_host(100).value % 4096,
}
"""
    ).result
    assert o == {"unaligned": 100000, "aligned": 0, "unregister": 0, "pinned_aligned": 0}


def test_double_registration_and_unregistering_what_is_not_registered(run_isolated):
    o = run_isolated(
        ACL
        + REGISTER
        + r"""
p = page_buffer(16384)
result = {
    "first": aclrtHostRegisterV2(vp(p), 8192, MAPPED),
    "same": aclrtHostRegisterV2(vp(p), 8192, MAPPED),
    "overlap": aclrtHostRegisterV2(vp(p + 4096), 8192, MAPPED),
    "next": aclrtHostRegisterV2(vp(p + 8192), 8192, MAPPED),
    "unregister": aclrtHostUnregister(vp(p)),
    "again": aclrtHostUnregister(vp(p)),
    "never": aclrtHostUnregister(vp(page_buffer(4096))),
    "next_unregister": aclrtHostUnregister(vp(p + 8192)),
}
"""
    ).result
    assert o == {
        "first": 0,
        "same": 507910,  # ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED
        "overlap": 507910,
        "next": 0,
        "unregister": 0,
        "again": 507911,  # ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
        "never": 507911,
        "next_unregister": 0,
    }


def test_registering_pinned_memory(run_isolated):
    """torch_npu's pinned_mem_register: aclrtMallocHost(WithCfg) memory, then
    aclrtHostRegisterV2 on it (allowed by the docs); unregistered it stays pinned."""
    o = run_isolated(
        ACL
        + REGISTER
        + r"""
h = malloc_host(8192)
out = {"register": aclrtHostRegisterV2(h, 8192, MAPPED | PINNED)}
out["twice"] = aclrtHostRegisterV2(h, 8192, MAPPED)
out["unregister"] = aclrtHostUnregister(h)
out["unregister_again"] = aclrtHostUnregister(h)
out["reregister"] = aclrtHostRegisterV2(h, 8192, MAPPED)
out["free_registered"] = aclrtFreeHost(h)
out["live"] = simcann_host_bytes_live()
result = out
"""
    ).result
    assert o == {
        "register": 0,
        "twice": 507910,
        "unregister": 0,
        "unregister_again": 507911,
        "reregister": 0,
        "free_registered": 0,
        "live": 0,
    }


def test_unregister_does_not_wait_for_a_queued_copy(run_isolated):
    """Unregistering malloc'ed memory a queued copy still reads returns at once; the copy then
    finds its memory gone (a violation, as after a free). Pinned memory stays pinned: no hazard."""
    o = run_isolated(
        ACL
        + REGISTER
        + r"""
s = vp(); assert aclrtCreateStream(byref(s)) == 0
d = malloc_dev(4096)
simcann_set_task_delay_us(50000)
out = {}
for name in ("malloc", "pinned"):
    src = vp(page_buffer(4096)) if name == "malloc" else malloc_host(4096)
    assert aclrtHostRegisterV2(src, 4096, MAPPED) == 0
    before = simcann_violation_count()
    assert aclrtMemcpyAsync(d, 4096, src, 4096, H2D, s) == 0
    out[name + "_unregister"] = aclrtHostUnregister(src)
    assert aclrtSynchronizeStream(s) == 0
    out[name + "_violations"] = simcann_violation_count() - before
result = out
"""
    ).result
    assert o == {
        "malloc_unregister": 0,
        "malloc_violations": 1,
        "pinned_unregister": 0,
        "pinned_violations": 0,
    }


VERSION = r"""
class PkgVersion(ctypes.Structure):
    _fields_ = [("version", ctypes.c_char * 128), ("major", ctypes.c_char * 64),
                ("minor", ctypes.c_char * 64), ("release", ctypes.c_char * 64),
                ("patch", ctypes.c_char * 64), ("reserved", ctypes.c_char * 128)]
def cann(name):
    v = PkgVersion()
    assert SIM.aclsysGetCANNVersion(name, byref(v)) == 0
    return [v.version.decode(), v.major.decode(), v.minor.decode(), v.release.decode()]
CANN, RUNTIME, DRIVER = 0, 1, 7
buf = ctypes.create_string_buffer(128)
assert SIM.aclsysGetVersionStr(b"runtime", buf) == 0
result = {"cann": cann(CANN), "runtime": cann(RUNTIME), "driver": cann(DRIVER),
          "runtime_str": buf.value.decode()}
"""


@pytest.mark.parametrize(
    "env,expected",
    [
        ({}, {"cann": ["", "", "", ""], "driver": ["", "", "", ""], "runtime_str": ""}),
        (
            {"SIMCANN_CANN_VERSION": "8.5.0"},
            {
                "cann": ["8.5.0", "8", "5", "0"],
                "driver": ["26.0.RC1", "26", "0", "RC1"],
                "runtime_str": "8.5.0",
            },
        ),
        (
            {"SIMCANN_CANN_VERSION": "8.3.RC1", "SIMCANN_DRIVER_VERSION": "25.2.0"},
            {
                "cann": ["8.3.RC1", "8", "3", "RC1"],
                "driver": ["25.2.0", "25", "2", "0"],
                "runtime_str": "8.3.RC1",
            },
        ),
    ],
)
def test_cann_version_is_selectable(run_isolated, env, expected):
    o = run_isolated(ACL + VERSION, env={"SIMCANN_CANN_VERSION": "", **env}).result
    assert o["runtime"] == o["cann"]
    del o["runtime"]
    assert o == expected


@pytest.mark.parametrize("cann", ["", "8.5.0"])
def test_torch_npu_registers_pinned_memory_from_cann_8_5(run_isolated, cann):
    """With PYTORCH_NPU_ALLOC_CONF=pinned_mem_register:True torch_npu >= 2.13 registers its
    pinned blocks only when the runtime reports CANN >= 8.5.0; otherwise it warns and turns it
    off."""
    r = run_isolated(
        TORCH
        + r"""
t = torch.ones(1024).pin_memory()
d = t.to("npu", non_blocking=True)
result = {"pinned": t.is_pinned(), "back": d.cpu().tolist() == t.tolist(),
          "npu": list(NPU_VERSION)}
del t, d
torch_npu.npu.host_empty_cache()
""",
        env={
            "SIMCANN_CANN_VERSION": cann,
            "PYTORCH_NPU_ALLOC_CONF": "pinned_mem_register:True",
            "SIMCANN_TRACE": "1",
        },
    )
    o = r.result
    assert o["pinned"] and o["back"]
    if tuple(o["npu"]) < (2, 13):
        pytest.skip("checked on torch_npu 2.13 (the pair that runs the registered-memory leg)")
    registered = "aclrtHostRegisterV2" in r.stderr
    refused = "pinned_mem_register setting failure" in r.stderr
    if cann:
        assert registered and not refused
        assert "aclrtHostUnregister" in r.stderr
    else:
        assert refused and not registered


def test_host_get_device_pointer(run_isolated):
    """aclrtHostGetDevicePointer (cann/runtime docs/api_docs/aclrtHostGetDevicePointer.md): the
    device address of memory registered with aclrtHostRegister(V2) - pinned or malloc'ed - at
    the address its registration began; flag is reserved (0). Not registered (pinned only,
    unregistered again, an interior pointer): 507911."""
    o = run_isolated(
        ACL
        + REGISTER
        + r"""
get = _fn("aclrtHostGetDevicePointer", args=[vp, ctypes.POINTER(vp), ctypes.c_uint32])
def device_pointer(p, flag=0):
    d = vp()
    rc = get(p, byref(d), flag)
    return [rc, d.value == (p.value if isinstance(p, vp) else p)]
h = malloc_host(8192)
out = {"pinned_only": device_pointer(h)[0]}
assert aclrtHostRegisterV2(h, 8192, MAPPED | PINNED) == 0
out["pinned_registered"] = device_pointer(h)
out["interior"] = device_pointer(vp(h.value + 4096))[0]
out["flag"] = device_pointer(h, flag=1)[0]
out["null_out"] = get(h, None, 0)
assert aclrtHostUnregister(h) == 0
out["unregistered"] = device_pointer(h)[0]
p = page_buffer(4096)
assert aclrtHostRegisterV2(vp(p), 4096, MAPPED) == 0
out["malloc_registered"] = device_pointer(vp(p))
assert aclrtHostUnregister(vp(p)) == 0
assert aclrtFreeHost(h) == 0
result = out
"""
    ).result
    assert o == {
        "pinned_only": 507911,  # ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
        "pinned_registered": [0, True],  # one address space: the device address is the host's
        "interior": 507911,
        "flag": 100000,
        "null_out": 100000,
        "unregistered": 507911,
        "malloc_registered": [0, True],
    }
