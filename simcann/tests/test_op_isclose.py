"""Simulated aclnnIsClose / aclnnIsFinite (src/ops/compare.cpp): torch.isclose, torch.allclose,
torch.isfinite, torch.testing.assert_close on the device, against torch's CPU result.

Semantics modelled (hicann/ops-math math/is_close, math/is_finite): |a - b| <= atol + rtol * |b|
with finite difference, non-finite values close only when equal, NaNs close only with
equal_nan; self and other of one dtype; broadcasting; out BOOL.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.simulator


def test_isclose_matches_cpu(run_isolated):
    r = run_isolated(
        """
        import math, torch, torch_npu
        nan, inf = math.nan, math.inf
        a = torch.tensor([[1.0, 1.00001, 1.1, nan, nan, inf, -inf, inf, 0.0, 1e-9]])
        b = torch.tensor([[1.0, 1.0, 1.0, nan, 1.0, inf, inf, 1.0, 1e-9, 0.0]])
        ok = {}
        for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            x, y = a.to(dt), b.to(dt)
            for kw in ({}, {"equal_nan": True}, {"rtol": 0.2, "atol": 0.0}, {"rtol": 0, "atol": 0}):
                got = torch.isclose(x.npu(), y.npu(), **kw).cpu()
                ok[f"{dt}{kw}"] = torch.equal(got, torch.isclose(x, y, **kw))
        # Broadcasting (a column against a row) and a strided view.
        c = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        col = torch.tensor([[0.0], [5.0], [8.0001]])
        ok["broadcast"] = torch.equal(torch.isclose(c.npu(), col.npu(), atol=1e-3).cpu(),
                                      torch.isclose(c, col, atol=1e-3))
        ok["strided"] = torch.equal(torch.isclose(c.npu().t(), c.t().contiguous().npu()).cpu(),
                                    torch.ones(4, 3, dtype=torch.bool))
        i = torch.tensor([1, 5, -3, 100]); j = torch.tensor([1, 6, -3, 104])
        ok["int"] = torch.equal(torch.isclose(i.npu(), j.npu(), rtol=0.05, atol=0).cpu(),
                                torch.isclose(i, j, rtol=0.05, atol=0))
        d = c * (1 + 1e-6)
        ok["allclose_true"] = torch.allclose(c.npu(), d.npu()) is True and torch.allclose(c, d)
        ok["allclose_false"] = torch.allclose(c.npu(), (c + 1).npu()) is False
        try:
            torch.isclose(c.npu(), c.double().npu())
            ok["dtype_mismatch_refused"] = False
        except RuntimeError:
            ok["dtype_mismatch_refused"] = True
        result = ok
        """
    )
    assert r.result and all(r.result.values()), {k: v for k, v in r.result.items() if not v}
    assert len(r.result) == 22


def test_isfinite_and_assert_close(run_isolated):
    r = run_isolated(
        """
        import math, torch, torch_npu
        x = torch.tensor([0.0, -1.5, math.inf, -math.inf, math.nan, 65504.0])
        ok = {}
        for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            y = x.to(dt)
            ok[str(dt)] = torch.equal(torch.isfinite(y.npu()).cpu(), torch.isfinite(y))
        ok["int_all_true"] = torch.equal(torch.isfinite(torch.arange(4).npu()).cpu(),
                                          torch.ones(4, dtype=torch.bool))
        a = torch.randn(5, 7)
        torch.testing.assert_close(a.npu(), a.clone().npu())
        torch.testing.assert_close(x.npu(), x.clone().npu(), equal_nan=True)
        try:
            b = a.clone(); b[2, 3] += 1
            torch.testing.assert_close(a.npu(), b.npu())
            ok["mismatch_raises"] = False
        except AssertionError as e:
            ok["mismatch_raises"] = "Mismatched elements: 1 / 35" in str(e) and "(2, 3)" in str(e)
        result = ok
        """
    )
    assert r.result and all(r.result.values()), r.result
    assert len(r.result) == 6
