"""The build: one library and one state under every name, derived symbol list, loud op stubs,
trace."""

from __future__ import annotations

import os
import subprocess

import pytest

from .simcann_snippets import ACL

pytestmark = pytest.mark.simulator


def _lib_dir() -> str:
    return os.environ["SIMCANN_LIB_DIR"]


def test_one_library_one_state(run_isolated):
    names = sorted(n for n in os.listdir(_lib_dir()) if n.endswith(".so"))
    for must in (
        "libascendcl.so",
        "libhccl.so",
        "libacl_op_compiler.so",
        "libge_runner.so",
        "libgraph.so",
        "libacl_tdt_channel.so",
        "libopapi.so",
        "libmsprofiler.so",
        "libruntime.so",
    ):
        assert must in names
    r = run_isolated(
        r"""
import ctypes, os
d = os.environ["SIMCANN_LIB_DIR"]
ids = {}
for n in NAMES:
    lib = ctypes.CDLL(os.path.join(d, n))
    lib.simcann_state_id.restype = ctypes.c_void_p
    ids[n] = lib.simcann_state_id()
result = sorted(set(ids.values()))
""".replace("NAMES", repr(names))
    )
    assert len(r.result) == 1, "every library name must reach the same runtime state"


def test_symbols_derived_from_the_wheel():
    gen = os.path.join(os.path.dirname(_lib_dir()), "gen")
    if not os.path.isdir(gen):
        pytest.skip("build products (gen/) not next to the library")
    wanted = open(os.path.join(gen, "wanted.txt")).read().split()
    exported = subprocess.run(
        ["nm", "-D", "--defined-only", os.path.join(_lib_dir(), "libascendcl.so")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    missing = sorted(set(wanted) - set(exported))
    assert not missing, missing[:20]
    # names torch_npu links against and looks up at run time are both there
    for n in (
        "aclrtMallocHost",
        "aclmdlRICaptureBegin",
        "aclrtPointerGetAttributes",
        "aclrtCreateEventExWithFlag",
    ):
        assert n in wanted and n in exported


def test_unimplemented_op_fails_loudly_and_trace(run_isolated):
    gen = os.path.join(os.path.dirname(_lib_dir()), "gen")
    if not os.path.isdir(gen):
        pytest.skip("build products (gen/) not next to the library")
    stubbed = open(os.path.join(gen, "stubbed.txt")).read().split()
    op = next(n for n in stubbed if n.startswith("aclnn") and n.endswith("GetWorkspaceSize"))
    other = next(n for n in stubbed if n.startswith("aclrt"))
    r = run_isolated(
        ACL
        + r"""
f = getattr(SIM, OP); f.restype = c_int
g = getattr(SIM, OTHER); g.restype = c_int
rc = f()
result = {"op": rc, "msg": err(), "other": g()}
p = malloc_dev(16)
aclrtFree(p)
""".replace("OP", repr(op)).replace("OTHER", repr(other)),
        env={"SIMCANN_TRACE": "1"},
    )
    assert r.result["op"] != 0
    assert op in r.result["msg"]
    assert r.result["other"] == 0
    assert "aclrtMalloc" in r.stderr and "simcann[" in r.stderr


def test_quiet_by_default_and_leak_report(run_isolated):
    code = ACL + "\nmalloc_host(100)\nmalloc_dev(200)\nresult = 1\n"
    quiet = run_isolated(code)
    assert "simcann" not in quiet.stderr
    loud = run_isolated(code, env={"SIMCANN_REPORT_LEAKS": "1"})
    line = [ln for ln in loud.stderr.splitlines() if "at exit" in ln]
    assert line and "100 bytes pinned host" in line[0] and "200 bytes device" in line[0]


def test_device_info(run_isolated):
    code = (
        ACL
        + r"""
SIM.aclrtGetSocName.restype = ctypes.c_char_p
n = ctypes.c_uint32()
assert SIM.aclrtGetDeviceCount(byref(n)) == 0
result = [SIM.aclrtGetSocName().decode(), n.value, aclrtSetDevice(n.value)]
"""
    )
    r = run_isolated(code)
    assert r.result == ["Ascend910B2", 1, 107001]
    r = run_isolated(code, env={"SIMCANN_SOC": "Ascend910_9391", "SIMCANN_DEVICE_COUNT": "2"})
    assert r.result == ["Ascend910_9391", 2, 107001]
