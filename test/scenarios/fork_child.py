"""Scenario: a process forked after pinned memory was used (issue #33: Note [Forked children]).

The parent pins a tensor, copies from it (so its block has a stream use), captures and replays
a graph that reads a pinned buffer, then forks. The child frees the inherited tensors, tries a
pin_memory() and host_memory_stats(), and exits; it must neither hang nor crash. Then the
parent pins, copies and replays again. Reports the child's exit status (None: it hung and was
killed after CHILD_TIMEOUT_S), what each call in the child gave ("ok" or the exception's type),
and the parent's values after the fork.
"""

import json
import os
import time

from scenario import N, env_int, pinned, report, side_stream, torch, values

import torch_npu_pinpool

side_stream()
dev = torch.zeros(N, device="npu")
kept = pinned(1.0)
dev.copy_(kept, non_blocking=True)
buf = pinned(2.0)
graph_dev = torch.zeros(N, device="npu")
g = torch.npu.NPUGraph()
with torch.npu.graph(g):
    graph_dev.copy_(buf, non_blocking=True)
g.replay()
torch.npu.synchronize()


def child_calls() -> dict[str, str]:
    out = {}
    for name, call in [
        ("free", lambda: globals().pop("kept")),
        ("pin", lambda: pinned(3.0)),
        ("stats", lambda: torch_npu_pinpool.host_memory_stats()),
    ]:
        try:
            call()
            out[name] = "ok"
        except Exception as e:  # what the child would see
            out[name] = type(e).__name__
    return out


read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:  # the child: report through the pipe, never return into the scenario
    os.close(read_end)
    try:
        result = child_calls()
    except BaseException as e:  # noqa: BLE001
        result = {"error": repr(e)}
    os.write(write_end, json.dumps(result).encode())
    os._exit(0)

os.close(write_end)
deadline = time.monotonic() + env_int("CHILD_TIMEOUT_S", 60)
status = None
while time.monotonic() < deadline:
    done, raw = os.waitpid(pid, os.WNOHANG)
    if done:
        status = os.waitstatus_to_exitcode(raw)
        break
    time.sleep(0.05)
if status is None:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
child = json.loads(os.read(read_end, 1 << 16) or b"{}")

# The parent goes on: a fresh pin, a copy, a replay.
fresh = pinned(4.0)
dev.copy_(fresh, non_blocking=True)
g.replay()
torch.npu.synchronize()
report({"status": status, "child": child, "values": values(dev), "graph": values(graph_dev)})
