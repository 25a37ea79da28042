"""Helpers the failure-path scenarios share (not a scenario): a clean capture still works after
a failure, and the message of a call's exception."""

import gc
from typing import Callable, Optional

import torch

from _lib.scenario import N, pinned, pools, values


def graph_of_freed_input(dev: torch.Tensor, value: float) -> torch.npu.NPUGraph:
    """A graph that copies a pinned tensor of ``value`` into ``dev``, the tensor freed inside the
    capture: only the graph keeps its block."""
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        x = pinned(value)
        dev.copy_(x, non_blocking=True)
        del x
    return g


def clean_capture_works(value: float) -> bool:
    """A capture + replay after a failure reads its bytes, and its pool goes with the graph."""
    dev = torch.zeros(N, device="npu")
    g = graph_of_freed_input(dev, value)
    others = [pinned(-1.0) for _ in range(4)]  # noqa: F841
    g.replay()
    torch.npu.synchronize()
    ok = values(dev) == [float(value)]
    del g
    gc.collect()
    torch.npu.synchronize()  # the pool's retirement waits for its replays
    return ok and pools() == []


def error_of(fn: Callable[[], object]) -> Optional[str]:
    try:
        fn()
    except Exception as e:
        return str(e)
    return None
