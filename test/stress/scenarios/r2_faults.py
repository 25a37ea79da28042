"""Stress R2: injected runtime faults, all cases one after another in ONE interpreter.

Through the simulator's ``simcann_set_fault``: a pinned allocation failure inside a capture,
capture begin failure, capture end failure, an invalidated capture, an exception inside
``with torch.npu.graph``, reset twice, and two graphs sharing a pool with their tensors dropped
in all 24 orders. Each case is a function ``case_<name>(out)``; the driver runs them in
``ORDER`` (``invalidated_capture`` last: torch_npu's task queue carries the failed copy's error)
and after each checks that the allocator is consistent before the next case starts: nothing
capturing, a fresh capture + replay and eager ``non_blocking`` use are correct (``check_after``),
then pinned bytes held and new simulator violations. One interpreter on purpose (an interpreter
start costs ~5-15 s on the 2-core CI machine); a case that crashes the interpreter fails every
case.

Inputs (environment): none of its own; ``TORCH_NPU_PINPOOL=0`` runs torch_npu's native
allocator. The stress tests set ``SIMCANN_STRICT=0``. Needs the simulated runtime
(``source ci/sim-env.sh PAIR``)::

    python test/stress/scenarios/r2_faults.py

Reports (``PINPOOL_RESULT:<json>``): ``{case: out}`` for every case in ``ORDER``; ``out`` has
``raised`` / ``message`` (the exception the case expects, or None), the case's own fields
(``recovered``, ``capture_usable``, ``capturing_after``, ``reset_error``, ``still_capturing``,
``second_capture_end``, ``event_after_ready``, ``late_queue_error``, ``pools_capturing``,
``wrong_replay``, ``orders``), then ``capturing_now``, ``wrong_after``, ``base`` / ``end``
(``stresslib.held``) and ``violations``; or ``crash`` (a traceback tail) if the case or the
check after it raised.
"""

import gc
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # stresslib

import torch
import torch_npu
from stresslib import U8, held, report, sim, tolerate_stale_device_capture, warm_up, wrong

# invalidated_capture last: torch_npu's task queue carries the failed copy's error.
# (test_stress.py parametrizes test_r2_faults by this list: keep it a literal.)
ORDER = [
    "reset_twice",
    "exception_inside_capture",
    "collect_orders",
    "malloc_host_in_capture",
    "capture_begin_fails",
    "capture_end_fails",
    "invalidated_capture",
]


