"""The fuzzer's command line: run seeds, print a table, shrink failures into reproducers.

    python test/fuzz/cli.py --seeds 0-49               # fixed budget; exit 1 on any failure
    python test/fuzz/cli.py --seeds 0-9999 --no-shrink --jobs 2 --record ci/results/fuzz
                                                       # long (nightly) mode, recorded
    python test/fuzz/cli.py --seed 7 --show            # print seed 7's program
    python test/fuzz/cli.py --program regressions/growing_33_63.json

Run it in a simulator env (``source ci/sim-env.sh PAIR``) with the plugin importable (installed,
or ``PYTHONPATH=`` an install target); ``python test/fuzz --seeds ...`` (the package's
``__main__``) is the same. ``--pair-env current`` is the only pair mode: the env this runs in
(one pair per invocation; run it once per ``source ci/sim-env.sh PAIR``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import subprocess
import sys
import time
from typing import Any

if __package__ in (None, ""):  # run by path: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz import compare, execute, shrink  # noqa: E402
from fuzz.program import Program, generate, show  # noqa: E402


def parse_seeds(text: str) -> list[int]:
    """``"0-99"``, ``"3,7,12"`` or a mix (``"0-9,42"``)."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            seeds += range(int(lo), int(hi) + 1)
        elif part:
            seeds.append(int(part))
    return seeds


def run_programs(
    programs: list[Program],
    batch: int = 8,
    time_bound_ms: float = compare.TIME_BOUND_MS,
    out=sys.stdout,
    ignore: tuple[str, ...] = (),
    jobs: int = 1,
) -> list[dict[str, Any]]:
    """Run and compare ``programs``; prints a table row per program as its batch ends.
    Returns rows: seed, verdict, failures (``compare.Failure``), note, program."""
    rows = []
    print(f"{'seed':>6}  {'theme':<8} {'verdict':<7} failing check", file=out, flush=True)
    for group in execute.batches(programs, batch):
        for prog, (p, n, note) in zip(group, execute.run_pair(group, jobs=jobs)):
            verdict, fails = compare.compare(prog, p, n, time_bound_ms)
            fails = [f for f in fails if f.check not in ignore]
            if verdict == "FAIL" and not fails:
                verdict = "pass"
            row = {"seed": prog.get("seed"), "verdict": verdict, "failures": fails,
                   "note": note, "program": prog}
            rows.append(row)
            first = compare.first_check(fails)
            detail = next((str(f) for f in fails if f.check == first), note.splitlines()[0]
                          if note else "")
            print(f"{str(prog.get('seed')):>6}  {prog.get('theme', ''):<8} {verdict:<7} "
                  f"{detail[:160]}", file=out, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="test/fuzz/cli.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0-49", help="e.g. 0-99 or 3,7,12 (default 0-49)")
    ap.add_argument("--seed", type=int, help="one seed")
    ap.add_argument("--program", action="append", default=[],
                    help="a program JSON file (repeatable) instead of seeds")
    ap.add_argument("--budget", type=int, default=24, help="steps per program (default 24)")
    ap.add_argument("--show", action="store_true", help="print the program(s) and exit")
    ap.add_argument("--batch", type=int, default=8, help="programs per process (default 8)")
    ap.add_argument("--jobs", type=int, default=1, choices=(1, 2),
                    help="2: a batch's plugin and native processes run at once (default 1)")
    ap.add_argument("--time-bound-ms", type=float, default=compare.TIME_BOUND_MS)
    ap.add_argument("--ignore", action="append", default=[], choices=compare.CHECKS,
                    help="leave a check out (repeatable), e.g. while its fix is pending")
    ap.add_argument("--no-shrink", action="store_true", help="report failures unshrunk")
    ap.add_argument("--shrink-max", type=int, default=3, help="failures to shrink (default 3)")
    ap.add_argument("--shrink-seconds", type=float, default=600.0)
    ap.add_argument("--out", default=None, help="reproducers' directory (build/fuzz)")
    ap.add_argument("--pair-env", default="current", choices=["current"],
                    help="the pair: the env this runs in")
    ap.add_argument("--json", help="write the rows (seed, verdict, failures) to this file")
    ap.add_argument("--record", metavar="DIR",
                    help="write the run's summary to DIR/fuzz-PAIR-SEEDS.json, the record "
                    "ci/render_results.py renders (ci/results/fuzz for the kept ones)")
    args = ap.parse_args(argv)

    if args.program:
        programs = []
        for path in args.program:
            with open(path) as f:
                programs.append(json.load(f))
    else:
        seeds = [args.seed] if args.seed is not None else parse_seeds(args.seeds)
        programs = [generate(s, args.budget) for s in seeds]
    if args.show:
        for p in programs:
            print(show(p))
            print()
        return 0

    commit = _commit()  # the code that runs (a long run outlives later commits)
    t0 = time.monotonic()
    rows = run_programs(programs, args.batch, args.time_bound_ms, ignore=tuple(args.ignore),
                        jobs=args.jobs)
    seconds = time.monotonic() - t0
    failed = [r for r in rows if r["verdict"] == "FAIL"]
    skipped = [r for r in rows if r["verdict"] == "skip"]
    print(f"{len(rows)} programs, {len(failed)} failed, {len(skipped)} skipped (native did not "
          f"complete) in {seconds:.0f} s "
          f"(torch_npu pair: {os.environ.get('PINPOOL_PAIR', '?')})")
    for r in failed:
        print(f"\nseed {r['seed']}: FAIL")
        for f in r["failures"]:
            print(f"  {f}")
    for r in failed[: 0 if args.no_shrink else args.shrink_max]:
        check = compare.first_check(r["failures"])
        print(f"\nshrinking seed {r['seed']} ({check}) ...", flush=True)
        small = shrink.shrink(r["program"], check, max_seconds=args.shrink_seconds,
                              time_bound_ms=args.time_bound_ms,
                              log=lambda s: print("  " + s, flush=True))
        message = next(str(f) for f in r["failures"] if f.check == check)
        path = shrink.write_reproducer(small, check, message, args.out)
        print(f"  reproducer ({len(small['steps'])} steps): {path}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"seed": r["seed"], "verdict": r["verdict"],
                        "failures": [str(x) for x in r["failures"]]} for r in rows], f, indent=1)
    if args.record:
        print(f"recorded: {record(args, argv, rows, seconds, commit)}")
    return 1 if failed else 0


