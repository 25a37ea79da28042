"""A second thread pins and copies eagerly on its own stream while the main thread captures:
the graph pool holds only the capture's block, the worker's copies are right, and replay reads
the captured bytes."""

import threading

import torch
from _lib.scenario import N, pinned, pools, report, values

out = {}
capture_stream = torch.npu.Stream()
torch.npu.set_stream(capture_stream)
dev = torch.zeros(N, device="npu")
started, captured = threading.Event(), threading.Event()
errors, worker_ok = [], []


def worker() -> None:
    # Another thread, its own stream, eager pinned copies while the capture runs.
    try:
        torch.npu.set_device(0)
        torch.npu.set_stream(torch.npu.Stream())
        started.wait()
        ds = []
        for i in range(20):
            t = pinned(100 + i)
            d = torch.empty(N, device="npu")
            d.copy_(t, non_blocking=True)
            del t
            ds.append(d)
        torch.npu.current_stream().synchronize()
        worker_ok.append(all(values(d) == [float(100 + i)] for i, d in enumerate(ds)))
    except Exception as e:
        errors.append(repr(e))
    finally:
        captured.set()


th = threading.Thread(target=worker)
th.start()
g = torch.npu.NPUGraph()
with torch.npu.graph(g, stream=capture_stream, capture_error_mode="relaxed"):
    x = pinned(1.0)
    dev.copy_(x, non_blocking=True)
    del x
    started.set()
    captured.wait(60)
th.join()
out["pool_blocks"] = [p["blocks"] for p in pools()]
others = [pinned(9.0) for _ in range(30)]
g.replay()
torch.npu.synchronize()
out["replay"] = values(dev)
out["worker_ok"] = worker_ok
out["errors"] = errors
report(out)
