"""Simulated aclnnSoftmax (src/ops/softmax.cpp) against torch's CPU softmax, with CANN's rules
(hicann/ops-nn activation/softmax_v2/op_api/aclnn_softmax.cpp): float32 / float16 / bfloat16 /
float64, any dim (negative too), strided input, half_to_float (float16 self, float32 out: computed
in float16 then cast), NaN / inf slices, a 0-d tensor, a refused dtype, and a captured softmax
reading its input again at every replay. torch.softmax is what TorchAir's smoke test
(tests/smoke/aclgraph_test.py, test_aclgraph_scope_with_post_pass) reaches after sqrt.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_softmax_matches_cpu(run_isolated):
    r = run_isolated(
        """
        import math, torch, torch_npu
        ok = {}
        x = torch.randn(3, 5, 7) * 4
        for dt, tol in ((torch.float32, 1e-6), (torch.float64, 1e-12), (torch.float16, 1e-3),
                        (torch.bfloat16, 8e-3)):
            for dim in (0, 1, 2, -1):
                a = x.to(dt)
                got = torch.softmax(a.npu(), dim=dim).cpu()
                want = torch.softmax(a.double(), dim=dim).to(dt)
                ok[f"{dt}_dim{dim}"] = got.dtype == dt and torch.allclose(
                    got.double(), want.double(), rtol=tol, atol=tol)
        ok["strided"] = torch.allclose(torch.softmax(x.npu().transpose(0, 2), dim=1).cpu(),
                                       torch.softmax(x.transpose(0, 2), dim=1), atol=1e-6)
        h = x.half()
        f = torch._softmax(h.npu(), 1, True).cpu()  # half_to_float: float32 out
        ok["half_to_float"] = f.dtype == torch.float32 and torch.allclose(
            f, torch.softmax(h.double(), 1).half().float(), atol=1e-3)
        s = torch.tensor([[1.0, math.nan, 2.0], [1.0, math.inf, 2.0], [-math.inf] * 3,
                          [0.0, -math.inf, 0.0]])
        got = torch.softmax(s.npu(), dim=1).cpu()
        ok["nan_inf_rows"] = torch.equal(torch.isnan(got), torch.isnan(torch.softmax(s, dim=1)))
        ok["neg_inf_is_zero"] = torch.equal(got[3], torch.tensor([0.5, 0.0, 0.5]))
        ok["scalar"] = torch.softmax(torch.tensor(3.0).npu(), dim=0).item() == 1.0
        try:
            torch.softmax(torch.ones(2, 3, dtype=torch.int32).npu(), dim=1)
            ok["int_refused"] = False
        except RuntimeError as e:
            ok["int_refused"] = "aclnnSoftmax" in str(e) or "softmax" in str(e).lower()
        src = torch.zeros(4, 6).npu()
        g = torch_npu.npu.NPUGraph()
        st = torch_npu.npu.Stream()
        with torch_npu.npu.stream(st):
            torch.softmax(src, dim=1)
            with torch_npu.npu.graph(g):
                res = torch.softmax(src, dim=1)
        torch_npu.npu.synchronize()
        vals = torch.randn(4, 6)
        src.copy_(vals.npu())
        g.replay()
        torch_npu.npu.synchronize()
        ok["captured_replay"] = torch.allclose(res.cpu(), torch.softmax(vals, dim=1), atol=1e-6)
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 23
