"""Simulated aclnnForeachCopy and aclnnForeachAddListV2 (src/ops/nn.cpp): TorchAir's input copy
(``_foreach_copy_``) and SGD's multi-tensor step (``_foreach_add_``), eager and captured.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_foreach_copy_and_add(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        dst = [torch.zeros(5, device="npu"), torch.zeros(2, 3, device="npu")]
        src = [torch.arange(5.0).npu(), torch.arange(6.0).reshape(2, 3).t().npu().t()]
        ok = {}
        torch._foreach_copy_(dst, src, non_blocking=True)
        ok["copy"] = all(torch.equal(d.cpu(), s.cpu()) for d, s in zip(dst, src))
        torch._foreach_add_(dst, src, alpha=-0.5)
        ok["add"] = all(torch.equal(d.cpu(), s.cpu() * 0.5) for d, s in zip(dst, src))
        stream = torch.npu.Stream(); torch.npu.set_stream(stream)
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            torch._foreach_copy_(dst, src, non_blocking=True)
        src[0].fill_(7.0)
        g.replay(); torch.npu.synchronize()
        ok["replay"] = dst[0].cpu().tolist() == [7.0] * 5
        result = ok
        """
    )
    assert r.result == {"copy": True, "add": True, "replay": True}
