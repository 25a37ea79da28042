"""P6 (large pinned buffers: bytes pinned / bytes requested) and P7 (the eager fast path in C++).

    python bench/p6p7.py [--figures P6,P7] [--trials T] [--reps R] [--pair 2.13] [--out DIR]

Same method as bench/bench.py: native (TORCH_NPU_PINPOOL=0, plugin not imported) and plugin
worker processes alternated N P, P N, ... in one run. Writes bench/results/p6p7-PAIR.{json,txt}.

P7: bench/p7_fastpath.cpp, built once per environment with torch.utils.cpp_extension.load as a
plain shared library and called through ctypes (GIL released): per configuration, T threads
each run `iters` rounds of `at::getHostAllocator(kPrivateUse1)->allocate(size)` + DataPtr
destruction, one untimed warm-up round first (so every timed round reuses a cached block).
No Python in the timed loop. min / median / max of CPU ns per round over all repetitions of
all trials; ratio plugin / native of the medians (goal <= 1.05).

P6: one `torch.empty(n, dtype=uint8, pin_memory=True)` per size, after gc + synchronize +
host_empty_cache; pinned bytes = the simulator's live pinned bytes (simcann_host_bytes_live)
over the baseline, divided by n (goal <= 1.02 for the plugin). Sizes are the 1.5 / 3 / 5.1 /
20.4 GiB requests scaled by 1/64 (a power-of-two scale keeps the power-of-two rounding's
shape: 24 / 48 / 81.6 / 326.4 MiB pin 32 / 64 / 128 / 512 MiB when rounded). Also the time to
pin (the allocate call) and to free (`del` + host_empty_cache, back to the runtime).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import gc
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "P6P7_RESULT:"
KiB, MiB, GiB = 1024, 1024 * 1024, 1024**3

DEFAULTS = {
    "figures": ["P6", "P7"],
    "p7_sizes": [4 * KiB, 64 * KiB, MiB, 16 * MiB],
    "p7_threads": [1, 4],
    "p7_iters": 20000,
    "reps": 9,
    "p6_scale": 64,
    "p6_gib": [1.5, 3.0, 5.1, 20.4],
}


def build_p7() -> str:
    """Builds bench/p7_fastpath.cpp once per environment; returns the shared library's path."""
    from torch.utils import cpp_extension

    build = os.path.join(sys.prefix, "pinpool-bench-build")
    os.makedirs(build, exist_ok=True)
    cpp_extension.load(
        name="p7_fastpath",
        sources=[os.path.join(HERE, "p7_fastpath.cpp")],
        extra_cflags=["-O2"],
        build_directory=build,
        is_python_module=False,
        verbose=False,
    )
    return os.path.join(build, "p7_fastpath.so")


# --- worker --------------------------------------------------------------------------------------
def worker_p7(cfg, lib_path):
    lib = ctypes.CDLL(lib_path)  # ctypes.CDLL releases the GIL during the call
    lib.p7_run.restype = ctypes.c_int
    lib.p7_run.argtypes = [
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_double),
        ctypes.POINTER(ctypes.c_double),
    ]
    lib.p7_last_error.restype = ctypes.c_char_p
    out = []
    for size in cfg["p7_sizes"]:
        for threads in cfg["p7_threads"]:
            wall, cpu = ctypes.c_double(), ctypes.c_double()
            samples = []
            for rep in range(cfg["reps"] + 1):
                rc = lib.p7_run(
                    size, cfg["p7_iters"], threads, ctypes.byref(wall), ctypes.byref(cpu)
                )
                if rc != 0:
                    raise RuntimeError(lib.p7_last_error().decode())
                if rep > 0:  # the first call warms up every thread's cached block
                    samples.append({"wall_ns": wall.value, "cpu_ns": cpu.value})
            out.append({"size": size, "threads": threads, "samples": samples})
    return out


