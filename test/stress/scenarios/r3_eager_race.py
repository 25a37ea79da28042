"""Stress R3: the eager race. With a per-task delay the copies are still queued when their
pinned buffer is freed; the allocator must not hand the block to anyone before the copy ran.

Runs ``non_blocking`` copies (sizes 4 KiB - 1 MiB, seed 7) through a ring of 16 device slots:
70 % H2D from a pinned buffer freed at once, re-allocated and overwritten with 0xEE; 30 % D2H
into a pinned buffer freed at once whose next owner writes its own bytes (0x5A). After every
16 copies (and at the end) it synchronizes and checks every byte.

Inputs (environment): ``PINPOOL_STRESS_COPIES`` (default 2000), ``PINPOOL_STRESS_DELAY_US``
(the simulated per-task delay, default 50); ``TORCH_NPU_PINPOOL=0`` runs torch_npu's native
allocator. The stress tests also set ``SIMCANN_STRICT=0``. Needs the simulated runtime
(``source ci/sim-env.sh PAIR``)::

    PINPOOL_STRESS_COPIES=200 python test/stress/scenarios/r3_eager_race.py

Reports (``PINPOOL_RESULT:<json>``): ``h2d``, ``d2h``, ``wrong_h2d``, ``wrong_d2h``, pinned
bytes held at the start and the end (``base`` / ``end``, see ``stresslib.held``) and new
simulator ``violations``.
"""

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # stresslib

import torch
from stresslib import U8, env_int, held, report, sim, warm_up, wrong, wrong_host

N = env_int("PINPOOL_STRESS_COPIES", 2000)
sim.set_task_delay_us(env_int("PINPOOL_STRESS_DELAY_US", 50))
warm_up()
base = held()
v0 = sim.violations()
rng = random.Random(7)
sizes = [4096, 65536, 1 << 20]
ring = [torch.empty(1 << 20, dtype=U8, device="npu") for _ in range(16)]
stats = {"h2d": 0, "d2h": 0, "wrong_h2d": 0, "wrong_d2h": 0}
pending = []
for i in range(N):
    n = rng.choice(sizes)
    v = 1 + i % 250
    slot = ring[i % len(ring)][:n]
    if rng.random() < 0.7:
        # H2D from a pinned buffer freed immediately; the next owner scribbles over it
        h = torch.full((n,), v, dtype=U8).pin_memory()
        slot.copy_(h, non_blocking=True)
        del h
        bait = torch.empty(n, dtype=U8, pin_memory=True)
        bait.fill_(0xEE)
        del bait
        pending.append(("h2d", slot, v, None))
        stats["h2d"] += 1
    else:
        # D2H into a pinned buffer freed immediately; the next owner's bytes must survive
        h = torch.empty(n, dtype=U8, pin_memory=True)
        h.copy_(slot, non_blocking=True)
        del h
        mine = torch.empty(n, dtype=U8, pin_memory=True)
        mine.fill_(0x5A)
        pending.append(("d2h", None, 0x5A, mine))
        stats["d2h"] += 1
    if len(pending) == len(ring):
        torch.npu.synchronize()
        for kind, d, val, mine in pending:
            if kind == "h2d":
                stats["wrong_h2d"] += wrong(d, val)
            else:
                stats["wrong_d2h"] += wrong_host(mine, val)
        pending = []
torch.npu.synchronize()
for kind, d, val, mine in pending:
    if kind == "h2d":
        stats["wrong_h2d"] += wrong(d, val)
    else:
        stats["wrong_d2h"] += wrong_host(mine, val)
pending = []
sim.set_task_delay_us(0)
end = held()
report(dict(stats, base=base, end=end, violations=sim.violations() - v0))
