"""vllm-ascend's sparse KV offload, reduced to its pinned-memory pattern: long-lived pinned host
buffers; per size a graph (3 sizes, one pool) that copies device KV into the pinned buffer
(D2H), launches a host function that edits that buffer by address (``_launch_host_func``, run
at every replay in stream order), and copies it back (H2D). The caller drops its reference to
the persistent buffer while the graphs live, and re-pins junk between replays.

Reports per size whether each replay gave device KV + 1 (the host function's edit), whether the
junk was ever written, and the pinned bytes held after the graphs die and host_empty_cache().
Env: REPLAYS (3).
"""

import ctypes
import gc

import torch
import torch_npu
from _lib import simctl
from _lib.scenario import env_int, held_bytes, report, side_stream

import torch_npu_pinpool

SIZES = [64, 256, 1024]
REPLAYS = env_int("REPLAYS", 3)


def make_edit(addr: int, n: int):
    """A host function adding 1.0 to n float32 at `addr` (the buffer's captured address)."""

    def edit(_user_data) -> None:
        arr = (ctypes.c_float * n).from_address(addr)
        for i in range(n):
            arr[i] += 1.0

    return edit


stream = side_stream()
baseline = held_bytes()
pool = torch.npu.graph_pool_handle()
graphs = {}
for n in SIZES:
    kv = torch.full((n,), 1.0, device="npu")
    back = torch.zeros(n, device="npu")
    host = torch.empty(n, pin_memory=True)  # long-lived offload buffer
    edit = make_edit(host.data_ptr(), n)
    torch.npu.synchronize()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, pool=pool):
        host.copy_(kv, non_blocking=True)
        torch_npu.npu._launch_host_func(torch.npu.current_stream(), edit, None)
        back.copy_(host, non_blocking=True)
    graphs[n] = (g, kv, back, edit)
    del host  # the caller's reference goes; the graph still reads and writes the block
torch.npu.synchronize()

right = dict.fromkeys(SIZES, True)
junk_ok = True
junk = []
for r in range(REPLAYS):
    junk = []
    torch_npu_pinpool.host_empty_cache()
    junk = [torch.full((n,), -5.0).pin_memory() for n in SIZES for _ in range(2)]
    for n, (g, kv, back, _) in graphs.items():
        kv.fill_(float(10 * r + n))
        g.replay()
        torch.npu.synchronize()
        right[n] &= bool((back.cpu() == float(10 * r + n + 1)).all())
    junk_ok &= all(bool((j == -5.0).all()) for j in junk)
del junk, g, kv, back  # the loops' names would keep the last graph alive
graphs = None
gc.collect()
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
result = {
    "right": [right[n] for n in SIZES],
    "junk_intact": junk_ok,
    "baseline": baseline,
    "held_after": held_bytes(),
}
if simctl.available():
    result["violations"] = simctl.violations()
report(result)
