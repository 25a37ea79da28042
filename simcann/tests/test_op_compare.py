"""Simulated aclnnEq/Ne/Lt/Le/Gt/Ge Tensor and Scalar ops, aclnnEqual,
aclnnBitwiseAndTensor / aclnnBitwiseOrTensor / aclnnInplaceMaskedFill* (src/ops/compare.cpp):
==, !=, <, <=, >, >=, torch.equal, &, |, masked_fill_ on the device against torch's CPU result.

Modelled (hicann/ops-math math/equal, not_equal, tensor_equal): both sides cast to the promoted
type first; NaN unequal to everything; broadcasting; torch.equal false for other shapes.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_eq_ne_match_cpu(run_isolated):
    r = run_isolated(
        """
        import math, torch, torch_npu
        a = torch.tensor([[0.0, 1.0, math.nan, -0.0, 16777217.0, 2.5]])
        b = torch.tensor([[0.0, 2.0, math.nan, 0.0, 16777216.0, 2.5]])
        ok = {}
        for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            x, y = a.to(dt), b.to(dt)
            ok[f"eq{dt}"] = torch.equal((x.npu() == y.npu()).cpu(), x == y)
            ok[f"ne{dt}"] = torch.equal((x.npu() != y.npu()).cpu(), x != y)
        # Mixed dtypes promote: int64 16777217 vs float32 16777216 compare equal in float32.
        i = torch.tensor([[16777217, 1, 3]]); f = torch.tensor([[16777216.0, 1.0, 3.5]])
        ok["promote_int_float"] = torch.equal((i.npu() == f.npu()).cpu(), i == f)
        u = torch.tensor([255, 0], dtype=torch.uint8); s = torch.tensor([-1, 0], dtype=torch.int8)
        ok["promote_uint8_int8"] = torch.equal((u.npu() != s.npu()).cpu(), u != s)
        col = torch.arange(3).reshape(3, 1); row = torch.arange(4)
        ok["broadcast"] = torch.equal((col.npu() == row.npu()).cpu(), col == row)
        ok["scalar_eq"] = torch.equal((a.npu() == 2.5).cpu(), a == 2.5)
        ok["scalar_ne"] = torch.equal((i.npu() != 1).cpu(), i != 1)
        ok["scalar_int_float"] = torch.equal((i.npu() == 3.5).cpu(), i == 3.5)
        t = torch.tensor([1.0, 2.0, 3.0]).npu(); t.eq_(torch.tensor([1.0, 0.0, 3.0]).npu())
        ok["inplace_eq"] = torch.equal(t.cpu(), torch.tensor([1.0, 0.0, 1.0]))
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 15


def test_equal_bitwise_masked_fill_match_cpu(run_isolated):
    r = run_isolated(
        """
        import math, torch, torch_npu
        x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        ok = {}
        ok["equal_same"] = torch.equal(x.npu(), x.clone().npu()) is True
        y = x.clone(); y[2, 3] = -1
        ok["equal_one_differs"] = torch.equal(x.npu(), y.npu()) is False
        ok["equal_shape_differs"] = torch.equal(x.npu(), x.reshape(4, 3).npu()) is False
        n = torch.tensor([math.nan])
        ok["equal_nan"] = torch.equal(n.npu(), n.clone().npu()) is False
        ok["equal_strided"] = torch.equal(x.npu().t(), x.t().contiguous().npu()) is True
        ok["equal_promoted"] = torch.equal(x.npu(), x.double().npu()) == torch.equal(x, x.double())
        m1 = torch.tensor([True, False, True, False]); m2 = torch.tensor([True, True, False, False])
        ok["and"] = torch.equal((m1.npu() & m2.npu()).cpu(), m1 & m2)
        ok["or"] = torch.equal((m1.npu() | m2.npu()).cpu(), m1 | m2)
        i = torch.tensor([12, -3, 7], dtype=torch.int32)
        j = torch.tensor([10, 5, -1], dtype=torch.int32)
        ok["and_int"] = torch.equal((i.npu() & j.npu()).cpu(), i & j)
        mask = torch.tensor([[True], [False], [True]])
        ok["masked_fill_scalar"] = torch.equal(x.npu().masked_fill(mask.npu(), 0.5).cpu(),
                                               x.masked_fill(mask, 0.5))
        v = torch.tensor(-2.0)
        ok["masked_fill_tensor"] = torch.equal(x.npu().masked_fill(mask.npu(), v.npu()).cpu(),
                                               x.masked_fill(mask, v))
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 11


def test_orderings_match_cpu(run_isolated):
    r = run_isolated(
        """
        import math, torch, torch_npu
        a = torch.tensor([[1.0, math.nan, 3.0, -2.0, 0.0]])
        b = torch.tensor([[2.0, 1.0, 3.0, -5.0, -0.0]])
        i = torch.tensor([[3, -1, 7, 0, 2]], dtype=torch.int32)
        ok = {}
        for op in ("lt", "le", "gt", "ge"):
            ok[op] = torch.equal(getattr(a.npu(), op)(b.npu()).cpu(), getattr(a, op)(b))
            ok[op + "_scalar"] = torch.equal(getattr(a.npu(), op)(1.5).cpu(), getattr(a, op)(1.5))
            ok[op + "_mixed"] = torch.equal(getattr(i.npu(), op)(a.npu()).cpu(), getattr(i, op)(a))
            ok[op + "_broadcast"] = torch.equal(getattr(a.t().npu(), op)(b.npu()).cpu(),
                                                getattr(a.t(), op)(b))
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 16


def test_masked_select_and_printing(run_isolated):
    """aclnnMaskedSelect (the out shape known only after the kernel: aclGetViewShape) and what
    printing a device tensor needs (masked select, abs, min, max, ceil, ne, and)."""
    r = run_isolated(
        """
        import math, torch, torch_npu
        a = torch.arange(12.0).reshape(3, 4)
        m = torch.tensor([True, False, True, True])
        ok = {}
        ok["row_mask"] = torch.equal(torch.masked_select(a.npu(), m.npu()).cpu(),
                                     torch.masked_select(a, m))
        ok["none"] = torch.equal(torch.masked_select(a.npu(), (a > 20).npu()).cpu(),
                                 torch.masked_select(a, a > 20))
        i = torch.tensor([[5, -3], [0, 7]], dtype=torch.int16)
        ok["int"] = torch.equal(torch.masked_select(i.npu(), (i > 0).npu()).cpu(),
                                torch.masked_select(i, i > 0))
        for t in (torch.tensor([1.5, -2.0, 3.25, math.nan]), torch.tensor([1e9, 1.0]),
                  torch.arange(6).reshape(2, 3), torch.tensor([0.1, 2.0]).half()):
            ok[repr(t)] = repr(t.npu()).replace(", device='npu:0'", "") == repr(t)
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 7
