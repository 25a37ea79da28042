"""Eager non_blocking copies stay as safe as with torch_npu's own allocator, also while
another thread captures a graph."""

from __future__ import annotations

from ._snippets import ON_OFF, PRELUDE, env_for

EAGER = r"""
torch.npu.set_stream(torch.npu.Stream())
set_delay_us(3000)            # streams run asynchronously: each task takes 3 ms
devs = []
for i in range(40):
    src = pinned(i)
    d = torch.empty(N, device="npu")
    d.copy_(src, non_blocking=True)     # H2D, queued behind the previous ones
    del src                             # freed at once; the next pin_memory must not reuse it
    devs.append(d)
back = []
for i, d in enumerate(devs[:10]):       # D2H into pinned buffers that are freed at once
    h = torch.empty(N).pin_memory()
    h.copy_(d, non_blocking=True)
    back.append(h)
torch.npu.synchronize()
set_delay_us(0)
result = {
    "h2d_ok": all(values(d) == [float(i)] for i, d in enumerate(devs)),
    "d2h_ok": all(sorted(set(h.tolist())) == [float(i)] for i, h in enumerate(back)),
}
"""


@ON_OFF
def test_eager_async_copies_never_see_recycled_bytes(run_isolated, plugin):
    """Cannot fail with the plugin off: native torch_npu is safe here, and that is the bar.
    (An allocator taking memory from aclrtMallocHost itself fails it: torch_npu then never
    calls its record_event.)"""
    r = run_isolated(PRELUDE + EAGER, env=env_for(plugin))
    assert r.result == {"h2d_ok": True, "d2h_ok": True}


THREADS = r"""
out = {}
capture_stream = torch.npu.Stream()
torch.npu.set_stream(capture_stream)
dev = torch.zeros(N, device="npu")
started, captured = threading.Event(), threading.Event()
errors, worker_ok = [], []

def worker():
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
out["pool_blocks"] = [p["blocks"] for p in torch_npu_pinpool.pool_stats()]
others = [pinned(9.0) for _ in range(30)]
g.replay(); torch.npu.synchronize()
out["replay"] = values(dev)
out["worker_ok"] = worker_ok
out["errors"] = errors
result = out
"""


def test_other_threads_during_capture(run_isolated):
    """A second thread pins and copies eagerly on its own stream while the main thread
    captures: its allocations stay in the default pool (the graph pool holds exactly the
    capture's block), its copies are correct, and replay reads the captured bytes. Plugin
    only: the pool accounting is the plugin's; the replay assertion is the native defect
    covered in test_capture_replay.py."""
    o = run_isolated(PRELUDE + THREADS).result
    assert o["errors"] == []
    assert o["worker_ok"] == [True]
    assert o["pool_blocks"] == [1]
    assert o["replay"] == [1.0]
