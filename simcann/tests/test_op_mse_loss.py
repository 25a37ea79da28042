"""Simulated aclnnMseLoss / aclnnMseLossBackward (src/ops/nn.cpp), every reduction."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_mse_loss_and_backward_match_cpu(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        import torch.nn.functional as F
        torch.manual_seed(0)
        x, t = torch.randn(4, 3), torch.randn(4, 3)
        ok = {}
        for red in ("mean", "sum", "none"):
            xd = x.npu().requires_grad_()
            xc = x.clone().requires_grad_()
            ld, lc = F.mse_loss(xd, t.npu(), reduction=red), F.mse_loss(xc, t, reduction=red)
            ok[red] = torch.allclose(ld.cpu(), lc, 1e-5, 1e-6)
            (ld.sum() if red == "none" else ld).backward()
            (lc.sum() if red == "none" else lc).backward()
            ok[red + "_grad"] = torch.allclose(xd.grad.cpu(), xc.grad, 1e-5, 1e-6)
        result = ok
        """
    )
    assert r.result and all(r.result.values()), r.result
    assert len(r.result) == 6
