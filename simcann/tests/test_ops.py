"""Compute ops of the simulated CANN runtime (simcann/src/ops/), driven through torch_npu.

Each scenario runs in a fresh interpreter (``run_isolated``) and compares the bytes that arrive on
the host with a CPU reference. The ops hold on a real NPU too; the checks that name simulator
internals (trace lines, error texts) carry the ``simulator`` marker.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(
    not (os.environ.get("SIMCANN_LIB_DIR") or os.path.exists("/dev/davinci0")),
    reason="needs the simulated CANN runtime (source ci/sim-env.sh PAIR) or a real NPU",
)

# Shared by the snippets: deterministic inputs per dtype, and an exact (bytewise) comparison.
_HELPERS = r"""
import torch, torch_npu

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int32": torch.int32, "int64": torch.int64, "int16": torch.int16,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}

def make(dtype, n=12, shift=0):
    base = torch.arange(n, dtype=torch.int64) + shift
    if dtype == torch.bool:
        return base % 3 == 0
    if dtype == torch.uint8:
        return base.to(dtype)
    if dtype.is_floating_point:
        return (base.to(torch.float32) * 0.5 - 2.5).to(dtype)
    return (base - 5).to(dtype)

def same(got, want):
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype}{tuple(got.shape)} != {want.dtype}{tuple(want.shape)}"
    g = got.contiguous().reshape(-1).view(torch.uint8)
    w = want.contiguous().reshape(-1).view(torch.uint8)
    if torch.equal(g, w):
        return None
    return f"got {got.tolist()} want {want.tolist()}"
"""

_EAGER = (
    _HELPERS
    + r"""
failures = {}

def check(name, fn):
    try:
        got, want = fn()
        msg = same(got, want)
    except Exception as e:  # noqa: BLE001 - reported with the op name
        msg = f"raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if msg:
        failures[name] = msg

dev = "npu"
for dname, dt in DTYPES.items():
    a_c, b_c = make(dt), make(dt, shift=3)
    a, b = a_c.to(dev), b_c.to(dev)
    one = True if dt == torch.bool else 3
    check(f"{dname}/roundtrip", lambda: (a, a_c))
    check(f"{dname}/zeros",
          lambda: (torch.zeros(12, dtype=dt, device=dev), torch.zeros(12, dtype=dt)))
    check(f"{dname}/zeros_like", lambda: (torch.zeros_like(a), torch.zeros_like(a_c)))
    check(f"{dname}/ones", lambda: (torch.ones(12, dtype=dt, device=dev), torch.ones(12, dtype=dt)))
    check(f"{dname}/full", lambda: (torch.full((3, 4), one, dtype=dt, device=dev),
                                    torch.full((3, 4), one, dtype=dt)))
    check(f"{dname}/fill_", lambda: (a.clone().fill_(one), a_c.clone().fill_(one)))
    check(f"{dname}/zero_", lambda: (a.clone().zero_(), a_c.clone().zero_()))
    check(f"{dname}/fill_(device tensor)",
          lambda: (a.clone().fill_(b[2]), a_c.clone().fill_(b_c[2])))

    def copy_d2d():
        d = torch.empty_like(a)
        d.copy_(b)
        return d, b_c
    check(f"{dname}/copy_", copy_d2d)
    check(f"{dname}/clone", lambda: (a.clone(), a_c.clone()))
    check(f"{dname}/transpose_contiguous",
          lambda: (a.view(3, 4).t().contiguous(), a_c.view(3, 4).t().contiguous()))
    check(f"{dname}/add", lambda: (a + b, a_c + b_c))
    check(f"{dname}/mul", lambda: (a * b, a_c * b_c))
    check(f"{dname}/add_scalar", lambda: (a + one, a_c + one))
    check(f"{dname}/mul_scalar", lambda: (a * 2, a_c * 2))
    check(f"{dname}/scalar_add", lambda: (one + b, one + b_c))
    check(f"{dname}/broadcast_add", lambda: (a.view(3, 4) + b[:4], a_c.view(3, 4) + b_c[:4]))
    if dt != torch.bool:
        check(f"{dname}/arange", lambda: (torch.arange(2, 14, dtype=dt, device=dev),
                                          torch.arange(2, 14, dtype=dt)))
        check(f"{dname}/add_alpha",
              lambda: (torch.add(a, b, alpha=2), torch.add(a_c, b_c, alpha=2)))
        check(f"{dname}/x*2+z", lambda: (a * 2 + b, a_c * 2 + b_c))
        check(f"{dname}/sub", lambda: (a - b, a_c - b_c))
        check(f"{dname}/sub_scalar", lambda: (a - 1, a_c - 1))
        check(f"{dname}/sub_alpha",
              lambda: (torch.sub(a, b, alpha=2), torch.sub(a_c, b_c, alpha=2)))
        d_c = make(dt, shift=6)  # no zeros
        d = d_c.to(dev)
        check(f"{dname}/div", lambda: (a / d, a_c / d_c))
        check(f"{dname}/div_scalar", lambda: (a / 4, a_c / 4))

        def inplace():
            c, c_c = a.clone(), a_c.clone()
            c += b; c_c += b_c
            c *= b; c_c *= b_c
            c += 1; c_c += 1
            c *= 3; c_c *= 3
            c -= b; c_c -= b_c
            c -= 2; c_c -= 2
            if dt.is_floating_point:
                c /= d; c_c /= d_c
                c /= 2; c_c /= 2
            return c, c_c
        check(f"{dname}/inplace", inplace)
        check(f"{dname}/strided_add", lambda: (a.view(3, 4).t() + 1, a_c.view(3, 4).t() + 1))

