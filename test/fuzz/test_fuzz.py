"""Pytest entry of issue 47's differential fuzzer: a fixed seed budget, and the regression
programs (test/fuzz/regressions/*.json, one per finding of issue 47), each program run with the
plugin and natively in fresh processes and compared by compare.py's rules.

Marked ``simulator``: the pins and pinned-bytes checks read the simulated runtime's counters.
``PINPOOL_FUZZ_SEEDS`` (e.g. ``0-199``) widens the fixed budget for a longer run.

A regression program names the checks it is about (its ``"checks"``; runs, errors and bytes
are always checked). Each failed on the code before issue 47's allocator fix (the kept seeds
were found by this fuzzer there); so did the fixed budget, every program of it on torch >= 2.13
(the plugin wrote c10's pinned keys at activation, erasing the user's string).
"""

from __future__ import annotations

import glob
import json
import os

import pytest

from fuzz import compare, execute
from fuzz.cli import parse_seeds
from fuzz.program import Program, generate, show

pytestmark = pytest.mark.simulator

FIXED_SEEDS = "0-23"  # with the regressions ~1 minute per pair on 2 cores (fork server)
BUDGET = 24
BATCH = 12  # programs per process: 2 processes per mode for the fixed budget
REGRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions")


# Seeds the generator found issue 47's findings with (before the fix), kept: name -> (seed,
# the checks it is about). Changing program.py's generator changes what a seed means: re-find
# them then (python test/fuzz/cli.py --seeds 0-99 --ignore settings).
KEPT_SEEDS = {
    "seed48_three_large": (48, ["pinned_bytes"]),
    "seed14_hookless_graph_reset": (14, ["bytes_delivered"]),
    "seed5_late_activation": (5, ["settings", "device_oversize"]),
    "seed86_empty_cache_while_graph_held": (86, ["pinned_bytes"]),
    "seed1879_free_after_copy": (1879, ["pinned_bytes"]),
}

def _failures(programs: list[Program]) -> list[str]:
    out = []
    for group in execute.batches(programs, BATCH):
        for prog, (plugin, native, note) in zip(group, execute.run_pair(group)):
            verdict, fails = compare.compare(prog, plugin, native)
            if verdict == "FAIL":
                lines = "\n  ".join(str(f) for f in fails)
                out.append(f"seed {prog['seed']}:\n  {lines}\n{note}{show(prog)}")
    return out


def _regressions() -> dict[str, Program]:
    """The regression programs by name: regressions/*.json, then the kept seeds."""
    out = {}
    for path in sorted(glob.glob(os.path.join(REGRESSIONS, "*.json"))):
        with open(path) as f:
            out[os.path.basename(path)[: -len(".json")]] = json.load(f)
    for name, (seed, checks) in KEPT_SEEDS.items():
        out[name] = dict(generate(seed, BUDGET), checks=checks)
    return out


def _regression_params() -> list:
    return [pytest.param(name, id=name) for name in _regressions()]


# A regression program is about its own checks (its "checks"; the fixed budget checks
# everything): a fix of one finding flips its test whatever the others' state.
ALWAYS = ("run_completed", "errors_match", "bytes_delivered", "bytes_where_native_wrong")
_regression_failures: dict[str, list[str]] = {}


def _run_regressions() -> dict[str, list[str]]:
    """Every regression program, run once per session in as few process pairs as it takes
    (late-activation ones alone): each process costs a fork and an exit (~1 s)."""
    if not _regression_failures:
        named = _regressions()
        names = {id(p): name for name, p in named.items()}
        for group in execute.batches(list(named.values()), BATCH):
            for prog, (plugin, native, note) in zip(group, execute.run_pair(group)):
                _, fails = compare.compare(prog, plugin, native)
                fails = [f for f in fails if f.check in ALWAYS or f.check in prog["checks"]]
                lines = "\n  ".join(str(f) for f in fails)
                _regression_failures[names[id(prog)]] = (
                    [f"{prog['seed']}:\n  {lines}\n{note}"] if fails else []
                )
    return _regression_failures


@pytest.mark.parametrize("name", _regression_params())
def test_regression(name: str) -> None:
    failures = _run_regressions()[name]
    assert not failures, "\n\n".join(failures)


def test_fixed_seed_budget() -> None:
    seeds = parse_seeds(os.environ.get("PINPOOL_FUZZ_SEEDS", FIXED_SEEDS))
    failures = _failures([generate(s, BUDGET) for s in seeds])
    assert not failures, f"{len(failures)} of {len(seeds)} programs fail:\n\n" + "\n\n".join(
        failures
    )
