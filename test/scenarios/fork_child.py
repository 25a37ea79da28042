"""Scenario: a process forked after pinned memory was used (issue #33: Note [Forked children]).

The parent pins a tensor, copies from it (so its block has a stream use), captures and replays
a graph that reads a pinned buffer, then forks (FORK_BUSY=1: while another thread keeps calling
host_empty_cache()). The child frees the inherited tensors, tries a pin_memory(),
host_memory_stats() and host_empty_cache(), and exits; it must neither hang nor crash. Then the
parent pins, copies and replays again. FORKS=N forks N children in turn. Reports the first
child exit status that was not 0 (None: it hung and was killed after CHILD_TIMEOUT_S), how many
hung, what each call in a child gave ("ok" or the exception's type), and the parent's values
after the forks.
"""

import json
import os
import threading
import time

from _lib import simctl
from _lib.scenario import N, env_int, pinned, report, side_stream, torch, values

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

# FORK_BUSY=1: another thread keeps calling host_empty_cache() and pinning while the fork
# happens, behind a dead graph whose replay is still queued (the simulator's task delay), so
# that the allocator's locks are often held at the fork (issue #47).
busy_stop = threading.Event()
if os.environ.get("FORK_BUSY") == "1":
    dead = torch.npu.NPUGraph()
    with torch.npu.graph(dead):
        graph_dev.add_(1.0)
    if simctl.available():
        simctl.set_delay_us(2_000_000)
    dead.replay()
    dead.reset()

    def busy() -> None:
        while not busy_stop.is_set():
            torch_npu_pinpool.host_empty_cache()
            pinned(5.0)

    busy_thread = threading.Thread(target=busy, daemon=True)
    busy_thread.start()
    time.sleep(0.2)


def child_calls() -> dict[str, object]:
    """Each call's outcome ("ok" or the exception's type); on the simulator, without FORK_BUSY,
    also the pinned bytes the runtime holds for this process before the calls and after each
    (``runtime``): they drop only where a call gave memory back to the runtime."""
    out: dict[str, object] = {}
    # Not with FORK_BUSY=1: the simulator's own lock may be held at such a fork, as may be the
    # runtime's on an NPU (Note [Forked children]).
    quiet = simctl.available() and os.environ.get("FORK_BUSY") != "1"
    runtime = [simctl.host_bytes()] if quiet else []
    for name, call in [
        ("free", lambda: globals().pop("kept")),
        ("pin", lambda: pinned(3.0)),
        ("stats", lambda: torch_npu_pinpool.host_memory_stats()),
        ("empty_cache", lambda: torch_npu_pinpool.host_empty_cache()),
    ]:
        try:
            call()
            out[name] = "ok"
        except Exception as e:  # what the child would see
            out[name] = type(e).__name__
        if runtime:
            runtime.append(simctl.host_bytes())
    return {"calls": out, "runtime": runtime}


def fork_once() -> tuple[int | None, dict[str, object]]:
    """Forks one child and waits for it: its exit status (None: hung, killed) and its calls."""
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
    os.close(read_end)
    return status, child


# FORKS=N: N children in turn, each while the busy thread runs. Reported: the first status that
# was not 0 (else 0), how many hung, and the calls (and runtime bytes) of the first child that
# ended.
forks = [fork_once() for _ in range(env_int("FORKS", 1))]
status = next((f[0] for f in forks if f[0] != 0), 0)
hung = sum(f[0] is None for f in forks)
child = next((f[1] for f in forks if f[0] is not None), {"calls": {}, "runtime": []})
busy_stop.set()
if os.environ.get("FORK_BUSY") == "1":
    busy_thread.join()
    if simctl.available():
        simctl.set_delay_us(0)

# The parent goes on: a fresh pin, a copy, a replay.
fresh = pinned(4.0)
dev.copy_(fresh, non_blocking=True)
g.replay()
torch.npu.synchronize()
report(
    {
        "status": status,
        "hung": hung,
        "child": child["calls"],
        "child_runtime_bytes": child["runtime"],
        "values": values(dev),
        "graph": values(graph_dev),
    }
)