def worker_p6(cfg, sim):
    import simrt
    import torch

    out = []
    for gib in cfg["p6_gib"]:
        n = int(gib * GiB / cfg["p6_scale"])
        gc.collect()
        torch.npu.synchronize()
        simrt.host_empty_cache()
        base = sim.host_bytes_live()
        base_stats = simrt.host_stats()
        t0 = time.perf_counter()
        t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        t_pin = time.perf_counter() - t0
        live = sim.host_bytes_live() - base
        st = simrt.host_stats()
        pinned = bool(t.is_pinned())
        t0 = time.perf_counter()
        del t
        t_del = time.perf_counter() - t0
        simrt.host_empty_cache()
        t_free = time.perf_counter() - t0
        left = sim.host_bytes_live() - base
        key = "allocated_bytes.current"
        held = None
        if key in st and key in base_stats:
            held = st[key] - base_stats[key]
        out.append(
            {
                "gib_shape": gib,
                "requested": n,
                "sim_pinned": live,
                "ratio": live / n,
                "stats_held": held,
                "is_pinned": pinned,
                "pin_s": t_pin,
                "del_s": t_del,
                "free_to_runtime_s": t_free,
                "left_after_empty": left,
            }
        )
    return out


def worker(mode, cfg, lib_path):
    sys.path.insert(0, HERE)
    import simrt

    info = simrt.setup(mode)
    sim = simrt.Sim()
    res = {"info": info, "figures": {}}
    for fig in cfg["figures"]:
        try:
            if fig == "P7":
                res["figures"]["P7"] = worker_p7(cfg, lib_path)
            elif fig == "P6":
                res["figures"]["P6"] = worker_p6(cfg, sim)
        except Exception as e:  # noqa: BLE001  (report, keep the other figure)
            res["figures"][fig] = {"error": repr(e)}
    print(TAG + json.dumps(res), flush=True)


