"""``torch.accelerator.Graph`` (torch >= 2.13), the device-generic capture entry point: it
reaches torch_npu's NPUGraph through ATen's graph interface, not through the Python
``NPUGraph`` class the plugin hooks (issue #35). Owned by test/pinpool/test_capture_replay.py.

Two graphs share one pool: the first pins its input inside the capture and frees it there, the
second reads a tensor pinned before its capture and freed inside it (the shape torch_npu alone
recycles on every release: docs/problem.md, defect 3). Other pinned tensors are written, both
graphs replay, then both are reset (or, GRAPH_END=gc, dropped) and host_empty_cache() runs.

Reports ``available`` (False on torch < 2.13: nothing else), ``first`` / ``second`` (the values
each replay wrote; right: [1.0] / [2.0]), ``same_pool``, ``held_after`` (pinned bytes held
above the baseline at the end, host_memory_stats()) and ``pools`` (the plugin's graph pools left;
0 with it off).
"""

from __future__ import annotations

import gc
import os

import torch
from _lib.scenario import (
    PLUGIN,
    N,
    accelerator_graph_available,
    held_bytes,
    pools,
    report,
    side_stream,
    values,
)

import torch_npu_pinpool

END = os.environ.get("GRAPH_END", "reset")
out: dict = {"available": accelerator_graph_available()}
if out["available"]:
    stream = side_stream()
    dev1 = torch.zeros(N, device="npu")
    dev2 = torch.zeros(N, device="npu")
    torch.npu.synchronize()
    torch_npu_pinpool.host_empty_cache()
    baseline = held_bytes()

    g1 = torch.accelerator.Graph()
    with g1:
        x = torch.full((N,), 1.0).pin_memory()  # pinned and freed inside the capture
        dev1.copy_(x, non_blocking=True)
        del x
    early = torch.full((N,), 2.0).pin_memory()
    g2 = torch.accelerator.Graph(pool=g1.pool())
    with g2:
        dev2.copy_(early, non_blocking=True)
        del early  # pinned before the capture, freed inside it
    out["same_pool"] = tuple(g2.pool()) == tuple(g1.pool())
    others = [torch.full((N,), 9.0).pin_memory() for _ in range(8)]
    g1.replay()
    g2.replay()
    torch.npu.synchronize()
    out["first"], out["second"] = values(dev1), values(dev2)
    del others
    if END == "reset":
        g1.reset()
        g2.reset()
    del g1, g2
    gc.collect()
    torch.npu.synchronize()
    torch_npu_pinpool.host_empty_cache()
    out["held_after"] = held_bytes() - baseline
    out["pools"] = len(pools()) if PLUGIN else 0
report(out)
