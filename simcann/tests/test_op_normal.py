"""Simulated aclnnInplaceNormal (src/ops/nn.cpp): torch.randn / normal_ on the device.

The numbers are not the hardware's (Philox there, splitmix64 here); what holds on both: the
generator's seed gives reproducible draws, successive draws differ, the moments are right.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_randn_is_seeded_normal(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        torch.npu.manual_seed(123)
        a = torch.randn(20000, device="npu").cpu()
        b = torch.randn(20000, device="npu").cpu()
        torch.npu.manual_seed(123)
        a2 = torch.randn(20000, device="npu").cpu()
        c = torch.empty(20000, device="npu").normal_(3.0, 0.5).cpu()
        result = {
            "same_seed": torch.equal(a, a2), "next_differs": not torch.equal(a, b),
            "mean": abs(a.mean().item()) < 0.05, "std": abs(a.std().item() - 1) < 0.05,
            "mean_3": abs(c.mean().item() - 3) < 0.05, "std_half": abs(c.std().item() - .5) < .05,
        }
        """
    )
    assert r.result == dict.fromkeys(r.result, True) and len(r.result) == 6, r.result
