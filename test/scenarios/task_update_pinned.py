"""Task groups and task update (graph_task_group_begin/end, graph_task_update_begin/end,
NPUGraph.update) around pinned host memory: what the host allocator is asked, and what a replay
reads after the user frees the pinned source of an update and pins junk.

The CANN runtime only lets kernels into a task group or an update (hicann/runtime
src/runtime/core/src/stream/stream.cc PackingTaskGroup / AllocTask; simcann/src/capture.cpp
Note [Task groups]): a copy from pinned memory cannot be a task of an updated group. What an
update can do is point the group's kernel at a new device buffer, which an eager non_blocking copy
from pinned memory fills on the update stream. Parts, in order (each reports its own dict):

* ``dispatch``: NPUGraph.update (auto_dispatch_capture; a handler registered for ``add.out``,
  an op the simulator has): the graph copies pinned A into a staging buffer (captured, outside the
  group), the group adds it to zeros; the update points the add at a second staging buffer filled
  from pinned B on the update stream; B is freed at once and junk is pinned.
* ``explicit``: the same with graph_task_group_begin/end and graph_task_update_begin/end on a
  stream of the scenario's own, the group being ``out.copy_(stage)`` (a D2D copy kernel).
* ``cpu_input``: NPUGraph.update given the pinned CPU tensor itself, then a valid update.
* last, chosen by ``FATAL`` (either ends torch_npu's task queue, so one per process):
  ``copy_in_group`` (default): a non_blocking H2D copy from pinned memory inside a task group;
  ``free_in_update``: the pinned source of the update stream's eager copy freed between
  graph_task_update_begin and graph_task_update_end (the allocator records its event on the
  updating stream).

On the simulator each stream task takes ``DELAY_US`` (default 20000) so the eager copies are still
queued when B is freed; a real NPU's copies are asynchronous by themselves.
"""

import os

import torch
import torch_npu
from _lib import simctl
from _lib.scenario import (
    PLUGIN,
    N,
    env_int,
    held_bytes,
    in_use_bytes,
    pinned,
    pool_bytes,
    report,
    side_stream,
    values,
)

if not hasattr(torch_npu.npu, "NpuGraphOpHandler"):  # torch_npu 2.9.0: no NPUGraph.update API
    report({"unavailable": f"torch_npu {torch_npu.__version__} has no NpuGraphOpHandler"})
    raise SystemExit(0)

from torch_npu.npu import NpuGraphOpHandler, register_npu_graph_handler  # noqa: E402

SIM = simctl.available()
JUNK = -1.0
seen = {}  # what the update step saw, filled by the handler below


@register_npu_graph_handler(["add.out"])
class _AddOut(NpuGraphOpHandler):
    """NPUGraph.update replaces ``other`` (arg 1) of a captured ``torch.add(..., out=...)``.

    By hand, not through ``UPDATE_SPECS``: the base class's ``update_args`` walks that table only
    from torch_npu 2.10.0.post4; before (2.8.0.post5, 2.9.1 - 2.10.0.post2) it does nothing and a
    handler assigns the args itself, which every build honours."""

    @classmethod
    def update_args(cls, dispatch_record, update_input):
        # Runs between graph_task_update_begin and the op, with the update stream current.
        seen["capturing_in_update"] = torch_npu.npu.is_current_stream_capturing()
        if "other" in update_input:
            dispatch_record.args[1] = update_input["other"]


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def figures() -> dict:
    f = {"held_bytes": held_bytes(), "in_use_bytes": in_use_bytes(), "pool_bytes": pool_bytes()}
    if SIM:
        f["violations"] = simctl.violations()
        f["runtime_pinned_bytes"] = simctl.host_bytes()
    return f


def pin_junk() -> list:
    """Pinned junk of the update source's size, pinned right after the user dropped it."""
    return [pinned(JUNK) for _ in range(16)]


def dispatch_part(cap) -> dict:
    zero, out = torch.zeros(N, device="npu"), torch.zeros(N, device="npu")
    stage_a, stage_b = torch.empty(N, device="npu"), torch.empty(N, device="npu")
    src_a = pinned(1.0)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, stream=cap, auto_dispatch_capture=True):
        stage_a.copy_(src_a, non_blocking=True)  # captured pinned H2D, outside the group
        torch.add(zero, stage_a, out=out)  # its task group: out = 0 + stage
    upd = g.graph_dispatch_mode.update_stream
    r = {"update_stream_is_capture_stream": upd == cap}
    g.update([{"other": stage_a}])  # the graph waits for an update before each replay
    g.replay()
    torch.npu.synchronize()
    r["replay_a"] = values(out)
    if SIM:
        simctl.set_delay_us(env_int("DELAY_US", 20000))
    src_b = pinned(2.0)
    with torch.npu.stream(upd):
        r["capturing_before_update"] = torch_npu.npu.is_current_stream_capturing()
        stage_b.copy_(src_b, non_blocking=True)  # eager H2D on the update stream
    g.update([{"other": stage_b}])  # same stream: after the copy
    r["capturing_in_update"] = seen.get("capturing_in_update")
    del src_b  # the user is done with it
    junk = pin_junk()
    g.replay()  # ordered after the update by the graph's ExternalEvent wait
    torch.npu.synchronize()
    if SIM:
        simctl.set_delay_us(0)
    r["replay_b"] = values(out)
    r["junk_intact"] = all(values(j) == [JUNK] for j in junk)
    r.update(figures())
    return r


