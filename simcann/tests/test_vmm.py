"""Virtual memory (src/vmm.cpp): aclrtReserveMemAddress / aclrtMallocPhysical / aclrtMapMem /
aclrtUnmapMem / aclrtFreePhysical / aclrtReleaseMemAddress, aclrtMemMapNoAccess /
aclrtMemSetAccess / aclrtMemGetAccess, aclrtMemRetainAllocationHandle and
aclrtMemGetAddressRange with CANN's rules (hicann/runtime
docs/zh/api_ref/11-04_virtual_memory_management.md, src/acl/aclrt_impl/memory.cpp), the bytes
belonging to the physical handle, mapped memory read as pinned host memory by async copies and
their range checks, and torch_npu's expandable pinned segments
(PYTORCH_NPU_ALLOC_CONF=pin_memory_expandable_segments:True) running on them."""

from __future__ import annotations

import pytest

from .simcann_snippets import ACL, VMM

pytestmark = pytest.mark.simulator


# The start of every snippet below: `r` collects its results, `base_host` is the host bytes counted
# before it, `va` a reservation of four segments, `h` one segment's physical handle (`rc` the
# aclrtMallocPhysical code).
VMM_START = r"""
r = {}
base_host = simcann_host_bytes_live()
va = reserve(4 * SEG)
rc, h = physical(SEG)
"""


def run_vmm(run_isolated, body):
    """`result` of `body` run in a fresh process after ACL, VMM and VMM_START."""
    return run_isolated(ACL + VMM + VMM_START + body).result


def test_vmm_rules_and_codes(run_isolated):
    o = run_vmm(
        run_isolated,
        r"""
r["malloc"] = rc
r["reserve_bad_alignment"] = aclrtReserveMemAddress(byref(vp()), SEG, 4096, None, 0)
r["reserve_size0"] = aclrtReserveMemAddress(byref(vp()), 0, 0, None, 0)
r["physical_flags"] = aclrtMallocPhysical(byref(vp()), SEG, byref(Prop(0, 0, 4, Loc(0, 0), 0)), 1)
r["physical_ddr_on_device"] = physical(SEG, DEVICE, 2)[0]
r["physical_too_much_device"] = physical(65 << 30, DEVICE)[0]
r["map_size_mismatch"] = aclrtMapMem(vp(va), 2 * SEG, 0, h, 0)
r["map_offset"] = aclrtMapMem(vp(va), SEG, SEG, h, 0)
r["map_outside"] = aclrtMapMem(vp(va + 4 * SEG), SEG, 0, h, 0)
r["map"] = aclrtMapMem(vp(va + SEG), SEG, 0, h, 0)
rc2, h2 = physical(SEG)
r["map_overlap"] = aclrtMapMem(vp(va + SEG + 4096), SEG, 0, h2, 0)
r["release_while_mapped"] = aclrtReleaseMemAddress(vp(va))
r["unmap_not_start"] = aclrtUnmapMem(vp(va + SEG + 4096))
r["unmap"] = aclrtUnmapMem(vp(va + SEG))
r["unmap_again"] = aclrtUnmapMem(vp(va + SEG))
r["free"] = aclrtFreePhysical(h)
r["free_again"] = aclrtFreePhysical(h)
r["map_freed"] = aclrtMapMem(vp(va), SEG, 0, h, 0)
r["free2"] = aclrtFreePhysical(h2)
r["release"] = aclrtReleaseMemAddress(vp(va))
r["release_again"] = aclrtReleaseMemAddress(vp(va))
result = r
""",
    )
    assert o == {
        "malloc": 0,
        "reserve_bad_alignment": 100000,
        "reserve_size0": 100000,
        "physical_flags": 100000,
        "physical_ddr_on_device": 100000,
        "physical_too_much_device": 207001,
        "map_size_mismatch": 107000,
        "map_offset": 107000,
        "map_outside": 107000,
        "map": 0,
        "map_overlap": 107000,
        "release_while_mapped": 107000,
        "unmap_not_start": 107000,
        "unmap": 0,
        "unmap_again": 107000,
        "free": 0,
        "free_again": 107000,
        "map_freed": 107000,
        "free2": 0,
        "release": 0,
        "release_again": 107000,
    }


