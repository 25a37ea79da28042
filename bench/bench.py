"""torch_npu_pinpool against torch_npu's own pinned host allocator, every figure (P1 - P9) of
bench/README.md, on the simulated CANN runtime, for the torch / torch_npu pair installed in
this interpreter's environment (`source ci/sim-env.sh PAIR`, plugin installed):

    python bench/bench.py                        # every figure -> bench/results/PAIR.*
    python bench/bench.py --quick                # smoke test, -> bench/results/scratch/
    python bench/bench.py --figures P5,P9 [--trials 10] [--set P9.graphs=[10,100]]
    python bench/bench.py --from-json FILE.json  # re-summarize, rewrite .txt / .png
    python bench/bench.py --readme               # rewrite bench/README.md's "Latest run"

A full run (every figure, not --quick, default --out) writes bench/results/PAIR.json (every
sample, the summary, the machine, the command), .txt (the table) and .png (the plot); any
other run writes to bench/results/scratch/. Exit status 1 if a worker or a figure failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--figures", help="comma list, e.g. P5,P9 (default: all)")
    ap.add_argument("--quick", action="store_true", help="smoke test: few trials, small sizes")
    ap.add_argument("--trials", type=int, help="processes per variant (default 6, quick 2)")
    ap.add_argument("--reps", type=int, help="timed repetitions per process (= --set reps=N)")
    ap.add_argument("--set", action="append", default=[], metavar="[FIG.]KEY=JSON",
                    help="override a setting of every figure (KEY) or of one (P5.steps=100)")
    ap.add_argument("--pair", default=os.environ.get("PINPOOL_PAIR"))
    ap.add_argument("--out", help="output directory (default: see above)")
    ap.add_argument("--timeout", type=float, default=900, help="per worker process, seconds")
    ap.add_argument("--from-json", help="re-summarize a previous run's JSON (no measurement)")
    ap.add_argument("--readme", action="store_true", help="rewrite bench/README.md's results")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    return ap.parse_args()


def finish(data: dict, stem: str) -> int:
    """Summary, table, plot and JSON of the trials in data; prints the table."""
    from figures import FIGURES
    from harness import driver, plot, report, stats

    names = data["meta"]["figures"]
    data["summary"] = driver.summarize(names, data["trials"])
    data["health"] = driver.health(data["trials"])
    text = report.table(data["meta"], data["summary"], data["health"])
    report.write(stem, data, text)
    print(text)
    runs = {n: stats.Runs(n, data["trials"]) for n in names if n in FIGURES}
    why = plot.plot(data["meta"], data["summary"], runs, stem + ".png")
    print(f"wrote {stem}.json, {stem}.txt" + (f" (no plot: {why})" if why else f", {stem}.png"))
    bad = data["health"]["failed_runs"] or any(f["errors"] for f in data["summary"].values())
    return 1 if bad else 0


def measure(a: argparse.Namespace) -> int:
    from figures import FIGURES
    from harness import driver

    names = a.figures.split(",") if a.figures else list(FIGURES)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        sys.exit(f"bench.py: unknown figure(s) {unknown}; known: {', '.join(FIGURES)}")
    sets = driver.settings(names, a.quick, a.set + ([f"reps={a.reps}"] if a.reps else []))
    for n in names:
        prepare = getattr(FIGURES[n], "prepare", None)
        if prepare is not None:
            sets[n] = prepare(sets[n])
    trials = a.trials or (2 if a.quick else 6)
    meta = driver.meta(a.pair, names, sets, trials, a.quick)
    t0 = time.perf_counter()
    data = {"meta": meta, "trials": driver.run_trials(names, sets, trials, a.timeout, meta["pair"])}
    meta["total_seconds"] = time.perf_counter() - t0
    meta["loadavg_after"] = os.getloadavg()[0]
    full = not a.quick and not a.figures
    out = a.out or os.path.join(HERE, "results", "" if full else "scratch")
    suffix = "" if full else "-" + ("quick" if a.quick else "_".join(names))
    return finish(data, os.path.join(out, meta["pair"] + suffix))


def main() -> int:
    sys.path.insert(0, HERE)
    a = _args()
    if a.worker:
        from harness import worker

        worker.main(a.worker, json.loads(a.config))
        return 0
    if a.readme:
        from harness import report

        report.update_readme(os.path.join(HERE, "README.md"), os.path.join(HERE, "results"))
        return 0
    if a.from_json:
        with open(a.from_json) as f:
            data = json.load(f)
        return finish(data, a.from_json[: -len(".json")])
    return measure(a)


if __name__ == "__main__":
    sys.exit(main())
