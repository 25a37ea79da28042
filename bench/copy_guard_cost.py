"""Eager cost of the pageable copy guard (csrc/pageable_copy_guard.cpp): microseconds per copy_
call for pinned H2D / D2H (non_blocking) and D2D copies, best of REPEATS runs of ITERS calls.

    python bench/copy_guard_cost.py                                  # plugin + guard
    TORCH_NPU_PINPOOL_COPY_GUARD=0 python bench/copy_guard_cost.py   # plugin, no guard
    TORCH_NPU_PINPOOL=0 python bench/copy_guard_cost.py              # torch_npu alone

Best-of: the minimum is what the code costs; everything above it is other load on the machine.
"""

from __future__ import annotations

import json
import os
import time
from typing import Callable

import torch
import torch_npu  # noqa: F401

import torch_npu_pinpool  # noqa: F401

ITERS = int(os.environ.get("ITERS", "300"))
REPEATS = int(os.environ.get("REPEATS", "40"))
ELEMS = int(os.environ.get("ELEMS", "256"))


def best_us(fn: Callable[[], object]) -> float:
    for _ in range(100):
        fn()
    torch.npu.synchronize()
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(ITERS):
            fn()
        torch.npu.synchronize()
        best = min(best, (time.perf_counter() - start) / ITERS)
    return round(best * 1e6, 3)


def main() -> None:
    torch.npu.set_device(0)
    torch.npu.set_stream(torch.npu.Stream())
    dev = torch.zeros(ELEMS, device="npu")
    dev2 = torch.zeros(ELEMS, device="npu")
    src = torch.ones(ELEMS).pin_memory()
    dst = torch.zeros(ELEMS).pin_memory()
    result = {
        "h2d_non_blocking_us": best_us(lambda: dev.copy_(src, non_blocking=True)),
        "d2h_non_blocking_us": best_us(lambda: dst.copy_(dev, non_blocking=True)),
        "d2d_us": best_us(lambda: dev.copy_(dev2)),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
