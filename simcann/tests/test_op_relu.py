"""Simulated aclnnRelu / aclnnInplaceRelu / aclnnThresholdBackward (src/ops/nn.cpp)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_relu_and_its_backward_match_cpu(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        x = torch.tensor([[-2.0, -0.0, 0.0, 1.5], [3.0, -1.0, 0.25, -7.0]])
        g = torch.arange(8, dtype=torch.float32).reshape(2, 4) + 1
        ok = {}
        ok["relu"] = torch.equal(torch.relu(x.npu()).cpu(), torch.relu(x))
        y = x.npu(); y.relu_()
        ok["relu_"] = torch.equal(y.cpu(), torch.relu(x))
        xt = x.t().npu()  # strided view below
        ok["strided"] = torch.equal(torch.relu(x.npu().t()).cpu(), torch.relu(x.t()))
        xd = x.npu().requires_grad_()
        torch.relu(xd).backward(g.npu())
        xc = x.clone().requires_grad_()
        torch.relu(xc).backward(g)
        ok["backward"] = torch.equal(xd.grad.cpu(), xc.grad)
        ok["threshold_backward"] = torch.equal(
            torch.ops.aten.threshold_backward(g.npu(), x.npu(), 1.0).cpu(),
            torch.ops.aten.threshold_backward(g, x, 1.0))
        result = ok
        """
    )
    assert r.result == {
        "relu": True,
        "relu_": True,
        "strided": True,
        "backward": True,
        "threshold_backward": True,
    }
