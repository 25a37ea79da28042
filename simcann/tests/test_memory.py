"""Device / pinned memory, pointer attributes and eager copies through torch_npu."""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, TORCH

pytestmark = pytest.mark.simulator


def test_eager_copies_round_trip(run_isolated):
    r = run_isolated(
        TORCH
        + r"""
out = {}
src = torch.arange(1000, dtype=torch.float32)
x = src.npu()
out["h2d_d2h"] = torch.equal(x.cpu(), src)
p = torch.empty(1000, pin_memory=True)
out["pinned"] = p.is_pinned()
p.copy_(src)
y = p.to("npu", non_blocking=True)
back = torch.empty(1000, pin_memory=True)
back.copy_(y, non_blocking=True)
torch.npu.synchronize()
out["pinned_round_trip"] = torch.equal(back, src)
out["pageable_non_blocking"] = torch.equal(src.to("npu", non_blocking=True).cpu(), src)
out["dtypes"] = all(
    torch.equal(t.npu().cpu(), t)
    for t in (torch.arange(7, dtype=torch.int64), torch.tensor([True, False]),
              torch.arange(5, dtype=torch.float16))
)
out["not_pinned"] = torch.empty(4).is_pinned()
out["device_bytes"] = simcann_device_bytes_live() > 0
out["host_bytes"] = simcann_host_bytes_live() > 0
result = out
"""
    )
    assert r.result == dict.fromkeys(r.result, True) | {"not_pinned": False}


def test_pointer_attributes_and_registry(run_isolated):
    r = run_isolated(
        ACL
        + r"""
class Loc(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("type", ctypes.c_int)]
class Attr(ctypes.Structure):
    _fields_ = [("location", Loc), ("pageSize", ctypes.c_uint32), ("rsv", ctypes.c_uint32 * 4)]
def kind(p):
    a = Attr()
    assert SIM.aclrtPointerGetAttributes(vp(p), byref(a)) == 0
    return a.location.type
HOST, DEVICE, UNREG = 0, 1, 2
h, d = malloc_host(4096), malloc_dev(4096)
raw = ctypes.create_string_buffer(8192 + 4096)
page = (ctypes.addressof(raw) + 4095) // 4096 * 4096  # registration needs a 4 KiB aligned address
out = {
    "host": kind(h.value), "host_interior": kind(h.value + 4000), "device": kind(d.value),
    "device_interior": kind(d.value + 17), "pageable": kind(page),
}
host0, dev0 = simcann_host_bytes_live(), simcann_device_bytes_live()
devp = vp()
assert SIM.aclrtHostRegister(vp(page), ctypes.c_uint64(8192), 0, byref(devp)) == 0
out["registered"] = kind(page + 100)
assert SIM.aclrtHostUnregister(vp(page)) == 0
out["unregistered"] = kind(page)
assert aclrtFreeHost(h) == 0 and aclrtFree(d) == 0
out["freed_host"] = kind(h.value)
out["bytes"] = [host0, dev0, simcann_host_bytes_live(), simcann_device_bytes_live()]
out["double_free"] = aclrtFreeHost(h)
free, total = c_size(), c_size()
assert SIM.aclrtGetMemInfo(1, byref(free), byref(total)) == 0
out["meminfo"] = 0 < free.value <= total.value
result = out
"""
    )
    o = r.result
    assert [o["host"], o["host_interior"], o["device"], o["device_interior"]] == [0, 0, 1, 1]
    assert o["pageable"] == 2 and o["registered"] == 0 and o["unregistered"] == 2
    assert o["freed_host"] == 2
    assert o["bytes"] == [4096, 4096, 0, 0]
    assert o["double_free"] != 0
    assert o["meminfo"]


def test_batch_and_conditional_copies(run_isolated):
    r = run_isolated(
        ACL
        + r"""
s = new_stream()
h1, h2, d1, d2 = malloc_host(64), malloc_host(64), malloc_dev(64), malloc_dev(64)
put(h1, b"\x01" * 64); put(h2, b"\x02" * 64)
P = vp * 2
Z = c_size * 2
fail = c_size(0)
rc = SIM.aclrtMemcpyBatchAsync(P(d1, d2), Z(64, 64), P(h1, h2), Z(64, 64), c_size(2), None,
                               None, c_size(0), byref(fail), s)
assert aclrtSynchronizeStream(s) == 0
out = {"batch_async": [rc, read_dev(d1, 64) == b"\x01" * 64, read_dev(d2, 64) == b"\x02" * 64]}
h3 = malloc_host(64)
SIM.aclrtMemcpyAsyncWithCondition.argtypes = [vp, c_size, vp, c_size, c_int, vp]
rc = SIM.aclrtMemcpyAsyncWithCondition(h3, 64, d2, 64, D2H, s)
assert aclrtSynchronizeStream(s) == 0
out["conditional"] = [rc, get(h3, 64) == b"\x02" * 64]
rc = SIM.aclrtMemcpyBatch(P(h3, h1), Z(64, 64), P(d1, d2), Z(64, 128), c_size(2), None, None,
                          c_size(0), byref(fail))
out["batch_bad"] = [rc, fail.value]
result = out
"""
    )
    assert r.result == {
        "batch_async": [0, True, True],
        "conditional": [0, True],
        "batch_bad": [100000, 1],
    }


def test_host_malloc_calls_count_every_pin(run_isolated):
    """simcann_host_malloc_calls() counts aclrtMallocHost calls past the argument checks: the
    tests that compare runtime pins per request with and without the plugin read it."""
    r = run_isolated(
        ACL
        + r"""
calls = _fn("simcann_host_malloc_calls", res=ctypes.c_int64, args=[])
before = calls()
a, b = malloc_host(4096), malloc_host(1 << 20)
after_two = calls()
assert aclrtFreeHost(a) == 0 and aclrtFreeHost(b) == 0
after_free = calls()
bad = vp()
failed = aclrtMallocHost(byref(bad), 0)
result = [after_two - before, after_free - after_two, failed != 0, calls() - after_free]
"""
    )
    assert r.result == [2, 0, True, 0], r.result  # a zero-size request is refused before counting
