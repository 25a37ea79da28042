"""Simulated aclnnMm / aclnnMatmul / aclnnAddmm (src/ops/nn.cpp): Linear forward and backward.

Eager results match the CPU reference (float32, strided operands: the transposed weight), and a
captured addmm reads its inputs as they are at each replay.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_mm_addmm_matmul_match_cpu_and_replay(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        torch.manual_seed(0)
        a, b, bias = torch.randn(5, 7), torch.randn(7, 3), torch.randn(3)
        da, db, dbias = a.npu(), b.npu(), bias.npu()
        ok = {}
        ok["mm"] = torch.allclose(torch.mm(da, db).cpu(), a @ b, rtol=1e-5, atol=1e-5)
        ok["mm_t"] = torch.allclose(torch.mm(db.t(), da.t()).cpu(), b.t() @ a.t(), 1e-5, 1e-5)
        ok["matmul"] = torch.allclose((da @ db).cpu(), a @ b, rtol=1e-5, atol=1e-5)
        want = torch.addmm(bias, a, b, beta=0.5, alpha=2.0)
        got = torch.addmm(dbias, da, db, beta=0.5, alpha=2.0).cpu()
        ok["addmm"] = torch.allclose(got, want, rtol=1e-5, atol=1e-5)
        w = torch.randn(3, 7)
        ok["linear"] = torch.allclose(
            torch.nn.functional.linear(da, w.npu(), dbias).cpu(), a @ w.t() + bias, 1e-5, 1e-5)
        s = torch.npu.Stream(); torch.npu.set_stream(s)
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            out = torch.addmm(dbias, da, db)
        da.copy_((a * 2).npu())
        g.replay(); torch.npu.synchronize()
        ok["replay"] = torch.allclose(out.cpu(), torch.addmm(bias, a * 2, b), 1e-5, 1e-5)
        result = ok
        """
    )
    assert r.result == dict.fromkeys(("mm", "mm_t", "matmul", "addmm", "linear", "replay"), True)


def test_non_float32_fails_loudly(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        try:
            torch.mm(torch.ones(2, 2, dtype=torch.float16).npu(), torch.ones(2, 2).half().npu())
            torch.npu.synchronize()
            result = "no error"
        except RuntimeError as e:
            result = str(e)
        """
    )
    assert "float32 only" in r.result