def test_mapped_memory_is_the_handles_and_pinned(run_isolated):
    """Bytes written through one mapping are read through another mapping of the handle; a
    mapping is pinned host memory to async copies; physical bytes count until freed AND
    unmapped; a queued copy over a mapping unmapped before it runs is a violation, not run."""
    o = run_vmm(
        run_isolated,
        r"""
assert aclrtMapMem(vp(va), SEG, 0, h, 0) == 0
put(va + 100, b"expandable")
assert aclrtUnmapMem(vp(va)) == 0
assert aclrtMapMem(vp(va + 2 * SEG), SEG, 0, h, 0) == 0
r["bytes_follow_handle"] = get(va + 2 * SEG + 100, 10)
r["counted"] = simcann_host_bytes_live() - base_host
s = new_stream()
d = malloc_dev(64)
r["async_h2d"] = aclrtMemcpyAsync(d, 64, vp(va + 2 * SEG + 100), 10, H2D, s)
assert aclrtSynchronizeStream(s) == 0
r["on_device"] = read_dev(d, 10)
r["free_while_mapped"] = aclrtFreePhysical(h)
r["still_counted"] = simcann_host_bytes_live() - base_host
simcann_set_task_delay_us(200000)
v0 = simcann_violation_count()
r["queued"] = aclrtMemcpyAsync(d, 64, vp(va + 2 * SEG), 10, H2D, s)
r["unmap"] = aclrtUnmapMem(vp(va + 2 * SEG))
aclrtSynchronizeStream(s)
simcann_set_task_delay_us(0)
r["violations"] = simcann_violation_count() - v0
r["released"] = simcann_host_bytes_live() - base_host
r["release"] = aclrtReleaseMemAddress(vp(va))
result = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in r.items()}
""",
    )
    assert o == {
        "bytes_follow_handle": "expandable",
        "counted": 2 << 20,
        "async_h2d": 0,
        "on_device": "expandable",
        "free_while_mapped": 0,
        "still_counted": 2 << 20,
        "queued": 0,
        "unmap": 0,
        "violations": 1,
        "released": 0,
        "release": 0,
    }


def test_torch_npu_expandable_pinned_segments(run_isolated):
    """torch_npu 2.14 switches its pinned allocator to expandable segments when the driver is
    new enough (SIMCANN_CANN_VERSION set): pinned tensors then live in mapped 20 MiB segments,
    copies round-trip, and a tensor spanning two segments copies whole."""
    r = run_isolated(
        r"""
        import os, torch, torch_npu
        x = torch.arange(1000, dtype=torch.float32).pin_memory()
        d = x.to("npu", non_blocking=True)
        big = torch.arange(30 << 18, dtype=torch.float32).pin_memory()  # 30 MiB > one segment
        db = big.to("npu", non_blocking=True)
        back = torch.empty_like(big).pin_memory()
        back.copy_(db, non_blocking=True)
        torch.npu.synchronize()
        result = {"pinned": x.is_pinned() and big.is_pinned(),
                  "small": torch.equal(d.cpu(), torch.arange(1000, dtype=torch.float32)),
                  "big": torch.equal(back, torch.arange(30 << 18, dtype=torch.float32))}
        """,
        env={
            "SIMCANN_CANN_VERSION": "8.5.0",
            "PYTORCH_NPU_ALLOC_CONF": "pin_memory_expandable_segments:True",
            "SIMCANN_TRACE": "1",
        },
    )
    if "aclrtMapMem" not in r.stderr:
        pytest.skip("this torch_npu does not use expandable pinned segments")
    assert r.result == {"pinned": True, "small": True, "big": True}
    assert "aclrtReserveMemAddress" in r.stderr and "VIOLATION" not in r.stderr


