"""TorchAir (torch_npu/dynamo/torchair) on the simulator: its extension modules load (their extra
library names are provided, the names only they need are stubs that abort when called), `import
torchair` works, its aclgraph mode (reduce-overhead) compiles and replays through NPUGraph without
one GE call, and the GE mode (max-autotune) stops at its first GE call, naming it.

Needs protobuf (torchair imports its GE IR definitions at import time; ci/lib/envsetup.sh
installs it into the test environments)."""

from __future__ import annotations

import glob
import os
import subprocess

import pytest

from .simcann_snippets import TORCH

pytestmark = pytest.mark.simulator


def _gen() -> str:
    gen = os.path.join(os.path.dirname(os.environ["SIMCANN_LIB_DIR"]), "gen")
    if not os.path.isdir(gen):
        pytest.skip("build products (gen/) not next to the library")
    return gen


@pytest.fixture(scope="module")
def torchair_libs() -> list[str]:
    out = subprocess.run(
        [
            "python",
            "-c",
            "import importlib.util, os; "
            "print(os.path.dirname(importlib.util.find_spec('torch_npu').origin))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    libs = sorted(glob.glob(os.path.join(out.stdout.strip(), "dynamo", "torchair", "core", "*.so")))
    if not libs:
        pytest.skip("this torch_npu wheel carries no TorchAir extension modules")
    return libs


def test_torchair_libraries_resolve(run_isolated, torchair_libs):
    gen = _gen()
    names = open(os.path.join(gen, "library_names.txt")).read().split()
    for must in ("libfmk_parser.so", "libascend_protobuf.so"):
        assert must in names and os.path.islink(os.path.join(os.environ["SIMCANN_LIB_DIR"], must))
    only_torchair = open(os.path.join(gen, "torchair.txt")).read().split()
    assert any(n.startswith("_ZN2ge") for n in only_torchair), "GE's C++ API not scanned"
    # Every TorchAir library loads with every name bound at once (Python dlopens extension
    # modules with RTLD_NOW): the extension modules are imported, the other libraries are loaded
    # as their dependency; nothing they link is missing.
    r = run_isolated(
        TORCH
        + r"""
import importlib, sys
assert sys.getdlopenflags() & os.RTLD_NOW
for lib in LIBS:
    name = os.path.basename(lib)[: -len(".so")]
    if ("PyInit_" + name).encode() in open(lib, "rb").read():
        importlib.import_module("torchair.core." + name)
maps = open("/proc/self/maps").read()
result = [os.path.basename(lib) for lib in LIBS if lib in maps]
""".replace("LIBS", repr(torchair_libs))
    )
    assert r.result == [os.path.basename(lib) for lib in torchair_libs]


def test_ge_call_aborts_naming_it(run_isolated, torchair_libs):
    r = run_isolated(
        r"""
import ctypes, os
sim = ctypes.CDLL(os.path.join(os.environ["SIMCANN_LIB_DIR"], "libge_runner.so"))
sim._ZN2ge10GEFinalizeEv()
result = "returned"
""",
        expect_ok=False,
    )
    assert r.returncode != 0 and r.result is None
    assert "ge::GEFinalize() is not modelled" in r.stderr


def test_import_torchair_and_reduce_overhead_matches_eager(run_isolated, torchair_libs):
    r = run_isolated(
        TORCH
        + r"""
import torchair
from torch._dynamo.utils import counters
cfg = torchair.CompilerConfig()
cfg.mode = "reduce-overhead"

def fn(x, y):
    return (x * 2 + y).relu() - y.sum()

torch.npu.set_stream(torch.npu.Stream())
x = torch.randn(256, device="npu")
y = torch.randn(256, device="npu")
eager = fn(x, y).cpu()
compiled = torch.compile(fn, backend=torchair.get_npu_backend(compiler_config=cfg), fullgraph=True)
same = []
for _ in range(3):
    same.append(torch.equal(compiled(x, y).cpu(), eager))
x.copy_(torch.randn(256))  # the replay reads the new contents
same.append(torch.equal(compiled(x, y).cpu(), fn(x, y).cpu()))
captured = {k: v for k, v in counters["npugraph_ex"].items() if k.startswith("captured_")}
result = {"same": same, "captured": captured, "module": torchair.__name__}
"""
    )
    assert r.result["same"] == [True] * 4, r.result
    assert list(r.result["captured"].values()) == [1], r.result  # one aclgraph, replayed
    assert "not modelled" not in r.stderr


def test_ge_mode_stops_at_first_ge_call(run_isolated, torchair_libs):
    """max-autotune builds a GE graph: the first GE call aborts (the simulator has no GE)."""
    r = run_isolated(
        TORCH
        + r"""
import torchair
compiled = torch.compile(lambda x: x * 2, backend=torchair.get_npu_backend(), fullgraph=True)
compiled(torch.ones(4, device="npu"))
result = "ran"
""",
        expect_ok=False,
    )
    assert r.returncode != 0 and r.result is None
    assert "is not modelled (only TorchAir's GE-mode libraries use it)" in r.stderr
    assert "ge::" in r.stderr
