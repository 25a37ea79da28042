"""torch.cond captured as conditional graph nodes (torch_npu 2.13 has them, 2.10 does not; 2.11
and 2.12 not checked:
``torch_npu.npu._npugraph_conditional_nodes.NPUGraphCaptureControlFlowOpDispatchMode``, which
turns ``torch.ops.higher_order.cond`` into ``NPUGraph.begin_capture_to_if_node`` bodies), with a
pinned temporary allocated and copied to the device inside the true branch.

Each branch is captured into a child model of the graph; torch_npu moves the host allocator's
pool filter to the child model for the branch (end_allocate_to_pool / begin_allocate_to_pool
inside the capture), a path the plugin's NPUGraph hooks do not see. A protected block keeps the
branch's bytes (7) on every replay that takes the branch, after junk (-1) was re-pinned and the
cache emptied; the false branch gives -1 (x - 1, x = 0).

Without the dispatch mode a plain ``torch.cond`` reads its predicate on the host
(``.item()``: a stream synchronize, refused while capturing). Where the runtime has no
conditional-node API (aclmdlRICondHandleCreate / aclmdlRICondHandleGetCondPtr /
aclmdlRICaptureToModelRIBegin), the capture raises; the scenario then reports ``{"error": ...}``.
The simulated runtime models them (simcann/src/cond.cpp).

Reports the replays' outputs for predicates True, False, True, and the pinned bytes held at the
baseline and after the graph is dropped and host_empty_cache() is called once.
"""

import gc

import torch
from _lib.scenario import N, held_bytes, pinned, report, side_stream, values

import torch_npu_pinpool

try:
    from torch_npu.npu._npugraph_conditional_nodes import (
        NPUGraphCaptureControlFlowOpDispatchMode as CondMode,
    )
except ImportError as e:  # torch_npu without conditional nodes (2.10)
    report({"error": f"{type(e).__name__}: {e}"})
    raise SystemExit(0) from None

BRANCH = 7.0


def true_fn(x: torch.Tensor) -> torch.Tensor:
    h = torch.full((N,), BRANCH, pin_memory=True)  # a pinned temporary inside the branch
    return x + h.to("npu", non_blocking=True)


def false_fn(x: torch.Tensor) -> torch.Tensor:
    return x - 1.0


side_stream()
baseline = held_bytes()
pred = torch.tensor(True, device="npu")
x = torch.zeros(N, device="npu")
torch.npu.synchronize()
g = torch.npu.NPUGraph()
try:
    with torch.npu.graph(g), CondMode():
        out = torch.cond(pred, true_fn, false_fn, (x,))
except Exception as e:  # noqa: BLE001 - the runtime's answer is the finding
    report({"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"})
    raise SystemExit(0) from None
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
junk = [pinned(-1.0) for _ in range(8)]  # may get a block given back too early
seen = []
for p in (True, False, True):
    pred.fill_(p)
    g.replay()
    torch.npu.synchronize()
    seen.append(values(out))
junk_intact = all(bool((t == -1.0).all()) for t in junk)
del g, out, junk
gc.collect()
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
report({"seen": seen, "junk_intact": junk_intact, "baseline": baseline,
        "held_after": held_bytes()})
