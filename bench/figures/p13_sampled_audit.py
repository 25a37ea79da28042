"""P13: what the audit costs on a serving step, sampled and in full: P5's decode loop
(p5_decode.make_step: a persistent pinned input rewritten and replayed, a per-step pinned
staging copy, a pinned D2H, a synchronize, a check) in steps/s (wall) and Python-thread CPU per
step, with the plugin alone, with the audit report sampled (TORCH_NPU_PINPOOL_REPORT_SAMPLE=N:
one copy / replay in N compared, csrc/audit/audit.cpp Note [Sampled checks]) and with the full
report. The audit variants also return how many copies / replays they compared and how many
hazards they saw (a correct loop: none).

Every variant runs the loop with one intra-op thread (timing.one_intra_op_thread): on a 2-CPU
machine the OpenMP pool's second thread, the simulator's stream worker and torch_npu's task
queue share one CPU, and the Python thread's spin at the pool's barrier (perf: 12-23% of its
samples in libgomp, differing from process to process) moves steps/s by more than the audit's
cost. The loop's one parallel op, the 64 KiB host copy, runs on the Python thread instead.
"""

from __future__ import annotations

import time

from harness import stats, timing

from . import p5_decode

NAME = "P13"
TITLE = "decode loop with the audit sampled / in full vs off"
TARGET = "sampled/plugin steps/s >= 0.98; full report: a figure"
VARIANTS = ("plugin", "sampled", "report")
SETTINGS = {"steps": 200, "bytes": 64 * 1024, "reps": 15, "warmup": 2000}
QUICK = {"steps": 50, "warmup": 200}


def measure(ctx) -> dict:
    import torch

    with timing.one_intra_op_thread(torch):
        return _measure(ctx, torch)


def _measure(ctx, torch) -> dict:
    step, g, wrong = p5_decode.make_step(torch, ctx.cfg["bytes"])
    for i in range(ctx.cfg["warmup"]):
        step(i)
    steps = ctx.cfg["steps"]
    sps, thread = [], []
    for _ in range(ctx.cfg["reps"]):
        t0, th0 = time.perf_counter(), time.thread_time()
        for i in range(steps):
            step(i)
        sps.append(steps / (time.perf_counter() - t0))
        thread.append((time.thread_time() - th0) / steps * 1e6)
    g.reset()
    values = {"wrong steps": wrong[0]}
    if ctx.variant != "plugin":
        import torch_npu_pinpool

        report = torch_npu_pinpool.report(wait=5.0)
        values["hazards"] = sum(h["count"] for h in report["hazards"])
        checks = torch_npu_pinpool._ext.report_checks()
        values["compared"] = checks["copies"] + checks["replays"]
    return {"samples": {"steps/s": sps, "thread cpu": thread}, "values": values}


def summarize(runs: stats.Runs) -> list[dict]:
    rows = [
        stats.timed_row(runs, "steps/s", "steps/s (wall), sampled audit", "steps/s",
                        better="higher", limit=0.98, vs=("sampled", "plugin"), readme=True),
        stats.timed_row(runs, "steps/s", "steps/s (wall), full audit", "steps/s",
                        better="higher", vs=("report", "plugin"), readme=True),
        stats.timed_row(runs, "thread cpu", "Python-thread CPU per step, sampled audit", "us",
                        vs=("sampled", "plugin")),
        stats.timed_row(runs, "thread cpu", "Python-thread CPU per step, full audit", "us",
                        vs=("report", "plugin")),
    ]
    for variant in ("sampled", "report"):
        rows.append(stats.value_row(runs, "hazards", f"hazards reported ({variant})", "",
                                    check=lambda x: x == 0, target=f"{variant} 0",
                                    checked=variant))
    rows.append(stats.value_row(runs, "compared", "copies + replays compared", ""))
    rows.append(stats.value_row(runs, "wrong steps", "steps whose output was wrong", "",
                                check=lambda x: x == 0, target="plugin 0"))
    return rows
