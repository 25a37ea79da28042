"""Simulated aclnnMatmul (src/ops/matmul_nd.cpp) against torch's CPU matmul, with CANN's rules
(hicann/ops-nn matmul/mat_mul_v3/op_api/aclnn_matmul.cpp): 3-D float16 / bfloat16 / float32
batches (TorchAir's batch_matmul_transpose smoke tests), broadcast batch dimensions, 1-D operands,
transposed (strided) operands, a captured matmul reading its inputs again at every replay. The
simulator sums in double and rounds once, so it equals the float64 product rounded to the dtype.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_matmul_nd_matches_cpu(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        ok = {}
        def exact(a, b, dt):
            return (a.double() @ b.double()).to(dt)
        for dt in (torch.float16, torch.bfloat16, torch.float32):
            a = torch.randn(6, 4, 32).to(dt)
            b = torch.randn(6, 32, 8).to(dt)
            got = (a.npu() @ b.npu()).cpu()
            ok[f"bmm_{dt}"] = got.dtype == dt and torch.equal(got, exact(a, b, dt))
            ok[f"bmm_{dt}_cpu"] = torch.allclose(got.float(), (a.float() @ b.float()),
                                                 rtol=1e-2, atol=1e-2)
        a = torch.randn(2, 1, 3, 5)
        b = torch.randn(4, 5, 6)
        ok["broadcast"] = torch.allclose((a.npu() @ b.npu()).cpu(), a @ b, atol=1e-5)
        v = torch.randn(5)
        ok["vec_mat"] = torch.allclose((v.npu() @ b.npu()).cpu(), v @ b, atol=1e-5)
        w = torch.randn(6)
        ok["mat_vec"] = torch.allclose((b.npu() @ w.npu()).cpu(), b @ w, atol=1e-5)
        ok["dot"] = torch.allclose((v.npu() @ v.npu()).cpu(), v @ v, atol=1e-5)
        x = torch.randn(3, 8, 4).half()
        ok["transposed"] = torch.equal((x.npu() @ x.npu().transpose(1, 2)).cpu(),
                                       exact(x, x.transpose(1, 2), torch.float16))
        try:
            torch.ones(2, 3, 4).npu() @ torch.ones(2, 5, 4).npu()
            ok["k_mismatch_refused"] = False
        except RuntimeError:
            ok["k_mismatch_refused"] = True
        sa, sb = torch.zeros(2, 3, 4).npu(), torch.zeros(2, 4, 5).npu()
        g = torch_npu.npu.NPUGraph()
        st = torch_npu.npu.Stream()
        with torch_npu.npu.stream(st):
            sa @ sb
            with torch_npu.npu.graph(g):
                res = sa @ sb
        torch_npu.npu.synchronize()
        va, vb = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
        sa.copy_(va.npu())
        sb.copy_(vb.npu())
        g.replay()
        torch_npu.npu.synchronize()
        ok["captured_replay"] = torch.allclose(res.cpu(), va @ vb, atol=1e-5)
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 13
