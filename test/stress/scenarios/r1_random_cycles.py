"""Stress R1: random capture / replay / reset cycles with random pool sharing, an eager thread
beside them.

Each cycle captures a graph (random size 16 B - 1 MiB, no pool or one of two shared pools) that
copies a persistent pinned input and a temporary pinned buffer freed inside the capture, plus
some unused capture-time garbage; replays random live graphs with new inputs and checks every
byte; drops graphs in random orders (reset / tensor / graph, graph collected without reset,
reset twice) and calls ``host_empty_cache()`` at random. Beside it, a thread pins, copies
``non_blocking`` on its own stream, frees at once, re-pins the same size with 0xEE and checks
every copy.

Inputs (environment): ``PINPOOL_STRESS_CYCLES`` (default 50), ``PINPOOL_STRESS_SEED``
(default 1); ``TORCH_NPU_PINPOOL=0`` runs torch_npu's native allocator. The stress tests also
set ``SIMCANN_STRICT=0``. Needs the simulated runtime (``source ci/sim-env.sh PAIR``)::

    PINPOOL_STRESS_CYCLES=5 python test/stress/scenarios/r1_random_cycles.py

Reports (``PINPOOL_RESULT:<json>``): the counters (captures, replays, resets, shared_captures,
wrong_keep, wrong_tmp, orders), ``eager`` (copies, wrong, errors), ``eager_alive``, pinned bytes
held at the start and the end (``base`` / ``end``, see ``stresslib.held``), new simulator
``violations`` and ``error`` (a traceback tail, or None).
"""

import gc
import os
import random
import sys
import threading
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # stresslib

import torch
from stresslib import U8, env_int, held, host_empty_cache, report, sim, warm_up, wrong

CYCLES = env_int("PINPOOL_STRESS_CYCLES", 50)
SEED = env_int("PINPOOL_STRESS_SEED", 1)
rng = random.Random(SEED)
warm_up()
base = held()
v0 = sim.violations()

# ---- the eager thread: pin, copy non_blocking on its own stream, free at once, verify ----
stop = threading.Event()
eager = {"copies": 0, "wrong": 0, "errors": []}


def eager_loop():
    try:
        s = torch.npu.Stream()
        r = random.Random(SEED + 1)
        ring = [torch.empty(256 * 1024, dtype=U8, device="npu") for _ in range(8)]
        with torch.npu.stream(s):
            pending = []
            while not stop.is_set():
                n = r.choice([512, 4096, 65536, 200000])
                v = r.randrange(1, 255)
                h = torch.full((n,), v, dtype=U8).pin_memory()
                d = ring[len(pending)][:n]
                d.copy_(h, non_blocking=True)
                del h  # freed while the copy may still be queued
                junk = torch.empty(n, dtype=U8, pin_memory=True).fill_(0xEE)  # reuse bait
                del junk
                pending.append((d, v))
                eager["copies"] += 1
                if len(pending) == len(ring):
                    s.synchronize()
                    for d, v in pending:
                        eager["wrong"] += wrong(d, v)
                    pending = []
            s.synchronize()
    except Exception as e:  # noqa
        eager["errors"].append(repr(e))


t = threading.Thread(target=eager_loop, daemon=True)
t.start()

# ---- the graphs ----
pools = [torch.npu.graph_pool_handle() for _ in range(2)]
live = []  # dicts: g, h_keep (or None once freed), d_keep, d_tmp, v_tmp, pool
stats = {
    "captures": 0,
    "replays": 0,
    "resets": 0,
    "wrong_keep": 0,
    "wrong_tmp": 0,
    "shared_captures": 0,
    "orders": {},
}


def capture():
    n = rng.choice([16, 4096, 65536, 1 << 20, 3 * 65536 + 7])
    pool = rng.choice([None, None, pools[0], pools[1]])
    v_keep, v_tmp = rng.randrange(1, 255), rng.randrange(1, 255)
    d_keep = torch.empty(n, dtype=U8, device="npu")
    d_tmp = torch.empty(n, dtype=U8, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, pool=pool, capture_error_mode="thread_local"):
        h_keep = torch.empty(n, dtype=U8, pin_memory=True)
        h_keep.fill_(v_keep)
        d_keep.copy_(h_keep, non_blocking=True)
        h_tmp = torch.full((n,), v_tmp, dtype=U8).pin_memory()
        d_tmp.copy_(h_tmp, non_blocking=True)
        del h_tmp
        for _ in range(rng.randrange(0, 3)):  # unused capture-time garbage
            x = torch.empty(rng.choice([64, 8192, 100000]), dtype=U8, pin_memory=True)
            del x
    stats["captures"] += 1
    stats["shared_captures"] += pool is not None
    live.append(
        {"g": g, "h_keep": h_keep, "d_keep": d_keep, "d_tmp": d_tmp, "v_tmp": v_tmp, "n": n}
    )


def replay(e):
    v = rng.randrange(1, 255)
    e["h_keep"].fill_(v)  # new inputs written into the persistent pinned buffer
    e["g"].replay()
    torch.npu.current_stream().synchronize()
    stats["replays"] += 1
    stats["wrong_keep"] += wrong(e["d_keep"], v)
    stats["wrong_tmp"] += wrong(e["d_tmp"], e["v_tmp"])


def drop(e):
    order = rng.choice(
        [
            "reset,tensor,graph",
            "tensor,reset,graph",
            "graph,tensor",
            "tensor,graph",
            "reset,reset,graph,tensor",
        ]
    )
    stats["orders"][order] = stats["orders"].get(order, 0) + 1
    live.remove(e)
    for step in order.split(","):
        if step == "reset":
            e["g"].reset()
            stats["resets"] += 1
        elif step == "tensor":
            e["h_keep"] = None
        elif step == "graph":
            e["g"] = None
        gc.collect()


error = None
try:
    for _i in range(CYCLES):
        capture()
        for _ in range(rng.randrange(1, 3)):
            replay(rng.choice(live))
        while len(live) > rng.randrange(0, 4):
            drop(rng.choice(live))
        if rng.random() < 0.2:
            host_empty_cache()
    while live:
        drop(live[0])
except Exception:
    error = traceback.format_exc()[-2500:]
stop.set()
t.join(60)
end = held() if error is None else None
report(
    dict(
        stats,
        eager=eager,
        base=base,
        end=end,
        violations=sim.violations() - v0,
        eager_alive=t.is_alive(),
        error=error,
    )
)
