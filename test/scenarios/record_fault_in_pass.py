"""Simulator only (fault injection): the fence event a dead graph needs cannot be recorded
(aclrtRecordEvent fails once with 507000; run with TASK_QUEUE_ENABLE=0 so the record, and its
error, happen on the calling thread). Nothing is lost: the graph's block stays held until a later
pass records the fence, then comes back, and the next capture works.

Reports ``held_after_retry`` (pool bytes after host_empty_cache(): 0 with the plugin) and
``values`` of a clean capture afterwards (right: [4.0]); the plugin's warning about the failed
record goes to stderr.
"""

import simctl
from scenario import N, pinned, pool_bytes, report, side_stream, torch, torch_npu, values

side_stream()
dev = torch.zeros(N, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    src = pinned(3.0)
    dev.copy_(src, non_blocking=True)
    del src
g.replay()
torch.npu.synchronize()

simctl.fail_next("record_event")  # the reset's fence: the next record on any stream
g.reset()
simctl.fail_next("record_event", 0)  # disarmed, whether or not it fired
torch.npu.synchronize()
torch_npu.npu.host_empty_cache()
held_after_retry = pool_bytes()

g2 = torch.npu.NPUGraph()
with torch.npu.graph(g2):
    src = pinned(4.0)
    dev.copy_(src, non_blocking=True)
    del src
owners = [pinned(9.0) for _ in range(4)]
g2.replay()
torch.npu.synchronize()
report(
    {
        "held_after_retry": held_after_retry,
        "values": values(dev),
    }
)
