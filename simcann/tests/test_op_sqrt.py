"""Simulated aclnnSqrt / aclnnInplaceSqrt (src/ops/compare.cpp) against torch's CPU result, with
CANN's semantics (hicann/ops-math math/sqrt/op_api/aclnn_sqrt.cpp,
docs/aclnnSqrt&aclnnInplaceSqrt.md): 16-bit floats computed in float32 and rounded once, float32
and float64 correctly rounded (IEEE sqrt), integral / bool inputs cast to float32 (int64 to
double) giving a floating result, negative inputs NaN, strided views, and a captured sqrt reading
its input again at every replay. torch.sqrt is the first op TorchAir's smoke test
(tests/smoke/aclgraph_test.py, test_aclgraph_scope_with_post_pass) reaches that the simulator
lacked.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_sqrt_matches_cpu(run_isolated):
    r = run_isolated(
        """
        import math, torch, torch_npu
        ok = {}
        base = torch.tensor([[0.0, -0.0, 1.0, 2.0], [1e-30, 3.0e38, math.inf, 0.25]])
        def exact64(x):  # correctly rounded (math.sqrt is IEEE sqrt; torch's CPU kernel is not
            # always: 1 ulp off for sqrt(2.0) in float64 on an AVX512 build)
            vals = [math.sqrt(v) for v in x.double().reshape(-1).tolist()]
            return torch.tensor(vals, dtype=torch.float64).reshape(x.shape)
        def exact(x):  # float32: correctly rounded in float64, rounded once to float32
            return exact64(x).float()
        for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            x = base.to(dt)
            got = x.npu().sqrt().cpu()
            ok[f"dtype{dt}"] = got.dtype == dt
            if dt == torch.float32:
                # IEEE sqrt is correctly rounded; torch's vectorised CPU float32 sqrt is not
                # always (1 ulp off for 3e38 on this torch): exact here, within 1 ulp of CPU.
                ok["sqrt_f32_exact"] = torch.equal(got, exact(x))
                ulps = (got.view(torch.int32) - x.sqrt().view(torch.int32)).abs()
                ok["sqrt_f32_cpu_1ulp"] = bool((ulps <= 1).all())
            elif dt == torch.float64:  # correctly rounded
                ok[f"sqrt{dt}"] = torch.equal(got, exact64(x))
            else:  # 16-bit: float32 then one rounding, as torch's CPU kernel
                ok[f"sqrt{dt}"] = torch.equal(got, x.sqrt())
        neg = torch.tensor([-1.0, -math.inf, math.nan, 4.0])
        ok["negative_is_nan"] = torch.equal(torch.isnan(neg.npu().sqrt().cpu()),
                                            torch.tensor([True, True, True, False]))
        for dt in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool):
            i = torch.tensor([0, 1, 2, 9, 100]).to(dt)  # bool: [F, T, T, T, T]
            got = i.npu().sqrt().cpu()
            ok[f"int{dt}"] = got.dtype == torch.float32 and torch.equal(got, i.sqrt())
        x = torch.rand(5, 7) * 100
        ok["strided"] = torch.equal(x.npu().t().sqrt().cpu(), exact(x.t()))
        y = x.clone().npu()
        y.sqrt_()
        ok["inplace"] = torch.equal(y.cpu(), exact(x))
        h = x.half()
        out = torch.empty(5, 7, dtype=torch.float32).npu()
        torch.sqrt(h.npu(), out=out)
        ok["out_float_from_half"] = torch.equal(out.cpu(), exact(h.float()))
        # Captured: the replay reads the input as it is then.
        src = torch.zeros(16).npu()
        g = torch_npu.npu.NPUGraph()
        s = torch_npu.npu.Stream()
        with torch_npu.npu.stream(s):
            src.sqrt()  # warm up outside the capture
            with torch_npu.npu.graph(g):
                res = src.sqrt()
        torch_npu.npu.synchronize()
        vals = torch.arange(16, dtype=torch.float32)
        src.copy_(vals.npu())
        g.replay()
        torch_npu.npu.synchronize()
        ok["captured_replay"] = torch.equal(res.cpu(), exact(vals))
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 20