def check_after():
    # a following capture + replay with a pinned input, and eager use, must be correct
    n = 65536
    d = torch.empty(n, dtype=U8, device="npu")
    d2 = torch.empty(n, dtype=U8, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        h = torch.full((n,), 77, dtype=U8).pin_memory()
        d.copy_(h, non_blocking=True)
        del h
    junk = torch.full((n,), 0xEE, dtype=U8).pin_memory()
    g.replay()
    torch.npu.synchronize()
    w = wrong(d, 77)
    h2 = torch.full((n,), 99, dtype=U8).pin_memory()
    d2.copy_(h2, non_blocking=True)
    del h2, junk
    torch.npu.synchronize()
    w += wrong(d2, 99)
    g.reset()
    del g
    return w


def note_raised(out, e, prefix=""):
    # the exception a case expects; test_r2_faults checks its type and message
    out["raised"], out["message"] = prefix + type(e).__name__, str(e)[:500]


def reset_noting_error(out, g):
    # NPUGraph.reset() after the fault: an exception is recorded, not raised
    try:
        g.reset()
    except Exception as e:
        out["reset_error"] = repr(e)[:300]


def finish(out, base, v0):
    # A failed capture_begin / capture_end leaves torch.npu.graph's side stream current (its
    # __exit__ never runs): go back to the default stream as user code would.
    torch.npu.set_stream(torch.npu.default_stream())
    out["capturing_now"] = torch_npu.npu.graphs.is_current_stream_capturing()
    out["wrong_after"] = check_after()
    out["base"] = base
    out["end"] = held()
    out["violations"] = sim.violations() - v0
    return out


# ---- the cases ----


def case_malloc_host_in_capture(out):
    # pinned allocation failure inside a capture (a size no cached block can serve)
    n = 3 * (1 << 20) + 5
    d = torch.empty(16, dtype=U8, device="npu")
    g = torch.npu.NPUGraph()
    try:
        with torch.npu.graph(g):
            hs = torch.ones(16, dtype=U8).pin_memory()
            d.copy_(hs, non_blocking=True)
            sim.set_fault("malloc_host", 1)
            x = torch.empty(n, dtype=U8, pin_memory=True)
    except Exception as e:
        note_raised(out, e)
    sim.set_fault("malloc_host", 0)
    if out["raised"] is None:
        # no exception: the allocator recovered (retried); the block must be pinned
        out["recovered"] = bool(x.is_pinned())
        del x
    out["capture_usable"] = None
    try:
        g.replay()
        torch.npu.synchronize()
        out["capture_usable"] = True
    except Exception as e:
        out["capture_usable"] = repr(e)[:200]
    g.reset()
    del g, hs
    return out


def case_capture_begin_fails(out):
    g = torch.npu.NPUGraph()
    d = torch.empty(16, dtype=U8, device="npu")
    sim.set_fault("capture_begin", 1)
    try:
        with torch.npu.graph(g):
            h = torch.ones(16, dtype=U8).pin_memory()
            d.copy_(h, non_blocking=True)
    except Exception as e:
        note_raised(out, e)
    sim.set_fault("capture_begin", 0)
    out["capturing_after"] = torch_npu.npu.graphs.is_current_stream_capturing()
    # a pinned allocation now must be an ordinary eager one
    x = torch.ones(1 << 16, dtype=U8).pin_memory()
    del x
    del g
    h = None
    return out


def case_capture_end_fails(out):
    g = torch.npu.NPUGraph()
    d = torch.empty(65536, dtype=U8, device="npu")
    sim.set_fault("capture_end", 1)
    try:
        with torch.npu.graph(g):
            h = torch.full((65536,), 5, dtype=U8).pin_memory()
            d.copy_(h, non_blocking=True)
            del h
    except Exception as e:
        note_raised(out, e)
    sim.set_fault("capture_end", 0)
    reset_noting_error(out, g)
    del g
    return out


def case_invalidated_capture(out):
    g = torch.npu.NPUGraph()
    d = torch.empty(65536, dtype=U8, device="npu")
    try:
        with torch.npu.graph(g):
            h = torch.full((65536,), 5, dtype=U8).pin_memory()
            sim.set_fault("invalidate_capture", 1)
            d.copy_(h, non_blocking=True)
            del h
            torch.npu.current_stream()  # nothing else
    except Exception as e:
        note_raised(out, e)
    sim.set_fault("invalidate_capture", 0)
    # torch_npu (2.13 and 2.10): the failed captured copy usually surfaces as a task-queue
    # error in the with-body, and the capture_end() in __exit__ then raises before it ends
    # the capture; a second capture_end() ends it (507903). That is what user code has to
    # do. When torch_npu's task-queue thread reaches the copy later, __exit__'s
    # capture_end() ends the capture (507903) and the queue's error surfaces at a later
    # call instead (seen: the probe's event record below).
    out["still_capturing"] = torch_npu.npu.graphs.is_current_stream_capturing()
    if out["still_capturing"]:
        try:
            g.capture_end()
        except Exception as e:
            out["second_capture_end"] = str(e)[:300]
    reset_noting_error(out, g)
    del g
    # Is torch_npu's task queue still alive? An event recorded now, after a device
    # synchronize, must be complete unless the queue stopped taking work.
    probe = torch.npu.Event()
    try:
        probe.record()
        torch.npu.synchronize()
        out["event_after_ready"] = bool(probe.query())
    except RuntimeError as e:  # the dead queue's error, surfacing here (above)
        out["event_after_ready"] = False
        out["late_queue_error"] = str(e)[:200]
    import torch_npu_pinpool

    out["pools_capturing"] = sum(p["capturing"] for p in torch_npu_pinpool.pool_stats())
    return out


def case_exception_inside_capture(out):
    class Boom(Exception):
        pass

    g = torch.npu.NPUGraph()
    d = torch.empty(65536, dtype=U8, device="npu")
    try:
        with torch.npu.graph(g):
            h = torch.full((65536,), 5, dtype=U8).pin_memory()
            d.copy_(h, non_blocking=True)
            raise Boom("user code failed inside the capture")
    except Boom as e:
        note_raised(out, e)
    except Exception as e:
        note_raised(out, e, prefix="other:")
    del h
    reset_noting_error(out, g)
    del g
    return out


def case_reset_twice(out):
    g = torch.npu.NPUGraph()
    d = torch.empty(65536, dtype=U8, device="npu")
    with torch.npu.graph(g):
        h = torch.full((65536,), 5, dtype=U8).pin_memory()
        d.copy_(h, non_blocking=True)
        del h
    g.replay()
    torch.npu.synchronize()
    out["wrong_replay"] = wrong(d, 5)
    g.reset()
    try:
        g.reset()
    except Exception as e:
        note_raised(out, e)
    del g
    return out


def case_collect_orders(out):
    import itertools

    n = 65536
    orders = list(itertools.permutations(["graph", "tensor", "reset", "pool_peer"]))
    out["orders"] = 0
    w = 0
    for order in orders:
        pool = torch.npu.graph_pool_handle()
        objs = {}
        ds = []
        for j in range(2):  # two graphs sharing one pool
            g = torch.npu.NPUGraph()
            d = torch.empty(n, dtype=U8, device="npu")
            with torch.npu.graph(g, pool=pool):
                h = torch.full((n,), 10 + j, dtype=U8).pin_memory()
                d.copy_(h, non_blocking=True)
            objs[j] = {"g": g, "h": h}
            ds.append(d)
            del g, h
        for j in (0, 1):
            objs[j]["g"].replay()
        torch.npu.synchronize()
        w += wrong(ds[0], 10) + wrong(ds[1], 11)
        for step in order:
            if step == "graph":
                objs[0]["g"] = None
            elif step == "tensor":
                objs[0]["h"] = None
            elif step == "reset":
                if objs[1].get("g") is not None:
                    objs[1]["g"].reset()
            elif step == "pool_peer":
                objs[1] = {}
            gc.collect()
        objs.clear()
        del pool
        gc.collect()
        out["orders"] += 1
    out["wrong_replay"] = w
    return out


assert sorted(ORDER) == sorted(k[len("case_") :] for k in list(globals()) if k.startswith("case_"))

# ---- the driver: every case in ORDER, the allocator checked after each ----
warm_up()
tolerate_stale_device_capture()  # torch_npu < 2.10 bug after a failed capture (stresslib)
results = {}
for name in ORDER:
    out = {"raised": None, "message": None}
    base = held()
    v0 = sim.violations()
    try:
        globals()["case_" + name](out)
        finish(out, base, v0)
    except Exception:
        out["crash"] = traceback.format_exc()[-2500:]
    results[name] = out
report(results)
