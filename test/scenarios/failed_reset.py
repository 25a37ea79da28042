"""A graph whose reset fails (the runtime refuses to destroy its model: the simulator's
``model_destroy`` fault) can still replay, so its pinned blocks stay its own: the next pinned
tensor of that size is written at once and the replay still copies the graph's bytes (issue #33).
Then a reset that succeeds gives the blocks back.

Reports ``reset_error`` (whether the failed reset raised), ``values`` (what the replay after it
delivered; right: [3]), and ``held_after`` / ``baseline`` (pinned bytes after the second reset and
host_empty_cache()).
"""

import simctl
import torch
from scenario import N, held_bytes, pinned, report, side_stream, values

side_stream()
dev = torch.zeros(N, device="npu")
torch.npu.synchronize()
baseline = held_bytes()
g = torch.npu.NPUGraph()
src = pinned(3.0)
with torch.npu.graph(g):
    dev.copy_(src, non_blocking=True)
    del src  # freed inside the capture: the graph owns the block
simctl.fail_next("model_destroy")
try:
    g.reset()
    reset_error = False
except RuntimeError:
    reset_error = True
owner = pinned(9.0)  # the next owner of a 4 KiB block writes at once
dev.fill_(0.0)
g.replay()
torch.npu.synchronize()
result = {"reset_error": reset_error, "values": values(dev)}
del owner
g.reset()
torch.npu.host_empty_cache()
result.update(baseline=baseline, held_after=held_bytes())
report(result)
