"""torch.compile(backend="npugraph_ex", dynamic=True): several graph keys (input shapes) of one
compiled function captured into one graph pool, a recapture that resets the old graph, the
capture limit that resets every graph, and all pinned bytes back after the function is dropped.

How npugraph_ex behaves (torch_npu/dynamo/npugraph_ex/_acl_concrete_graph/acl_graph.py, the same
in the 2.10 and 2.13 wheels): with dynamic shapes one FX graph is compiled once and captured once
per graph key (the input shapes), every key into the FX graph's pool (``graph_pool_handle()``, or
the user's ``options={"use_graph_pool": handle}``, which turns off npugraph_ex's device-memory
reuse across keys, reuse_graph_pool_in_same_fx, with a warning). A key is captured again, and
its old graph ``reset()``, when a mutated input comes at another address; when a new key would
exceed ``capture_limit`` every graph is ``reset()`` and the function runs eagerly from then on;
graphs die without ``reset()`` when the function is dropped (``torch._dynamo.reset()``, gc).

The compiled function adds, to an NPU input ``x`` (value: the call number ``k``), a constant 3
staged through a pinned temporary allocated inside the function (so inside the capture) and a
pinned CPU input ``host`` copied to the device. npugraph_ex does not copy a later call's CPU
input to the captured address: a replay reads the captured host address, i.e. the CPU input of
the call that captured the key (plugin or not). It also adds that sum into ``acc`` (a mutated
input). After each call the caller drops ``host`` and re-pins junk (value -1000) of every size.

Call plan (n = input length): 256, 512, 1024 (three keys captured), 256 (replay), 512 with a new
``acc`` (recapture, old graph reset), 256, 1024 (replays), 2048 (a fourth key), 256 (replay), 128
(a fifth key: capture_limit 4 resets every graph, eager from then on), 256 (eager). The limit
counts graphs, recaptures included: the recapture happens while there are three.

Reports per call the key, the call's ``k`` and host value, the host value of the call that
captured the graph it replays, the distinct values of the output and of what ``acc`` gained, and
npugraph_ex's counters (captures, recaptures); the plugin's pools after the first three keys
(plugin only); whether any junk byte changed; the pinned bytes held at the baseline and after
the function is dropped and host_empty_cache() is called once.

Env: NPUGRAPH_EX_POOL (``fx``: npugraph_ex's pool per FX graph, default; ``custom``: a
``graph_pool_handle()`` passed as ``use_graph_pool``).
"""

import gc
import os

import torch
from _lib import simctl
from _lib.scenario import (
    PLUGIN,
    held_bytes,
    npu_version,
    pinned,
    pools,
    report,
    side_stream,
    torchair_counts_captures,
    values,
)
from torch._dynamo.utils import counters

import torch_npu_pinpool

POOL = os.environ.get("NPUGRAPH_EX_POOL", "fx")
STAGED = 3.0
JUNK = -1000.0
SIZES = (128, 256, 512, 1024, 2048)
LIMIT = 4  # capture_limit: the fifth key resets every graph
# (n, new acc?) per call; see the docstring.
PLAN = [(256, False), (512, False), (1024, False), (256, False), (512, True), (256, False),
        (1024, False), (2048, False), (256, False), (128, False), (256, False)]


def fn(x: torch.Tensor, host: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
    stage = torch.full(x.shape, STAGED, pin_memory=True)  # a pinned temporary in the capture
    out = x + stage.to("npu", non_blocking=True) + host.to("npu", non_blocking=True)
    acc.add_(out)
    return out


side_stream()
baseline = held_bytes()
options = {"capture_limit": LIMIT}
if POOL == "custom":
    options["use_graph_pool"] = torch.npu.graph_pool_handle()
compiled = torch.compile(fn, backend="npugraph_ex", dynamic=True, fullgraph=True, options=options)

accs = {n: torch.zeros(n, device="npu") for n in SIZES}
captured_host: dict[int, float] = {}  # key -> host value of the call that captured its graph
junk: list[torch.Tensor] = []
calls, pools_after_keys, junk_intact = [], None, True
for k, (n, new_acc) in enumerate(PLAN):
    if new_acc:
        accs[n] = torch.zeros(n, device="npu")  # another address: npugraph_ex recaptures
    host_value = 100.0 * (k + 1)
    if n not in captured_host or new_acc:
        captured_host[n] = host_value
    x = torch.full((n,), float(k), device="npu")
    host = pinned(host_value, n)
    before = accs[n].clone()
    out = compiled(x, host, accs[n])
    torch.npu.synchronize()
    calls.append({
        "n": n,
        "k": k,
        "host": host_value,
        "captured_host": captured_host[n],
        "out": values(out),
        "acc_added": values(accs[n] - before),
        "counters": dict(counters["npugraph_ex"]),
    })
    if k == 2 and PLUGIN:
        pools_after_keys = [[p["graphs"], p["blocks"]] for p in pools()]
    del x, host, out, before
    junk_intact &= all(bool((t == JUNK).all()) for t in junk)
    junk = [pinned(JUNK, m) for m in SIZES for _ in range(2)]  # may get a freed block
junk_intact &= all(bool((t == JUNK).all()) for t in junk)
del junk, accs
del compiled
torch._dynamo.reset()
gc.collect()
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
result = {
    "npu_version": list(npu_version()),
    "calls": calls,
    "counts_captures": torchair_counts_captures(),
    "pools_after_keys": pools_after_keys,
    "junk_intact": junk_intact,
    "baseline": baseline,
    "held_after": held_bytes(),
}
if simctl.available():
    result["violations"] = simctl.violations()
report(result)
