"""A reset that raises (issue #33): torch_npu's own NPUGraph.reset() is made to raise once (its
C++ base, torch_npu._C._NPUGraph.reset, replaced for one call), as a reset whose runtime call
fails and propagates would. The graph is then still replayable, so its blocks stay its own: a
replay after the next owners wrote reads the captured input's bytes. The next reset succeeds and
its blocks come back with host_empty_cache(). (torch_npu 2.10 - 2.14 report a failing
aclmdlRIDestroy as a warning and drop the graph, so a runtime fault does not make reset raise.)

Reports ``reset_error`` (the exception's text), ``values`` after the replay (right: [3.0]) and
``pool_bytes`` after the second reset and host_empty_cache() (plugin: 0).
"""

import torch_npu
from _lib.capture_checks import graph_of_freed_input
from _lib.scenario import N, pinned, pool_bytes, report, side_stream, torch, values

import torch_npu_pinpool

side_stream()
dev = torch.zeros(N, device="npu")
g = graph_of_freed_input(dev, 3.0)

base = torch_npu._C._NPUGraph
real_reset = base.reset


def failing_reset(self: object) -> None:
    raise RuntimeError("injected: reset failed")


base.reset = failing_reset
try:
    g.reset()
    reset_error = None
except RuntimeError as e:
    reset_error = str(e)
finally:
    base.reset = real_reset

owners = [pinned(9.0) for _ in range(4)]  # would take a recycled block
dev.zero_()
g.replay()
torch.npu.synchronize()
replayed = values(dev)

g.reset()
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
report({"reset_error": reset_error, "values": replayed, "pool_bytes": pool_bytes()})
