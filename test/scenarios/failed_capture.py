"""A capture that fails after pinned blocks were used and freed in it (issue #35), then the
graph ended and the same pool handle captured into again. Owns the failed-capture shapes of
test/pinpool/test_failed_capture.py.

FAIL_HOW picks the failure (user errors the runtime refuses):
  device_sync  torch.npu.synchronize() inside the capture (107027; the capture goes on, so
               capture_end succeeds and the ``with`` block raises the sync's error)
  stream_sync  the capturing stream's synchronize() inside the capture (107027, likewise)
  unjoined     a side stream joins the capture and is never joined back: capture_end fails
               (107025) and the runtime destroys the model
FAIL_END: ``reset`` (graph.reset()) or ``gc`` (the graph dropped and collected).
FAIL_API: ``npu_graph`` (``torch.npu.graph(NPUGraph(), pool=handle)``) or ``accelerator``
(``torch.accelerator.Graph(pool=handle)``, torch >= 2.13: it reaches torch_npu's graph through
ATen, not through the Python NPUGraph class).
FAIL_POOL: ``handle`` (both captures into one ``torch.npu.graph_pool_handle()``) or ``none``
(each capture into a pool of its own, as ``torch.npu.graph(g)`` without ``pool=``).

Reports (``available``: False when torch has no torch.accelerator.Graph, and nothing else), as
plugin-independent figures (torch_npu_pinpool.host_memory_stats(), bytes replayed):
``error`` (the failure, shortened), ``first`` (the failed graph's replay: values or error),
``held_after`` (pinned bytes held above the baseline once the failed graph is gone and
host_empty_cache() ran), ``second`` / ``second_error`` (a later capture into the same pool
handle, or a pool of its own with FAIL_POOL=none, replayed after other pinned tensors were
written), ``held_end`` (above the baseline once everything is gone), ``pools`` (the plugin's
graph pools left; 0 with it off) and the audit report's entries (TORCH_NPU_PINPOOL_REPORT set).
"""

from __future__ import annotations

import os

import torch
from _lib.scenario import (
    PLUGIN,
    N,
    accelerator_graph_available,
    capture_pinned_copy,
    hazards,
    held_bytes,
    pinned,
    pools,
    replay_over_others,
    report,
    settled_held,
    side_stream,
    site,
    values,
)

import torch_npu_pinpool

HOW = os.environ.get("FAIL_HOW", "device_sync")
END = os.environ.get("FAIL_END", "reset")
API = os.environ.get("FAIL_API", "npu_graph")
POOL = os.environ.get("FAIL_POOL", "handle")
if (
    HOW not in ("device_sync", "stream_sync", "unjoined")
    or END not in ("reset", "gc")
    or API not in ("npu_graph", "accelerator")
    or POOL not in ("handle", "none")
):
    raise SystemExit(f"FAIL_HOW={HOW!r} END={END!r} API={API!r} POOL={POOL!r}: see the docstring")


def new_graph(handle: tuple | None) -> tuple:
    """A graph and the context manager that captures into it, in pool ``handle``."""
    if API == "accelerator":
        g = torch.accelerator.Graph(pool=handle)
        return g, g
    g = torch.npu.NPUGraph()
    return g, torch.npu.graph(g, pool=handle)


def fail(dev: torch.Tensor) -> None:
    """The user error inside the capture."""
    if HOW == "device_sync":
        torch.npu.synchronize()
    elif HOW == "stream_sync":
        torch.npu.current_stream().synchronize()
    else:
        side = torch.npu.Stream()
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            dev.mul_(1.0)  # never joined back to the capturing stream


if API == "accelerator" and not accelerator_graph_available():
    report({"available": False})
    raise SystemExit(0)
side_stream()
dev = torch.zeros(N, device="npu")
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
baseline = held_bytes()
out: dict = {"available": True, "how": HOW, "end": END, "api": API, "pool": POOL}
handle = torch.npu.graph_pool_handle() if POOL == "handle" else None

g, capturing = new_graph(handle)
try:
    with capturing:
        x = torch.full((N,), 1.0).pin_memory()  # site: pin
        dev.copy_(x, non_blocking=True)
        scratch = pinned(3.0, 2 * N)  # pinned and freed in the capture, never copied
        del x, scratch
        fail(dev)
    out["error"] = None
except RuntimeError as e:
    out["error"] = str(e).splitlines()[0][:200]
try:
    g.replay()
    torch.npu.synchronize()
    out["first"] = values(dev)
except RuntimeError as e:
    out["first"] = str(e).splitlines()[0][:200]
if END == "reset":
    g.reset()
del g, capturing  # the context manager holds the graph too
out["held_after"] = settled_held(baseline)

dev.zero_()
g2, capturing = new_graph(handle)
try:
    capture_pinned_copy(capturing, dev, 2.0)
    out["second"] = replay_over_others(g2, dev)
except RuntimeError as e:
    out["second_error"] = str(e).splitlines()[0][:200]
g2.reset()
del g2, capturing
out["held_end"] = settled_held(baseline)
out["pools"] = len(pools()) if PLUGIN else 0
out["pin_site"] = site("pin")
out["hazards"] = hazards()
report(out)
