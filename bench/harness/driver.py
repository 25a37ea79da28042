"""The driver: settings, worker processes alternated over trials, the summary, the outputs.

Per trial it starts one worker per variant the selected figures need (harness/variants.py),
in an order rotated every trial (N P, P N, ... for two variants), so every variant sees the
same machine state; each worker runs every selected figure that lists its variant. A figure
whose settings ask for more processes (``trials``: its spread is between processes, not
within one) runs alone in the extra trials.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

from figures import COMMON, COMMON_QUICK, FIGURES

from . import stats
from .variants import VARIANTS
from .worker import TAG

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def settings(names: list[str], quick: bool, overrides: list[str]) -> dict[str, dict]:
    """Per figure: COMMON, its SETTINGS, with --quick COMMON_QUICK and its QUICK, then the
    --set overrides (KEY=JSON for every figure, FIG.KEY=JSON for one)."""
    out = {}
    for name in names:
        fig = FIGURES[name]
        s = {**COMMON, **fig.SETTINGS}
        if quick:
            s.update({**COMMON_QUICK, **getattr(fig, "QUICK", {})})
        out[name] = s
    for kv in overrides:
        key, _, value = kv.partition("=")
        fig, _, key = key.rpartition(".")
        for name in names if not fig else [fig]:
            if name in out:
                out[name][key] = json.loads(value)
    return out


def variants_of(names: list[str]) -> list[str]:
    """The variants the figures need, in VARIANTS order (the baseline first)."""
    wanted = {v for n in names for v in FIGURES[n].VARIANTS}
    return [v for v in VARIANTS if v in wanted]


def run_worker(variant: str, names: list[str], sets: dict, timeout: float) -> dict:
    figs = [n for n in names if variant in FIGURES[n].VARIANTS]
    config = {"figures": figs, "settings": {n: sets[n] for n in figs}}
    cmd = [sys.executable, os.path.join(BENCH, "bench.py"), "--worker", variant,
           "--config", json.dumps(config)]
    env = dict(os.environ, **VARIANTS[variant].env)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        return {"failed": f"timeout after {timeout:.0f} s", "stderr": str(e.stderr)[-3000:]}
    res = None
    for line in p.stdout.splitlines():
        if line.startswith(TAG):
            res = json.loads(line[len(TAG):])
    if res is None:
        return {"failed": f"exit {p.returncode}, no result", "stderr": p.stderr[-4000:]}
    viol = [ln for ln in p.stderr.splitlines() if "SIMCANN VIOLATION" in ln]
    res.update(returncode=p.returncode, wall_seconds=time.perf_counter() - t0,
               violation_lines=len(viol), violation_examples=viol[:5])
    return res


def trials_of(name: str, sets: dict, trials: int) -> int:
    """Processes per variant for one figure: the run's, or more if its settings ask."""
    return max(trials, int(sets[name].get("trials") or 0))


def run_trials(names: list[str], sets: dict, trials: int, timeout: float, tag: str) -> list:
    total = max(trials_of(n, sets, trials) for n in names)
    out = []
    for t in range(total):
        these = [n for n in names if t < trials_of(n, sets, trials)]
        variants = variants_of(these)
        k = t % len(variants)
        trial = {}
        for v in variants[k:] + variants[:k]:
            trial[v] = run_worker(v, these, sets, timeout)
            status = trial[v].get("failed") or f"ok {trial[v]['wall_seconds']:.1f} s"
            print(f"[bench {tag}] trial {t + 1}/{total} {v} ({','.join(these)}): {status}",
                  file=sys.stderr, flush=True)
        out.append(trial)
    return out


def machine() -> dict:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                       "?")
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "host": platform.node(), "loadavg_before": list(os.getloadavg()),
            "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def _version(pkg: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


def _plugin_source() -> str | None:
    """The commit of this checkout (the plugin is installed from it by bench/run.sh)."""
    try:
        head = subprocess.run(["git", "-C", BENCH, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", BENCH, "status", "--porcelain", "--", "../csrc",
                                "../torch_npu_pinpool"], capture_output=True, text=True).stdout
        return head + ("+local changes" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def meta(pair: str | None, names: list[str], sets: dict, trials: int, quick: bool) -> dict:
    npu = _version("torch_npu")
    return {"pair": pair or (npu or "?").rsplit(".", 1)[0], "torch": _version("torch"),
            "torch_npu": npu, "plugin": _version("torch_npu_pinpool"),
            "plugin_source": _plugin_source(), "machine": machine(), "trials": trials,
            "quick": quick, "figures": names, "settings": sets,
            "variants": {v: VARIANTS[v].what for v in variants_of(names)},
            "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
            "simcann_lib_dir": os.environ.get("SIMCANN_LIB_DIR")}


def summarize(names: list[str], trials: list) -> dict[str, Any]:
    """Per figure: title, target, rows, its verdict and the errors its workers reported."""
    out: dict[str, Any] = {}
    for name in names:
        fig = FIGURES[name]
        rows = fig.summarize(stats.Runs(name, trials))
        errors = [{"variant": v, "tb": r["errors"][name][-1500:]} for t in trials
                  for v, r in t.items() if name in (r.get("errors") or {})]
        ran = sum(any(name in (r.get("figures") or {}) for r in t.values()) for t in trials)
        out[name] = {"title": fig.TITLE, "target": fig.TARGET, "rows": rows, "errors": errors,
                     "verdict": stats.worst(r["verdict"] for r in rows), "trials": ran}
    return out


def health(trials: list) -> dict:
    runs = [(v, r) for t in trials for v, r in t.items()]
    return {
        "failed_runs": [{"variant": v, "why": r["failed"], "stderr": r.get("stderr", "")[-1500:]}
                        for v, r in runs if "failed" in r],
        "violation_lines": {v: sum(r.get("violation_lines", 0) for w, r in runs if w == v)
                            for v in {v for v, _ in runs}},
        "violation_examples": [x for _, r in runs for x in r.get("violation_examples", [])][:10],
    }
