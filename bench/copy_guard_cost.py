"""Eager cost of the pageable copy guard (csrc/pageable_copy_guard.cpp): microseconds per copy_
call for pinned H2D / D2H (non_blocking) and D2D copies, in three modes side by side in one run:

    native   TORCH_NPU_PINPOOL=0              torch_npu alone
    noguard  TORCH_NPU_PINPOOL_COPY_GUARD=0   plugin, torch_npu's copy_ kernel left alone
    guard    (defaults)                       plugin with the guard in front of copy_

    python bench/copy_guard_cost.py [--trials T] [--pair 2.13] [--out DIR]

One worker process per mode and trial, the order rotated every trial. Each worker times REPEATS
runs of ITERS calls per copy (after 100 untimed calls; each run ends with a synchronize) and
reports every run's microseconds per call. The summary gives min / median / max over all runs of
all trials and the guard / native and guard / noguard ratios of the medians. Writes
DIR/copy-guard-PAIR.{json,txt}. A replay does not go through copy_ (it is one
aclmdlRIExecuteAsync), so the guard cannot cost replays anything.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "COPY_GUARD_RESULT:"
MODES = {
    "native": {"TORCH_NPU_PINPOOL": "0"},
    "noguard": {"TORCH_NPU_PINPOOL": "1", "TORCH_NPU_PINPOOL_COPY_GUARD": "0"},
    "guard": {"TORCH_NPU_PINPOOL": "1", "TORCH_NPU_PINPOOL_COPY_GUARD": "1"},
}
COPIES = ("h2d_non_blocking", "d2h_non_blocking", "d2d")


def time_us(fn: Callable[[], object], iters: int, repeats: int) -> list[float]:
    """Microseconds per call of each of `repeats` runs of `iters` calls."""
    import torch

    for _ in range(100):
        fn()
    torch.npu.synchronize()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.npu.synchronize()
        runs.append((time.perf_counter() - start) / iters * 1e6)
    return runs


def worker(iters: int, repeats: int, elems: int) -> None:
    import torch
    import torch_npu  # noqa: F401

    if os.environ.get("TORCH_NPU_PINPOOL") != "0":
        import torch_npu_pinpool

        assert torch_npu_pinpool.is_active(), "the plugin did not activate"
    torch.npu.set_device(0)
    torch.npu.set_stream(torch.npu.Stream())
    dev = torch.zeros(elems, device="npu")
    dev2 = torch.zeros(elems, device="npu")
    src = torch.ones(elems).pin_memory()
    dst = torch.zeros(elems).pin_memory()
    fns = {
        "h2d_non_blocking": lambda: dev.copy_(src, non_blocking=True),
        "d2h_non_blocking": lambda: dst.copy_(dev, non_blocking=True),
        "d2d": lambda: dev.copy_(dev2),
    }
    result = {name: time_us(fns[name], iters, repeats) for name in COPIES}
    result["versions"] = f"torch {torch.__version__} / torch_npu {torch_npu.__version__}"
    print(TAG + json.dumps(result), flush=True)


def run_worker(mode: str, a: argparse.Namespace) -> dict:
    env = dict(os.environ, **MODES[mode])
    cmd = [sys.executable, os.path.abspath(__file__), "--worker"]
    cmd += ["--iters", str(a.iters), "--repeats", str(a.repeats), "--elems", str(a.elems)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    for line in p.stdout.splitlines():
        if line.startswith(TAG):
            return json.loads(line[len(TAG) :])
    raise RuntimeError(f"{mode} worker exited {p.returncode}:\n{p.stderr[-3000:]}")


def summarize(trials: list[dict]) -> dict:
    S = {}
    for copy in COPIES:
        row = {}
        for mode in MODES:
            xs = [x for tr in trials for x in tr[mode][copy]]
            row[mode] = {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}
        row["guard/native"] = row["guard"]["median"] / row["native"]["median"]
        row["guard/noguard"] = row["guard"]["median"] / row["noguard"]["median"]
        S[copy] = row
    return S


def table(S: dict, meta: dict) -> str:
    lines = [f"# copy_ cost, pair {meta['pair']}: {meta['versions']}", f"# {meta['machine']}", ""]
    lines.append("us per call, min / median / max over every run of every trial")
    head = " | ".join(f"{m:>20}" for m in MODES)
    lines.append(f"{'copy':>16} | {head} | guard/native guard/noguard")
    for copy, r in S.items():
        cells = " | ".join(
            f"{r[m]['min']:6.2f}/{r[m]['median']:6.2f}/{r[m]['max']:6.2f}" for m in MODES
        )
        lines.append(f"{copy:>16} | {cells} | {r['guard/native']:12.3f} {r['guard/noguard']:13.3f}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--elems", type=int, default=256)
    ap.add_argument("--pair", default=os.environ.get("PINPOOL_PAIR", "?"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    if a.worker:
        worker(a.iters, a.repeats, a.elems)
        return
    load_before, t0 = os.getloadavg()[0], time.time()
    modes = list(MODES)
    trials = []
    for t in range(a.trials):
        order = modes[t % 3 :] + modes[: t % 3]
        trials.append({mode: run_worker(mode, a) for mode in order})
    S = summarize(trials)
    meta = {
        "pair": a.pair,
        "versions": trials[0]["native"]["versions"],
        "machine": (
            f"nproc {os.cpu_count()}, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC,"
            f" loadavg before {load_before:.1f} after {os.getloadavg()[0]:.1f},"
            f" {time.time() - t0:.0f} s, {a.trials} trials x {a.repeats} runs x {a.iters} calls"
        ),
        "command": " ".join(sys.argv),
    }
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, f"copy-guard-{a.pair}")
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "summary": S, "trials": trials}, f, indent=1)
    text = table(S, meta)
    with open(stem + ".txt", "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
