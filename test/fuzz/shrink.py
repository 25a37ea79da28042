"""Shrinking a failing program (delta debugging) and writing its standalone reproducer.

``shrink(program, check)`` removes what the failure does not need while the same check still
fails: every step of one tensor or graph at once, then chunks of steps (halves, quarters, ...
down to single steps), then smaller sizes below 32 MiB and a zero task delay. Candidates of a
round run as one batch per mode (one process pair, see execute.py), the smallest that still
fails is kept; the result is confirmed alone in a fresh process pair (a batch's earlier programs
could have shaped a later one's result) - if it does not fail alone, the last program that did
is returned. ``write_reproducer`` writes build/fuzz/repro_<seed>_<check>.py: it runs the program
with the plugin and natively (each in a fresh process, through runner.py) and prints the
difference step by step; exit 1 while the check fails.
"""

from __future__ import annotations

import copy
import json
import os
import time
from typing import Callable

try:
    from fuzz import compare, execute
    from fuzz.program import THRESHOLD, MiB, Program, show, validate
except ImportError:  # run from inside test/fuzz
    import compare  # type: ignore[no-redef]
    import execute  # type: ignore[no-redef]
    from program import THRESHOLD, MiB, Program, show, validate  # type: ignore[no-redef]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
Evaluate = Callable[[list[Program]], list[bool]]


def still_fails(check: str, time_bound_ms: float = compare.TIME_BOUND_MS) -> Evaluate:
    """An evaluator: runs candidates (one process pair) and says which still fail ``check``."""

    def evaluate(candidates: list[Program]) -> list[bool]:
        verdict: dict[int, bool] = {}
        for group in execute.batches(candidates, 16):
            for prog, (p, n, _) in zip(group, execute.run_pair(group)):
                _, fails = compare.compare(prog, p, n, time_bound_ms)
                verdict[id(prog)] = any(f.check == check for f in fails)
        return [verdict[id(c)] for c in candidates]

    return evaluate


def _with_steps(program: Program, steps: list[dict]) -> Program:
    p = dict(program)
    p["steps"] = steps
    return p


def _names(step: dict) -> set[str]:
    names = {step[k] for k in ("id", "gid") if k in step}
    if step.get("src", "inside") != "inside":
        names.add(step["src"])
    return names


