"""vllm-ascend's graph mode, reduced to what touches pinned memory: one process-wide pool
(``graph_pool_handle``) for 5 batch sizes, each capture staging a per-size constant through a
pinned temporary (pin, H2D, free inside the capture); 3 sleep/wake cycles (every graph dropped by
garbage collection without ``reset``, then captured again into the *same* pool id); between
replays another thread churns eager pin / copy / free.

Reports per cycle the replays run, whether every one produced the right bytes and the batch
sizes that did not, the error (if a capture raised; the cycle's replays then did not run),
whether the churn thread's pinned bytes were ever clobbered, and the pinned bytes held after the
last sleep plus one host_empty_cache(). Env: CYCLES (3), REPLAYS (3).
"""

import gc
import threading

import torch
from _lib import simctl
from _lib.scenario import env_int, held_bytes, npu_version, report, side_stream

import torch_npu_pinpool

SIZES = [1, 2, 4, 8, 16]
CYCLES = env_int("CYCLES", 3)
REPLAYS = env_int("REPLAYS", 3)
ROW = 256  # elements per batch row


def churn(stop: threading.Event, bad: list[str]) -> None:
    """Eager pinned traffic from another thread: pin, H2D, D2H back, compare, free."""
    stream = torch.npu.Stream()
    k = 0
    while not stop.is_set():
        k += 1
        with torch.npu.stream(stream):
            src = torch.full((ROW,), 100.0 + k % 7).pin_memory()
            dev = src.to("npu", non_blocking=True)
            back = torch.empty(ROW, pin_memory=True)
            back.copy_(dev, non_blocking=True)
            stream.synchronize()
        if not bool((back == 100.0 + k % 7).all()) or not bool((src == 100.0 + k % 7).all()):
            bad.append(f"churn iteration {k}: pinned bytes changed under the thread")
        del src, dev, back


def capture_all(pool) -> dict:
    graphs = {}
    for b in SIZES:
        x = torch.full((b, ROW), 2.0, device="npu")
        scale = torch.empty(b, ROW, device="npu")
        torch.npu.synchronize()
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, pool=pool):
            stage = torch.full((b, ROW), float(b)).pin_memory()
            scale.copy_(stage, non_blocking=True)
            del stage
            out = x * scale
        graphs[b] = (g, x, out)
    return graphs


side_stream()
baseline = held_bytes()
pool = torch.npu.graph_pool_handle()
cycles = []
stop, bad = threading.Event(), []
worker = threading.Thread(target=churn, args=(stop, bad), daemon=True)
worker.start()
for cycle in range(CYCLES):
    entry = {"error": None, "right": True, "replays": 0, "wrong": []}
    try:
        graphs = capture_all(pool)  # wake: capture into the same pool id every time
        for _ in range(REPLAYS):
            for b, (g, x, out) in graphs.items():
                x.fill_(float(cycle + 1))
                g.replay()
                torch.npu.synchronize()
                entry["replays"] += 1
                if not bool((out.cpu() == float((cycle + 1) * b)).all()):
                    entry["right"] = False
                    entry["wrong"] = sorted(set(entry["wrong"]) | {b})
        del g, x, out  # the loop's names would keep the last graph (and its pool) alive
    except Exception as e:  # noqa: BLE001 - the native assert on recapture is the finding
        entry["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    # sleep: vllm drops every graph by garbage collection, no reset
    graphs = None
    gc.collect()
    cycles.append(entry)
stop.set()
worker.join()
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
result = {
    "npu_version": list(npu_version()),
    "cycles": cycles,
    "churn_bad": bad[:3],
    "baseline": baseline,
    "held_after": held_bytes(),
}
if simctl.available():
    result["violations"] = simctl.violations()
report(result)