def test_access_flags_and_map_no_access(run_isolated):
    """aclrtMemMapNoAccess leaves the range inaccessible (not memory copies may use) until
    aclrtMemSetAccess grants it; aclrtMemGetAccess reads the flag per location (aclrtMapMem:
    READWRITE for the handle's own location); the rules and codes of vmm.cpp's header."""
    o = run_vmm(
        run_isolated,
        r"""
rc2, h2 = physical(SEG)
def get_access(p, where=HOST, dev=0):
    f = ctypes.c_uint64(99)
    rc = aclrtMemGetAccess(vp(p), byref(Loc(dev, where)), byref(f))
    return rc, f.value
def set_access(p, n, *descs):
    arr = (AccessDesc * max(len(descs), 1))(*[AccessDesc(f, Loc(i, t)) for f, t, i in descs])
    return aclrtMemSetAccess(vp(p), n, arr, len(descs))
r["map"] = aclrtMapMem(vp(va), SEG, 0, h, 0)
r["get_own_host"] = get_access(va)
r["get_device"] = get_access(va, DEVICE, 0)
r["noaccess_flags"] = aclrtMemMapNoAccess(vp(va + SEG), SEG, 0, h2, 1)
r["noaccess_size"] = aclrtMemMapNoAccess(vp(va + SEG), 2 * SEG, 0, h2, 0)
r["noaccess"] = aclrtMemMapNoAccess(vp(va + SEG), SEG, 0, h2, 0)
r["noaccess_get"] = get_access(va + SEG)
s = new_stream()
d = malloc_dev(64)
# Not accessible: not (yet) a block the runtime knows as memory.
r["noaccess_is_pinned"] = aclrtMemGetAddressRange(vp(va + SEG), byref(vp()), byref(c_size())) == 0
r["set_null_desc"] = aclrtMemSetAccess(vp(va + SEG), SEG, None, 1)
r["set_count0"] = set_access(va + SEG, SEG)
r["set_bad_flag"] = set_access(va + SEG, SEG, (2, HOST, 0))
r["set_bad_location"] = set_access(va + SEG, SEG, (READWRITE, 2, 0))
r["set_not_start"] = set_access(va + SEG + 4096, SEG, (READWRITE, HOST, 0))
r["set_size"] = set_access(va + SEG, 2 * SEG, (READWRITE, HOST, 0))
r["set_read"] = set_access(va + SEG, SEG, (READ, HOST, 0), (READWRITE, DEVICE, 0))
r["get_after_set"] = [get_access(va + SEG), get_access(va + SEG, DEVICE, 0),
                      get_access(va + SEG, DEVICE, 1)]
put(va + SEG, b"granted")
r["readable"] = get(va + SEG, 7).decode()
r["copy"] = aclrtMemcpyAsync(d, 64, vp(va + SEG), 7, H2D, s)
assert aclrtSynchronizeStream(s) == 0
r["on_device"] = read_dev(d, 7).decode()
r["get_null"] = aclrtMemGetAccess(vp(va), None, byref(ctypes.c_uint64()))
r["get_bad_location"] = get_access(va, 3)[0]
r["get_not_mapped"] = get_access(va + 2 * SEG)[0]
r["revoke"] = set_access(va + SEG, SEG, (NONE, HOST, 0), (NONE, DEVICE, 0))
r["revoked_range"] = aclrtMemGetAddressRange(vp(va + SEG), byref(vp()), byref(c_size()))
r["unmap_noaccess"] = aclrtUnmapMem(vp(va + SEG))
r["unmap"] = aclrtUnmapMem(vp(va))
r["free"] = [aclrtFreePhysical(h), aclrtFreePhysical(h2)]
r["release"] = aclrtReleaseMemAddress(vp(va))
result = r
""",
    )
    assert o == {
        "map": 0,
        "get_own_host": [0, 3],
        "get_device": [0, 0],
        "noaccess_flags": 100000,
        "noaccess_size": 107000,
        "noaccess": 0,
        "noaccess_get": [0, 0],
        "noaccess_is_pinned": False,
        "set_null_desc": 107000,
        "set_count0": 107000,
        "set_bad_flag": 107000,
        "set_bad_location": 107000,
        "set_not_start": 107000,
        "set_size": 107000,
        "set_read": 0,
        "get_after_set": [[0, 1], [0, 3], [0, 0]],
        "readable": "granted",
        "copy": 0,
        "on_device": "granted",
        "get_null": 100000,
        "get_bad_location": 107000,
        "get_not_mapped": 107000,
        "revoke": 0,
        "revoked_range": 107000,
        "unmap_noaccess": 0,
        "unmap": 0,
        "free": [0, 0],
        "release": 0,
    }


