"""Simulated aclnnAbs / aclnnCeil / aclnnMax / aclnnMin / aclnnAmax / aclnnMaxDim / aclnnAll /
aclnnAny / aclnnReduceSum (src/ops/compare.cpp, reduce.cpp) against torch's CPU result: every
element type, NaN propagation of max / min, dims and keepdim, strided views.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_abs_max_all_any_sum_match_cpu(run_isolated):
    r = run_isolated(
        """
        import math, torch, torch_npu
        ok = {}
        base = torch.tensor([[-3.5, 2.0, -0.0, 7.25], [1.0, -8.0, 4.0, 0.5]])
        dtypes = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
                  torch.int32, torch.int16, torch.int8, torch.uint8)
        for dt in dtypes:
            x = base.to(dt)
            ok[f"abs{dt}"] = torch.equal(x.npu().abs().cpu(), x.abs())
            ok[f"max{dt}"] = torch.equal(x.npu().max().cpu(), x.max())
        i8 = torch.tensor([-128, 127, -1], dtype=torch.int8)
        ok["abs_int8_min_wraps"] = torch.equal(i8.npu().abs().cpu(), i8.abs())
        n = torch.tensor([1.0, math.nan, 3.0])
        ok["max_nan"] = math.isnan(n.npu().max().item())
        ok["min_nan"] = math.isnan(n.npu().min().item())
        ok["min"] = torch.equal(base.npu().min().cpu(), base.min()) and torch.equal(
            base.long().npu().min().cpu(), base.long().min())
        c = torch.tensor([-1.5, -0.5, 0.2, 2.0, math.inf])
        ok["ceil"] = torch.equal(c.npu().ceil().cpu(), c.ceil()) and torch.equal(
            c.half().npu().ceil().cpu(), c.half().ceil())
        x = torch.randn(4, 5, 6)
        ok["amax"] = torch.equal(x.npu().amax(dim=(0, 2)).cpu(), x.amax(dim=(0, 2)))
        ok["amax_keepdim"] = torch.equal(x.npu().amax(dim=1, keepdim=True).cpu(),
                                         x.amax(dim=1, keepdim=True))
        v, idx = x.npu().max(dim=1)
        cv, ci = x.max(dim=1)
        ok["max_dim"] = torch.equal(v.cpu(), cv) and torch.equal(idx.cpu(), ci)
        t = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
        ok["max_dim_first_tie"] = torch.equal(t.npu().max(dim=1).indices.cpu(),
                                              torch.tensor([1, 0]))
        ok["max_strided"] = torch.equal(x.npu().transpose(0, 2).max().cpu(), x.max())
        b = x > 0
        ok["all"] = torch.equal(b.npu().all().cpu(), b.all()) and torch.equal(
            b.npu().all(dim=1).cpu(), b.all(dim=1))
        ok["any"] = torch.equal(b.npu().any(dim=(0, 1)).cpu(), b.any(dim=(0, 1)))
        ok["all_float_nan_is_true"] = torch.equal(n.npu().all().cpu(), n.all())
        ok["sum_bool"] = torch.equal(b.npu().sum().cpu(), b.sum())
        ok["sum_int_dim"] = torch.equal(base.long().npu().sum(dim=0).cpu(), base.long().sum(dim=0))
        h = x.half()
        ok["sum_f16"] = torch.allclose(h.npu().sum(dim=2).cpu().float(), h.sum(dim=2).float(),
                                       1e-3, 1e-2)
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 34
