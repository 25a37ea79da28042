"""Misuse around capture (default stream, end on another stream, exception inside
``torch.npu.graph``) leaves no dangling registration in the plugin's pool_stats(), and a clean
capture still works after each. Bad arguments to the plugin's API get a clear error."""

import gc

import torch
from _lib.capture_checks import clean_capture_works, error_of
from _lib.scenario import N, pinned, pools, report, values

import torch_npu_pinpool

out = {}
# capture on the default stream: torch_npu refuses; nothing stays registered
g = torch.npu.NPUGraph()
out["default_stream"] = error_of(lambda: g.capture_begin())
out["after_default"] = pools()
side = torch.npu.Stream()
torch.npu.set_stream(side)
out["clean1"] = clean_capture_works(1.0)

# end on another stream: refused, the capture is still underway; a correct retry works
dev = torch.zeros(N, device="npu")
g = torch.npu.NPUGraph()
g.capture_begin()
x = pinned(2.0)
dev.copy_(x, non_blocking=True)
del x
torch.npu.set_stream(torch.npu.Stream())
out["wrong_stream"] = error_of(g.capture_end)
out["still_capturing"] = [p["capturing"] for p in pools()]
torch.npu.set_stream(side)
g.capture_end()
others = [pinned(-1.0) for _ in range(4)]
g.replay()
torch.npu.synchronize()
out["retry_replay"] = values(dev)
g.reset()
g.reset()  # reset twice is harmless
gc.collect()
torch.npu.synchronize()
out["after_reset"] = pools()


# exception inside `with torch.npu.graph`: the capture ends, the graph owns its pool
def body() -> None:
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        y = pinned(3.0)
        dev.copy_(y, non_blocking=True)
        raise ValueError("user code failed")


out["with_error"] = error_of(body)
gc.collect()
torch.npu.synchronize()
out["after_with"] = pools()
out["clean2"] = clean_capture_works(4.0)

# report() with a wait that is not a number of seconds: refused before anything is read
out["report_wait"] = [
    error_of(lambda w=w: torch_npu_pinpool.report(wait=w)) for w in (float("inf"), -1.0, "5")
]
report(out)