def test_retain_handle_and_address_range(run_isolated):
    """aclrtMemRetainAllocationHandle returns the mapped handle and owes one more
    aclrtFreePhysical (the bytes stay counted until every reference is freed and the range is
    unmapped); aclrtMemGetAddressRange answers for aclrtMalloc, aclrtMallocHost and mapped
    blocks (the mapping, not the reservation) and refuses other addresses."""
    o = run_vmm(
        run_isolated,
        r"""
assert aclrtMapMem(vp(va + SEG), SEG, 0, h, 0) == 0
got = vp()
r["retain_null"] = aclrtMemRetainAllocationHandle(vp(va + SEG), None)
r["retain_not_start"] = aclrtMemRetainAllocationHandle(vp(va + SEG + 64), byref(got))
r["retain_unmapped"] = aclrtMemRetainAllocationHandle(vp(va), byref(got))
r["retain"] = aclrtMemRetainAllocationHandle(vp(va + SEG), byref(got))
r["same_handle"] = got.value == h.value
r["free_1"] = aclrtFreePhysical(h)
r["unmap"] = aclrtUnmapMem(vp(va + SEG))
r["counted_after_unmap"] = simcann_host_bytes_live() - base_host
r["remap_retained"] = aclrtMapMem(vp(va), SEG, 0, h, 0)
def rng(p, both=True):
    b, n = vp(), c_size()
    rc = aclrtMemGetAddressRange(vp(p), byref(b), byref(n)) if both else \
        aclrtMemGetAddressRange(vp(p), None, byref(n))
    return [rc, (b.value or 0) - p if both else None, n.value]
r["range_mapped"] = rng(va + 100)
r["range_size_only"] = rng(va + 100, both=False)
r["range_reserved_only"] = rng(va + 2 * SEG)[0]
d = malloc_dev(1000)
r["range_device"] = rng(d.value + 10)
hp = malloc_host(5000)
r["range_host"] = rng(hp.value + 4999)
r["range_null"] = aclrtMemGetAddressRange(None, byref(vp()), byref(c_size()))
r["range_no_outputs"] = aclrtMemGetAddressRange(vp(va), None, None)
buf = ctypes.create_string_buffer(64)
r["range_pageable"] = rng(ctypes.addressof(buf))[0]
r["unmap2"] = aclrtUnmapMem(vp(va))
assert aclrtFreeHost(hp) == 0
r["free_2"] = aclrtFreePhysical(h)
r["released"] = simcann_host_bytes_live() - base_host
r["free_3"] = aclrtFreePhysical(h)
r["release"] = aclrtReleaseMemAddress(vp(va))
result = r
""",
    )
    assert o["range_device"][2] >= 1000 and o["range_host"][2] >= 5000
    o["range_device"][2] = o["range_host"][2] = "size"
    assert o == {
        "retain_null": 100000,
        "retain_not_start": 107000,
        "retain_unmapped": 107000,
        "retain": 0,
        "same_handle": True,
        "free_1": 0,
        "unmap": 0,
        "counted_after_unmap": 2 << 20,
        "remap_retained": 0,
        "range_mapped": [0, -100, 2 << 20],
        "range_size_only": [0, None, 2 << 20],
        "range_reserved_only": 107000,
        "range_device": [0, -10, "size"],
        "range_host": [0, -4999, "size"],
        "range_null": 100000,
        "range_no_outputs": 107000,
        "range_pageable": 107000,
        "unmap2": 0,
        "free_2": 0,
        "released": 0,
        "free_3": 107000,
        "release": 0,
    }