# --- driver --------------------------------------------------------------------------------------
def run_worker(mode, cfg, lib_path, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--config", json.dumps(cfg)]
    cmd += ["--lib", lib_path or ""]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    for line in p.stdout.splitlines():
        if line.startswith(TAG):
            return json.loads(line[len(TAG) :])
    return {"failed": f"exit {p.returncode}", "stderr": p.stderr[-3000:]}


def summarize(trials, cfg):
    S = {"P7": [], "P6": []}
    if "P7" in cfg["figures"]:
        for size in cfg["p7_sizes"]:
            for threads in cfg["p7_threads"]:
                row = {"size": size, "threads": threads}
                for mode in ("native", "plugin"):
                    xs, ws = [], []
                    for tr in trials:
                        fig = tr[mode].get("figures", {}).get("P7")
                        if not isinstance(fig, list):
                            continue
                        for c in fig:
                            if c["size"] == size and c["threads"] == threads:
                                xs += [s["cpu_ns"] for s in c["samples"]]
                                ws += [s["wall_ns"] for s in c["samples"]]
                    if xs:
                        row[mode] = {
                            "cpu_min": min(xs),
                            "cpu_median": statistics.median(xs),
                            "cpu_max": max(xs),
                            "wall_median": statistics.median(ws),
                            "n": len(xs),
                        }
                if "native" in row and "plugin" in row:
                    row["ratio_cpu_median"] = (
                        row["plugin"]["cpu_median"] / row["native"]["cpu_median"]
                    )
                    row["ratio_wall_median"] = (
                        row["plugin"]["wall_median"] / row["native"]["wall_median"]
                    )
                S["P7"].append(row)
    if "P6" in cfg["figures"]:
        for i, gib in enumerate(cfg["p6_gib"]):
            row = {"gib_shape": gib}
            for mode in ("native", "plugin"):
                rs = []
                for tr in trials:
                    fig = tr[mode].get("figures", {}).get("P6")
                    if isinstance(fig, list) and i < len(fig):
                        rs.append(fig[i])
                if rs:
                    row[mode] = {
                        "requested": rs[0]["requested"],
                        "ratio_max": max(r["ratio"] for r in rs),
                        "ratio_min": min(r["ratio"] for r in rs),
                        "stats_held": [r["stats_held"] for r in rs],
                        "is_pinned": all(r["is_pinned"] for r in rs),
                        "pin_ms_median": 1e3 * statistics.median(r["pin_s"] for r in rs),
                        "free_ms_median": 1e3
                        * statistics.median(r["free_to_runtime_s"] for r in rs),
                        "left_after_empty": max(r["left_after_empty"] for r in rs),
                    }
            S["P6"].append(row)
    return S


def fmt_size(b):
    if b >= MiB:
        return f"{b / MiB:g} MiB"
    return f"{b / KiB:g} KiB"


def table(S, meta):
    lines = [
        f"# P6 / P7, pair {meta['pair']}: {meta['versions']}",
        f"# machine: {meta['machine']}",
        "",
    ]
    if S["P7"]:
        lines.append(
            "P7: allocate + free of a cached block, C++ loop, CPU ns per round (min / median / max)"
        )
        lines.append(
            f"{'size':>9} {'thr':>3} | {'native min/med/max':>24} | {'plugin min/med/max':>24} |"
            f" {'ratio cpu':>9} {'ratio wall':>10}"
        )
        for r in S["P7"]:
            if "native" not in r or "plugin" not in r:
                lines.append(f"{fmt_size(r['size']):>9} {r['threads']:>3} | missing")
                continue

            def c(m):
                return f"{m['cpu_min']:.0f} / {m['cpu_median']:.0f} / {m['cpu_max']:.0f}"

            lines.append(
                f"{fmt_size(r['size']):>9} {r['threads']:>3} | {c(r['native']):>24} |"
                f" {c(r['plugin']):>24} | {r['ratio_cpu_median']:>9.3f}"
                f" {r['ratio_wall_median']:>10.3f}"
            )
        lines.append("")
    if S["P6"]:
        lines.append(
            "P6: one large pinned buffer; simulator live bytes / requested (max over trials)"
        )
        lines.append(
            f"{'shape':>8} {'requested':>12} | {'native':>6} {'pin ms':>7} {'free ms':>8} |"
            f" {'plugin':>6} {'pin ms':>7} {'free ms':>8}"
        )
        for r in S["P6"]:
            if "native" not in r or "plugin" not in r:
                lines.append(f"{r['gib_shape']:>6} G | missing")
                continue
            n, p = r["native"], r["plugin"]
            lines.append(
                f"{r['gib_shape']:>6}GiB {fmt_size(n['requested']):>12} | {n['ratio_max']:>6.3f}"
                f" {n['pin_ms_median']:>7.2f} {n['free_ms_median']:>8.2f} | {p['ratio_max']:>6.3f}"
                f" {p['pin_ms_median']:>7.2f} {p['free_ms_median']:>8.2f}"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--worker", choices=["native", "plugin"])
    ap.add_argument("--config", default="{}")
    ap.add_argument("--lib", default="")
    ap.add_argument("--figures", default=None)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--pair", default=os.environ.get("PINPOOL_PAIR", "?"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    cfg = dict(DEFAULTS)
    cfg.update(json.loads(a.config))
    if a.worker:
        worker(a.worker, cfg, a.lib)
        return
    if a.figures:
        cfg["figures"] = a.figures.split(",")
    if a.reps:
        cfg["reps"] = a.reps
    lib = build_p7() if "P7" in cfg["figures"] else ""
    load_before = os.getloadavg()
    t0 = time.time()
    trials = []
    for t in range(a.trials):
        order = ("native", "plugin") if t % 2 == 0 else ("plugin", "native")
        tr = {}
        for mode in order:
            tr[mode] = run_worker(mode, cfg, lib, a.timeout)
            if "failed" in tr[mode]:
                print(f"worker {mode} failed: {tr[mode]}", file=sys.stderr)
        trials.append(tr)
    S = summarize(trials, cfg)
    versions = next((tr[m]["info"] for tr in trials for m in tr if "info" in tr[m]), {})
    meta = {
        "pair": a.pair,
        "versions": f"torch {versions.get('torch')} / torch_npu {versions.get('torch_npu')}",
        "machine": (
            f"nproc {os.cpu_count()}, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC,"
            f" loadavg before {load_before[0]:.1f} after {os.getloadavg()[0]:.1f},"
            f" {time.time() - t0:.0f} s, {a.trials} trials x {cfg['reps']} reps"
        ),
        "command": " ".join(sys.argv),
        "config": cfg,
    }
    txt = table(S, meta)
    print(txt)
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, f"p6p7-{a.pair}")
    with open(stem + ".txt", "w") as f:
        f.write(txt)
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "summary": S, "trials": trials}, f, indent=1)
    failed = any("failed" in tr[m] for tr in trials for m in tr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
