"""Simulated aclnnReduceSum (src/ops/nn.cpp): sum over dims, the bias gradient of Linear."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_sum_over_dims_matches_cpu(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        torch.manual_seed(0)
        x = torch.randn(4, 5, 3)
        d = x.npu()
        ok = {}
        for dims, keep in [((0,), False), ((1,), True), ((0, 2), False), ((-1,), False)]:
            got = d.sum(dim=dims, keepdim=keep).cpu()
            ok[f"{dims}{keep}"] = torch.allclose(got, x.sum(dim=dims, keepdim=keep), 1e-5, 1e-5)
        ok["all"] = torch.allclose(d.sum().cpu(), x.sum(), 1e-5, 1e-5)
        ok["strided"] = torch.allclose(d.transpose(0, 2).sum(0).cpu(), x.transpose(0, 2).sum(0))
        result = ok
        """
    )
    assert r.result and all(r.result.values()), r.result
    assert len(r.result) == 6