# dtype changes: aclnnCast / aclnnInplaceCopy between types, mixed-type arithmetic
f_c = make(torch.float32)
f = f_c.to(dev)
i_c = make(torch.int32)
i = i_c.to(dev)
check("cast/f32->f16", lambda: (f.to(torch.float16), f_c.to(torch.float16)))
check("cast/f32->bf16", lambda: (f.to(torch.bfloat16), f_c.to(torch.bfloat16)))
check("cast/f32->i32", lambda: (f.to(torch.int32), f_c.to(torch.int32)))
check("cast/i32->f32", lambda: (i.to(torch.float32), i_c.to(torch.float32)))
check("cast/i32->bool", lambda: (i.to(torch.bool), i_c.to(torch.bool)))
check("mixed/i32+f32", lambda: (i + f, i_c + f_c))
check("mixed/i32*2.5", lambda: (i * 2.5, i_c * 2.5))
check("arange/float_step", lambda: (torch.arange(-1, 2, 0.25, device=dev),
                                    torch.arange(-1, 2, 0.25)))
check("full/0-dim", lambda: (torch.full((), 5.5, device=dev), torch.full((), 5.5)))
check("zeros/empty", lambda: (torch.zeros(0, 3, device=dev), torch.zeros(0, 3)))
check("add/0-dim+vector", lambda: (torch.full((), 2.0, device=dev) + f, torch.full((), 2.0) + f_c))
# Random data: rounding must match PyTorch's CPU kernels too (fused a + alpha * b; a scalar
# addend rounded to the tensor's dtype; float16 / bfloat16 computed in float).
torch.manual_seed(0)
for dname in ("float32", "float16", "bfloat16", "float64"):
    dt = DTYPES[dname]
    r_c, q_c = torch.randn(2048).to(dt), torch.randn(2048).to(dt)
    r, q = r_c.to(dev), q_c.to(dev)
    check(f"random/{dname}/add", lambda: (r + q, r_c + q_c))
    check(f"random/{dname}/add_alpha",
          lambda: (torch.add(r, q, alpha=0.3), torch.add(r_c, q_c, alpha=0.3)))
    check(f"random/{dname}/sub_alpha",
          lambda: (torch.sub(r, q, alpha=1.7), torch.sub(r_c, q_c, alpha=1.7)))
    check(f"random/{dname}/adds", lambda: (r + 0.1, r_c + 0.1))
    check(f"random/{dname}/subs", lambda: (r - 0.1, r_c - 0.1))
    check(f"random/{dname}/mul", lambda: (r * q, r_c * q_c))
    check(f"random/{dname}/muls", lambda: (r * 1.7, r_c * 1.7))
    check(f"random/{dname}/div", lambda: (r / q, r_c / q_c))
    check(f"random/{dname}/divs", lambda: (r / 3.0, r_c / 3.0))
    check(f"random/{dname}/x*2+z", lambda: (r * 2 + q, r_c * 2 + q_c))
    for tname in ("float16", "bfloat16", "float32", "int32"):
        check(f"random/{dname}->{tname}",
              lambda: ((r * 100).to(DTYPES[tname]), (r_c * 100).to(DTYPES[tname])))