def candidates(program: Program) -> list[Program]:
    """Smaller variants of ``program`` that are still valid programs, most aggressive first."""
    steps = program["steps"]
    out: list[Program] = []
    seen: set[str] = set()

    def add(new_steps: list[dict], header: dict | None = None) -> None:
        cand = _with_steps(program, new_steps)
        if header:
            cand.update(header)
        key = json.dumps(cand, sort_keys=True)
        if key not in seen and key != json.dumps(program, sort_keys=True) and validate(cand):
            seen.add(key)
            out.append(cand)

    # chunks: halves, quarters, ... (ddmin's complements)
    n = len(steps)
    chunk = n // 2
    while chunk >= 1:
        for start in range(0, n, chunk):
            add(steps[:start] + steps[start + chunk :])
        chunk //= 2
    # every step of one tensor / graph (a capture reading an eager tensor goes with it)
    names = sorted({name for s in steps for name in _names(s)})
    for name in names:
        gids = {s["gid"] for s in steps if s["op"] == "capture" and s.get("src") == name}
        drop = {name} | gids
        add([s for s in steps if not (_names(s) & drop)])
    # smaller sizes (below the large-block threshold: sizes above it are the point)
    for i, s in enumerate(steps):
        nb = s.get("nbytes")
        if nb and 4096 < nb < THRESHOLD:
            for smaller in (4096, nb // 2 // 4096 * 4096):
                if 4096 <= smaller < nb:
                    new = copy.deepcopy(steps)
                    new[i]["nbytes"] = smaller
                    add(new)
    if program.get("delay_us"):
        add(list(steps), {"delay_us": 0})
    return out


def shrink(
    program: Program,
    check: str,
    evaluate: Evaluate | None = None,
    max_seconds: float = 900.0,
    per_round: int = 24,
    log: Callable[[str], None] = lambda s: None,
    time_bound_ms: float = compare.TIME_BOUND_MS,
) -> Program:
    """The smallest program found in ``max_seconds`` that still fails ``check``."""
    evaluate = evaluate or still_fails(check, time_bound_ms)
    best = program
    deadline = time.monotonic() + max_seconds
    while time.monotonic() < deadline:
        cands = candidates(best)
        if not cands:
            break
        improved = False
        for start in range(0, len(cands), per_round):
            group = cands[start : start + per_round]
            verdicts = evaluate(group)
            failing = [c for c, bad in zip(group, verdicts) if bad]
            if failing:
                best = min(failing, key=lambda c: (len(c["steps"]), _bytes(c)))
                log(f"shrink: {len(best['steps'])} steps")
                improved = True
                break
            if time.monotonic() >= deadline:
                break
        if not improved:
            break
    if best is not program and not evaluate([best])[0]:
        log("shrink: the shrunk program does not fail alone; keeping the original")
        return program
    return best


def _bytes(program: Program) -> int:
    return sum(s.get("nbytes", 0) for s in program["steps"])


REPRO = '''#!/usr/bin/env python
"""Reproducer written by test/fuzz (issue 47's differential fuzzer).

Seed @SEED@, check @CHECK@: @MESSAGE@

Runs the program below with the plugin and natively (TORCH_NPU_PINPOOL=0), each in its own
process through test/fuzz/runner.py (PINPOOL_FUZZ_FORK=0: a fresh interpreter, not a child of
the fork server), and prints the difference; exit 1 while it fails.
Run it in a simulator env with the plugin importable, from anywhere:

    source ci/sim-env.sh PAIR && python @PATH@

The program (@NSTEPS@ steps; test/fuzz/program.py says what each step does):

@LISTING@
"""

import json
import os
import sys

REPO = @REPO@
PROGRAM = json.loads(@PROGRAM@)
CHECK = @CHECKREPR@

sys.path.insert(0, os.path.join(REPO, "test"))
from fuzz import compare, execute  # noqa: E402

plugin, native, note = execute.run_pair([PROGRAM])[0]
verdict, failures = compare.compare(PROGRAM, plugin, native)
if note:
    print(note)
if plugin and native:
    print("step  op           pins plugin / native   MiB pinned plugin / native")
    for i, (p, n) in enumerate(zip(plugin["steps"], native["steps"])):
        line = "%4d  %-12s %8d / %-8d %12.1f / %-10.1f" % (
            i, p["op"], p["pins"], n["pins"], p["bytes"] / 2**20, n["bytes"] / 2**20)
        for who, obs in (("plugin", p), ("native", n)):
            if "err" in obs:
                line += "  %s error %s" % (who, obs["err"])
        print(line)
    for p, n in zip(plugin["copies"], native["copies"]):
        if p["got"] != [p["expect"]] or n["got"] != [n["expect"]]:
            print("copy at step %d (%s): written %d, plugin delivered %s, native %s"
                  % (p["step"], p["what"], p["expect"], p["got"], n["got"]))
print("verdict:", verdict)
for f in failures:
    print("  ", f)
sys.exit(1 if any(f.check == CHECK for f in failures) else 0)
'''


def write_reproducer(
    program: Program, check: str, message: str, out_dir: str | None = None
) -> str:
    """Write the reproducer script (and the program as JSON beside it); returns its path."""
    out_dir = out_dir or os.path.join(REPO, "build", "fuzz")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"repro_{program.get('seed', 'x')}_{check}.py")
    with open(path[: -len(".py")] + ".json", "w") as f:
        json.dump(program, f, indent=1)
    listing = "\n".join("    " + line for line in show(program).splitlines())
    text = REPRO
    for key, value in (
        ("@SEED@", str(program.get("seed"))),
        ("@CHECKREPR@", repr(check)),
        ("@CHECK@", check),
        ("@MESSAGE@", message.replace('"""', "'''").replace("\\", "/")),
        ("@PATH@", os.path.relpath(path, REPO)),
        ("@NSTEPS@", str(len(program["steps"]))),
        ("@LISTING@", listing),
        ("@REPO@", repr(REPO)),
        ("@PROGRAM@", repr(json.dumps(program))),
    ):
        text = text.replace(key, value)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


__all__ = ["shrink", "still_fails", "candidates", "write_reproducer", "MiB"]
