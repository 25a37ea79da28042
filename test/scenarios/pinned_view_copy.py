"""Scenario: a copy between a pinned *view* and the NPU, eager and inside graph capture.

The base is a pinned (4, 256) float32 tensor; the view (VIEW_KIND) is one of
  strided     base[:, ::2]              non-contiguous (torch_npu stages it through pageable memory)
  transposed  base[:, :4].t()           non-contiguous, (4, 4)
  broadcast   base[1:2, ::2] expanded   H2D only: a (1, 128) source broadcast to (4, 128)
  offset      base[1:3]                 contiguous, at an offset into its block
  negview     torch._neg_view(base)[:, ::2]   H2D only: non-contiguous, with the negative bit
COPY_DIR: h2d (dev.copy_(view, non_blocking=True)) or d2h (view.copy_(dev, non_blocking=True)).
VIEW_BASE=before_activation: the base is pinned by torch_npu before the plugin is imported.

Reports the eager copy's result (before any capture), the capture's error (or None), whether the
capture ran the copy at capture time, then for each of three replays whether the copy moved the
bytes as they were *at that replay* (the base rewritten before each, or the device source
refilled) and, for d2h, whether the base's elements outside the view stayed untouched; then
whether the graph resets, the plugin's capture registrations afterwards, whether eager NPU work
still runs, and the pinned bytes held after reset + host_empty_cache() beside the baseline.
"""

import os

import torch
import torch_npu  # noqa: F401

SENTINEL = -5.0
# VIEW_BASE=before_activation: the base is pinned by torch_npu before the plugin activates.
early_base = None
if os.environ.get("VIEW_BASE") == "before_activation":
    early_base = torch.full((4, 256), SENTINEL).pin_memory()
from _lib.scenario import held_bytes, report, reset_after_failed_capture, side_stream  # noqa: E402

import torch_npu_pinpool  # noqa: E402

KIND = os.environ.get("VIEW_KIND", "strided")
DIRECTION = os.environ.get("COPY_DIR", "h2d")


def view_of(base: torch.Tensor) -> torch.Tensor:
    if KIND == "strided":
        return base[:, ::2]
    if KIND == "transposed":
        return base[:, :4].t()
    if KIND == "broadcast":
        return base[1:2, ::2]
    if KIND == "offset":
        return base[1:3]
    if KIND == "negview":
        return torch._neg_view(base)[:, ::2]
    raise ValueError(KIND)


def pattern(k: int, like: torch.Tensor) -> torch.Tensor:
    """Distinct values per element and per round k."""
    return torch.arange(like.numel(), dtype=torch.float32).reshape(like.shape) + 1000.0 * k


side_stream()
torch_npu_pinpool.host_empty_cache()
baseline = held_bytes()
base = torch.full((4, 256), SENTINEL).pin_memory() if early_base is None else early_base
del early_base
view = view_of(base)
shape = (4, 128) if KIND == "broadcast" else tuple(view.shape)
dev = torch.zeros(shape, device="npu")
out: dict = {"error": None}


def expected_h2d() -> torch.Tensor:
    return view.expand(shape).clone()


def write_round(k: int) -> None:
    """Round k's inputs: the host base (h2d) or the device source (d2h)."""
    if DIRECTION == "h2d":
        base.copy_(pattern(k, base))
    else:
        base.fill_(SENTINEL)
        dev.copy_(pattern(k, dev).npu())


def check_round(k: int) -> dict:
    if DIRECTION == "h2d":
        return {"moved": bool(torch.equal(dev.cpu(), expected_h2d()))}
    outside = base.clone()
    outside_view = view_of(outside)
    outside_view.fill_(SENTINEL)
    return {
        "moved": bool(torch.equal(view, pattern(k, dev))),
        "outside_untouched": bool(outside.eq(SENTINEL).all()),
    }


def copy() -> None:
    if DIRECTION == "h2d":
        dev.copy_(view, non_blocking=True)
    else:
        view.copy_(dev, non_blocking=True)


# Eager, no capture: the copy works as torch_npu makes it work (plugin on and off alike). Not
# for negview: torch_npu applies the bit with aclnnNeg, which the simulated runtime lacks.
if KIND != "negview":
    write_round(0)
    copy()
    torch.npu.synchronize()
    out["eager"] = check_round(0)

# Captured.
write_round(1)
snapshot = (base.clone(), dev.cpu())
g = torch.npu.NPUGraph()
try:
    with torch.npu.graph(g):
        copy()
except RuntimeError as e:
    out["error"] = str(e)
if out["error"] is None:
    torch.npu.synchronize()
    out["ran_at_capture"] = not (
        torch.equal(base, snapshot[0]) and torch.equal(dev.cpu(), snapshot[1])
    )
    out["replays"] = []
    for k in (2, 3, 4):
        write_round(k)
        g.replay()
        torch.npu.synchronize()
        out["replays"].append(check_round(k))
reset_after_failed_capture(out, g)
del g
# After torch_npu's own error its task queue may run nothing more: go on only without one.
if out["error"] is None or "torch_npu_pinpool" in out["error"]:
    dev.fill_(2.0)
    out["eager_after"] = sorted(set(dev.cpu().flatten().tolist()))
    del view, base
    torch.npu.synchronize()
    torch_npu_pinpool.host_empty_cache()
    out["baseline"], out["held_after"] = baseline, held_bytes()
report(out)