def explicit_part(cap) -> dict:
    out = torch.zeros(N, device="npu")
    stage_a, stage_b = torch.empty(N, device="npu"), torch.empty(N, device="npu")
    src_a = pinned(1.0)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, stream=cap):
        stage_a.copy_(src_a, non_blocking=True)
        torch_npu.npu.graph_task_group_begin(cap)
        out.copy_(stage_a)  # D2D: a copy kernel (aclnnInplaceCopy), allowed in a group
        handle = torch_npu.npu.graph_task_group_end(cap)
    g.replay()
    torch.npu.synchronize()
    r = {"replay_a": values(out)}
    upd = torch.npu.Stream()
    if SIM:
        simctl.set_delay_us(env_int("DELAY_US", 20000))
    src_b = pinned(2.0)
    with torch.npu.stream(upd):
        stage_b.copy_(src_b, non_blocking=True)
        torch_npu.npu.graph_task_update_begin(upd, handle)
        r["capturing_in_update"] = torch_npu.npu.is_current_stream_capturing()
        out.copy_(stage_b)  # replaces the group's copy: it now reads stage_b
        torch_npu.npu.graph_task_update_end(upd)
    del src_b  # the user is done with it
    junk = pin_junk()
    torch.npu.current_stream().wait_stream(upd)
    g.replay()
    torch.npu.synchronize()
    if SIM:
        simctl.set_delay_us(0)
    r["replay_b"] = values(out)
    r["junk_intact"] = all(values(j) == [JUNK] for j in junk)
    r.update(figures())
    return r


def cpu_input_part(cap) -> dict:
    zero, other, out = (torch.zeros(N, device="npu") for _ in range(3))
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, stream=cap, auto_dispatch_capture=True):
        torch.add(zero, other, out=out)
    r = {}
    try:
        g.update([{"other": pinned(3.0)}])
        r["pinned_input"] = "accepted"
    except Exception as e:  # noqa: BLE001 - reported
        r["pinned_input"] = first_line(e)
    try:  # the update stream is shared by every NPUGraph (a class attribute)
        g.update([{"other": other}])
        r["valid_update_after"] = "accepted"
    except Exception as e:  # noqa: BLE001 - reported
        r["valid_update_after"] = first_line(e)
    return r


def copy_in_group_part(cap) -> dict:
    dev = torch.zeros(N, device="npu")
    src_a = pinned(1.0)
    g = torch.npu.NPUGraph()
    r = {"group_end": "not reached", "capture": "ok"}
    try:
        with torch.npu.graph(g, stream=cap):
            torch_npu.npu.graph_task_group_begin(cap)
            dev.copy_(src_a, non_blocking=True)
            try:
                torch_npu.npu.graph_task_group_end(cap)
                r["group_end"] = "ok"
            except Exception as e:  # noqa: BLE001 - reported
                r["group_end"] = first_line(e)
    except Exception as e:  # noqa: BLE001 - reported
        r["capture"] = first_line(e)
    try:
        g.replay()
        torch.npu.synchronize()
        r["replay"] = values(dev)
    except Exception as e:  # noqa: BLE001 - reported
        r["replay"] = first_line(e)
    return r


def free_in_update_part(cap) -> dict:
    out, stage_a, stage_b = (torch.zeros(N, device="npu") for _ in range(3))
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, stream=cap):
        torch_npu.npu.graph_task_group_begin(cap)
        out.copy_(stage_a)
        handle = torch_npu.npu.graph_task_group_end(cap)
    upd = torch.npu.Stream()
    src_b = pinned(2.0)
    r = {"update": "ok"}
    try:
        with torch.npu.stream(upd):
            stage_b.copy_(src_b, non_blocking=True)
            torch_npu.npu.graph_task_update_begin(upd, handle)
            del src_b  # freed while its stream is updating
            out.copy_(stage_b)
            torch_npu.npu.graph_task_update_end(upd)
        torch.npu.synchronize()
    except Exception as e:  # noqa: BLE001 - reported
        r["update"] = first_line(e)
    try:
        torch.npu.current_stream().wait_stream(upd)
        g.replay()
        torch.npu.synchronize()
        r["replay"] = values(out)
    except Exception as e:  # noqa: BLE001 - reported
        r["replay"] = first_line(e)
    return r


FATAL = {"copy_in_group": copy_in_group_part, "free_in_update": free_in_update_part}
fatal = os.environ.get("FATAL", "copy_in_group")
cap = side_stream()
result = {"plugin": PLUGIN}
for name, part in (
    ("dispatch", dispatch_part),
    ("explicit", explicit_part),
    ("cpu_input", cpu_input_part),
    (fatal, FATAL[fatal]),
):
    try:
        result[name] = part(cap)
    except Exception as e:  # noqa: BLE001 - reported, the next part still runs
        result[name] = {"raised": first_line(e)}
report(result)