big_c = torch.linspace(-3, 3, 4096)
check("float32/large x*2+z", lambda: (big_c.to(dev) * 2 + big_c.to(dev), big_c * 2 + big_c))
torch.npu.synchronize()
result = {"failures": failures}
"""
)


@pytest.mark.simulator
def test_eager_ops_match_cpu_and_go_through_aclnn(run_isolated):
    """zeros/full/fill/arange/copy/clone/add/sub/mul/div per dtype equal the CPU result, byte for
    byte."""
    out = run_isolated(_EAGER, env={"SIMCANN_TRACE": "1"})
    assert out.result["failures"] == {}
    assert "SIMCANN VIOLATION" not in out.stderr  # every declared range was live device memory
    # The traced entry points: every one of these ran as a task on a stream.
    for name in (
        "aclnnArange",
        "aclnnInplaceZero",
        "aclnnInplaceOne",
        "aclnnInplaceFillScalar",
        "aclnnInplaceFillTensor",
        "aclnnInplaceCopy",
        "aclnnAdd",
        "aclnnAdds",
        "aclnnMul",
        "aclnnMuls",
        "aclnnInplaceAdd",
        "aclnnInplaceMul",
        "aclnnSub",
        "aclnnSubs",
        "aclnnInplaceSub",
        "aclnnDiv",
        "aclnnDivs",
        "aclnnInplaceDiv",
    ):
        assert f"{name}: enqueue" in out.stderr, f"{name} was never launched"


_CAPTURE = (
    _HELPERS
    + r"""
dev = "npu"
x = torch.arange(8, dtype=torch.float32, device=dev)
z = torch.ones(8, dtype=torch.float32, device=dev)
xi = torch.arange(8, dtype=torch.int32, device=dev)
out = torch.full((8,), -1.0, device=dev)
acc = torch.full((8,), -1, dtype=torch.int32, device=dev)
zeroed = torch.full((8,), 7.0, device=dev)
torch.npu.synchronize()

g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    y = x * 2 + z          # aclnnMuls + aclnnAdd into the graph's pool
    out.copy_(y)           # aclnnInplaceCopy
    acc.zero_()            # aclnnInplaceZero
    acc += xi              # aclnnInplaceAdd
    acc *= 3               # aclnnInplaceMuls
    zeroed.zero_()
torch.npu.synchronize()
# Captured work is recorded, not run.
after_capture = [out.cpu().tolist(), acc.cpu().tolist(), zeroed.cpu().tolist()]

replays = []
for k in range(3):
    x.fill_(float(k + 1))              # eager, outside the graph: the replay must see it
    xi.copy_(torch.full((8,), 10 * k, dtype=torch.int32, device=dev))
    zeroed.fill_(5.0)
    g.replay()
    torch.npu.synchronize()
    replays.append([out.cpu().tolist(), acc.cpu().tolist(), zeroed.cpu().tolist()])
