"""One worker process: one variant (harness/variants.py), every selected figure once.

    python bench/bench.py --worker VARIANT --config JSON

Prints one line ``BENCH_RESULT:{json}``: per figure what its measure() returned, per figure the
traceback if it raised (the others still run), and the simulator's violation count. Started by
harness/driver.py; the variant's environment is already set.
"""

from __future__ import annotations

import gc
import json
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

from figures import FIGURES

from . import simrt
from .variants import VARIANTS

TAG = "BENCH_RESULT:"


@dataclass
class Context:
    """What a figure's measure(ctx) gets."""

    cfg: dict  # the figure's settings (its SETTINGS, --quick's QUICK, --set overrides)
    sim: simrt.Sim  # the simulated runtime's control API (missing functions read None)
    variant: str


def _warm_up() -> None:
    """Lazy init (streams, events, device allocator) outside every figure, then move every
    object alive now to gc's permanent generation: a gc.collect() in a byte measurement then
    costs ~1 ms instead of ~200 ms and does not add noise to the loops."""
    import torch

    x = torch.ones(16, dtype=torch.uint8).pin_memory().to("npu", non_blocking=True)
    torch.npu.synchronize()
    del x
    gc.collect()
    gc.freeze()


def _run_figure(name: str, ctx: Context, res: dict) -> None:
    t0 = time.perf_counter()
    try:
        res["figures"][name] = FIGURES[name].measure(ctx)
    except Exception:  # noqa: BLE001  (reported; the other figures still run)
        res["errors"][name] = traceback.format_exc()[-3000:]
        try:
            import torch

            torch.npu.synchronize()
        except Exception:  # noqa: BLE001
            pass
    res["seconds"][name] = time.perf_counter() - t0
    gc.collect()


def main(variant: str, config: dict[str, Any]) -> None:
    t0 = time.perf_counter()
    res: dict[str, Any] = {"figures": {}, "errors": {}, "seconds": {}}
    res["info"] = simrt.setup(VARIANTS[variant].plugin)
    res["info"]["import_seconds"] = time.perf_counter() - t0
    sim = simrt.Sim()
    res["sim_api"] = sim.available
    _warm_up()
    for name in config["figures"]:
        _run_figure(name, Context(config["settings"][name], sim, variant), res)
    res["violations_api"] = sim.violations()
    sys.stdout.flush()
    print(TAG + json.dumps(res), flush=True)
