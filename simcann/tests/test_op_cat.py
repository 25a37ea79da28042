"""Simulated aclnnCat (src/ops/reduce.cpp): torch.cat on the device against torch's CPU result:
any dim, negative dims, strided inputs, mixed dtypes (promoted to the result type), skipped 1-D
empty tensors, mismatched sizes refused. Also fp16 / bf16 torch.randn (aclnnInplaceNormal).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_cat_matches_cpu(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        b = torch.arange(9, dtype=torch.float32).reshape(3, 3) * -1
        c = torch.arange(8, dtype=torch.float32).reshape(2, 4) + 100
        ok = {}
        ok["dim0"] = torch.equal(torch.cat([a.npu(), b.npu()]).cpu(), torch.cat([a, b]))
        ok["dim1"] = torch.equal(torch.cat([a.npu(), c.npu()], 1).cpu(), torch.cat([a, c], 1))
        ok["dim_neg"] = torch.equal(torch.cat([a.npu(), c.npu(), a.npu()], -1).cpu(),
                                    torch.cat([a, c, a], -1))
        ok["strided"] = torch.equal(torch.cat([b.npu().t(), b.npu()]).cpu(), torch.cat([b.t(), b]))
        ok["mixed_dtypes"] = torch.equal(torch.cat([a.half().npu(), b.long().npu()]).cpu(),
                                         torch.cat([a.half(), b.long()]))
        ok["empty_skipped"] = torch.equal(torch.cat([a.npu(), torch.empty(0).npu(), b.npu()]).cpu(),
                                          torch.cat([a, torch.empty(0), b]))
        ok["bool"] = torch.equal(torch.cat([(a > 2).npu(), (b > -3).npu()]).cpu(),
                                 torch.cat([a > 2, b > -3]))
        try:
            torch.cat([a.npu(), c.npu()], 0).cpu()
            ok["size_mismatch_refused"] = False
        except RuntimeError:
            ok["size_mismatch_refused"] = True
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 8


def test_randn_fp16_bf16(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        ok = {}
        for dt in (torch.float16, torch.bfloat16):
            torch.npu.manual_seed(7)
            x = torch.randn(20000, device="npu", dtype=dt).cpu()
            torch.npu.manual_seed(7)
            f = torch.randn(20000, device="npu").cpu()
            ok[f"{dt}_dtype"] = x.dtype == dt
            # The same draws as float32, rounded to the type.
            ok[f"{dt}_rounded_f32"] = torch.equal(x, f.to(dt))
            m, s = x.float().mean().item(), x.float().std().item()
            ok[f"{dt}_moments"] = abs(m) < 0.05 and abs(s - 1) < 0.05
        try:
            torch.randn(3, device="npu", dtype=torch.float64).cpu()
            ok["float64_refused"] = False
        except RuntimeError as e:
            ok["float64_refused"] = "aclnnInplaceNormal" in str(e)
        result = ok
        """
    )
    assert r.result and all(r.result.values()), r.result
    assert len(r.result) == 7