result = {"after_capture": after_capture, "replays": replays}
"""
)


def test_captured_ops_rerun_on_replay_with_current_inputs(run_isolated):
    """Ops captured in torch.npu.graph are not run at capture and re-read memory on replay."""
    out = run_isolated(_CAPTURE)
    assert "SIMCANN VIOLATION" not in out.stderr
    assert out.result["after_capture"] == [[-1.0] * 8, [-1] * 8, [7.0] * 8]
    for k, (o, acc, zeroed) in enumerate(out.result["replays"]):
        assert o == [2.0 * (k + 1) + 1.0] * 8, f"replay {k}: out"
        assert acc == [30 * k] * 8, f"replay {k}: acc"
        assert zeroed == [0.0] * 8, f"replay {k}: zeroed"


_FAIL_LOUDLY = r"""
import torch, torch_npu
x = torch.arange(4, dtype=torch.float32, device="npu")
errors = {}
def attempt(name, fn):
    try:
        fn()
        torch.npu.synchronize()
        errors[name] = None
    except RuntimeError as e:
        errors[name] = str(e)
attempt("sin", lambda: torch.sin(x))                      # aclnnSin: not implemented
attempt("zeros_complex", lambda: torch.zeros(4, dtype=torch.complex64, device="npu"))
# The runtime is still usable after those errors.
attempt("still_works", lambda: (x * 2 + 1).cpu())
after = (x * 2 + 1).cpu().tolist()
# Last: an operator torch_npu sends through aclop (its error poisons the task queue).
attempt("aclop", lambda: torch_npu.npu_format_cast(torch.ones(4, 4, device="npu"), 29))
result = {"errors": errors, "after": after}
"""


@pytest.mark.simulator
def test_unimplemented_and_unsupported_ops_fail_loudly(run_isolated):
    """An aclnn op the simulator lacks, a dtype an op rejects, or any aclop operator raises a
    RuntimeError naming the op."""
    out = run_isolated(_FAIL_LOUDLY)
    errors = out.result["errors"]
    assert errors["sin"] is not None and "aclnnSin" in errors["sin"], errors["sin"]
    assert errors["zeros_complex"] is not None, "complex zeros silently succeeded"
    assert "aclnnInplaceZero" in errors["zeros_complex"], errors["zeros_complex"]
    assert errors["still_works"] is None
    assert out.result["after"] == [1.0, 3.0, 5.0, 7.0]
    aclop = errors["aclop"]
    assert aclop is not None and "aclop operator" in aclop and "not implemented" in aclop, aclop


_ASYNC = r"""
import time, torch, torch_npu
x = torch.arange(8, dtype=torch.float32, device="npu")
torch.npu.synchronize()
t0 = time.monotonic()
y = x * 2          # reads x ...
x.fill_(7.0)       # ... before this overwrites it (stream order)
y += x
y *= 3
issue = time.monotonic() - t0
t1 = time.monotonic()
torch.npu.synchronize()
wait = time.monotonic() - t1
main, side = torch.npu.current_stream(), torch.npu.Stream()
side.wait_stream(main)
with torch.npu.stream(side):
    w = y + 1      # on the side stream
main.wait_stream(side)
v = w * 2
result = {"issue": issue, "wait": wait, "y": y.cpu().tolist(), "v": v.cpu().tolist()}
"""


@pytest.mark.simulator
def test_ops_are_asynchronous_and_stream_ordered(run_isolated):
    """With a per-task device delay, launching returns at once and the results respect stream
    order, also across streams joined by events. TASK_QUEUE_ENABLE=0: the aclnn launch runs on
    the Python thread itself, so a synchronous launch would show in `issue`."""
    out = run_isolated(_ASYNC, env={"TASK_QUEUE_ENABLE": "0", "SIMCANN_TASK_DELAY_US": "100000"})
    r = out.result
    want_y = [(2.0 * i + 7.0) * 3.0 for i in range(8)]
    assert r["y"] == want_y
    assert r["v"] == [2.0 * (y + 1.0) for y in want_y]
    # 4 tasks x 100 ms: launching them must not have waited for them.
    assert r["issue"] < r["wait"], r