def _commit() -> str:
    """The checkout's short commit, ``+changes`` when its tracked files differ from it."""
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()

    return (git("rev-parse", "--short", "HEAD") or "unknown") + (
        "+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def record(args: argparse.Namespace, argv: list[str] | None, rows: list[dict[str, Any]],
           seconds: float, commit: str) -> str:
    """Write the run's summary (``kind: fuzz``) into ``args.record``; returns its path."""
    pair = os.environ.get("PINPOOL_PAIR", "?")
    seeds = "programs" if args.program else args.seeds if args.seed is None else str(args.seed)
    summary = {
        "kind": "fuzz", "pair": pair, "torch": importlib.metadata.version("torch"),
        "torch_npu": importlib.metadata.version("torch_npu"), "seeds": seeds,
        "budget": args.budget, "programs": len(rows),
        "failed": sum(r["verdict"] == "FAIL" for r in rows),
        "skipped": sum(r["verdict"] == "skip" for r in rows),
        "failures": [f"{r['seed']}: {compare.first_check(r['failures'])}" for r in rows
                     if r["verdict"] == "FAIL"],
        "seconds": round(seconds), "commit": commit,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "command": "python test/fuzz/cli.py " + " ".join(sys.argv[1:] if argv is None else argv),
    }
    os.makedirs(args.record, exist_ok=True)
    path = os.path.join(args.record, f"fuzz-{pair}-{seeds.replace(',', '_')}.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
