"""Simulated aclnnLogicalNot / aclnnInplaceLogicalNot (src/ops/aclnn_ops.cpp, elementwise.cpp):
torch_npu 2.13 captures the false branch of ``torch.cond`` as an IF node on
``torch.logical_not(pred)``."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_logical_not_matches_cpu(run_isolated):
    r = run_isolated(
        """
        import torch, torch_npu
        ok = {}
        cases = {
            "bool": torch.tensor([True, False, True]),
            "float": torch.tensor([0.0, -0.0, 1.5, float("nan"), -2.0]),
            "half": torch.tensor([0.0, 3.0], dtype=torch.float16),
            "int64": torch.tensor([0, 1 << 40, -1]),
            "uint8": torch.tensor([0, 255], dtype=torch.uint8),
            "strided": torch.tensor([[0.0, 1.0], [2.0, 0.0]]).t(),
            "scalar": torch.tensor(False),
        }
        for name, x in cases.items():
            ok[name] = torch.equal(torch.logical_not(x.npu()).cpu(), torch.logical_not(x))
        y = torch.tensor([0, 2, 0], dtype=torch.int32).npu()
        y.logical_not_()
        ok["inplace"] = y.cpu().tolist()
        out = torch.empty(3, dtype=torch.float32).npu()
        torch.logical_not(torch.tensor([0.0, 1.0, 0.0]).npu(), out=out)
        ok["out_float"] = out.cpu().tolist()
        result = ok
        """
    )
    o = r.result
    assert o == {
        "bool": True,
        "float": True,
        "half": True,
        "int64": True,
        "uint8": True,
        "strided": True,
        "scalar": True,
        "inplace": [1, 0, 1],
        "out_float": [1.0, 0.0, 1.0],
    }
