"""Simulator only (fault injection): the fence event a dead graph needs cannot be recorded
(aclrtRecordEvent fails once with 507000; run with TASK_QUEUE_ENABLE=0 so the record, and its
error, happen on the calling thread). Nothing is lost: the graph's block stays held until a later
pass records the fence, then comes back once that fence ran, and the next capture works. (A
fence recorded by a pass is queried in the same pass: whether it already ran there is a race
with the stream, so the scenario synchronizes before the call it reads.)

Reports ``held_after_retry`` (pool bytes after host_empty_cache(): 0 with the plugin) and
whether a clean capture works afterwards; the plugin's warning about the failed record goes to
stderr.
"""

from _lib import simctl
from _lib.capture_checks import clean_capture_works, graph_of_freed_input
from _lib.scenario import N, pool_bytes, report, side_stream, torch

import torch_npu_pinpool

side_stream()
g = graph_of_freed_input(torch.zeros(N, device="npu"), 3.0)
g.replay()
torch.npu.synchronize()

simctl.fail_next("record_event")  # the reset's fence: the next record on any stream
g.reset()
simctl.fail_next("record_event", 0)  # disarmed, whether or not it fired
torch_npu_pinpool.host_empty_cache()  # this pass records the fence, and waits for nothing
torch.npu.synchronize()  # the fence ran
torch_npu_pinpool.host_empty_cache()
held_after_retry = pool_bytes()

report({"held_after_retry": held_after_retry, "clean_capture": clean_capture_works(4.0)})
