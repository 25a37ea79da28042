"""Spread and verdicts, written once for every figure.

A figure's worker returns, per process, ``samples`` (key -> timed repetitions) and ``values``
(key -> one number). ``Runs`` gives them back per variant and trial; the row builders turn
them into table rows: one per measured quantity, with each variant's cell, the ratio of the
medians against the baseline variant, the paired per-trial ratios, the target and a verdict.

Verdicts:
  meets          the target holds on the medians (or, for a check, on every trial's value)
  within spread  it misses on the medians, but the compared median lies inside the baseline's
                 inter-quartile range scaled by the target (lower is better: compared median
                 <= limit x baseline q3; higher is better: >= limit x baseline q1)
  MISS           otherwise
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any, Callable

MEETS, WITHIN, MISS = "meets", "within spread", "MISS"


def summ(xs: Iterable[float | None]) -> dict | None:
    """median, q1, q3, min, max, n of the numbers in xs (None skipped); None if empty."""
    ys = sorted(x for x in xs if x is not None)
    if not ys:
        return None
    q1, q3 = ys[0], ys[0]
    if len(ys) >= 2:
        q = statistics.quantiles(ys, n=4, method="inclusive")
        q1, q3 = q[0], q[2]
    return {"median": statistics.median(ys), "q1": q1, "q3": q3, "min": ys[0], "max": ys[-1],
            "n": len(ys)}


class Runs:
    """One figure's results over the trials: trials[i][variant] is that worker's figure dict
    (or None when the worker or the figure failed)."""

    def __init__(self, name: str, trials: list[dict]):
        self.name = name
        self.trials = [
            {v: ((r.get("figures") or {}).get(name) if r and "failed" not in r else None)
             for v, r in t.items()}
            for t in trials
        ]

    def variants(self) -> list[str]:
        seen: list[str] = []
        for t in self.trials:
            seen += [v for v in t if v not in seen]
        return seen

    def per_trial(self, kind: str, key: str, variant: str) -> list[Any]:
        """samples (lists) or values of `key` for `variant`, one entry per trial that has it."""
        out = []
        for t in self.trials:
            fig = t.get(variant)
            if fig and key in (fig.get(kind) or {}):
                out.append(fig[kind][key])
        return out

    def samples(self, key: str, variant: str) -> list[float]:
        return [x for xs in self.per_trial("samples", key, variant) for x in xs]

    def values(self, key: str, variant: str) -> list[Any]:
        return self.per_trial("values", key, variant)

    def paired(self, key: str, variant: str, base: str, kind: str = "samples",
               base_key: str | None = None) -> list[float]:
        """Per trial: median of `variant`'s key / median of `base`'s base_key (default: key) in
        the same trial."""
        out = []
        for t in self.trials:
            a, b = t.get(variant), t.get(base)
            xs = (a or {}).get(kind, {}).get(key)
            ys = (b or {}).get(kind, {}).get(base_key or key)
            if xs is None or ys is None:
                continue
            mx = statistics.median(xs) if isinstance(xs, list) else xs
            my = statistics.median(ys) if isinstance(ys, list) else ys
            if mx is not None and my:
                out.append(mx / my)
        return out

    def first(self, kind: str, key: str, variant: str) -> Any:
        xs = self.per_trial(kind, key, variant)
        return xs[0] if xs else None


def ratio_verdict(cmp: dict | None, base: dict | None, limit: float, better: str):
    """(ratio of medians, verdict) of cmp against base for a ratio target `limit`."""
    if not cmp or not base or not base["median"]:
        return None, None
    ratio = cmp["median"] / base["median"]
    if better == "lower":
        if ratio <= limit:
            return ratio, MEETS
        return ratio, WITHIN if cmp["median"] <= limit * base["q3"] else MISS
    if ratio >= limit:
        return ratio, MEETS
    return ratio, WITHIN if cmp["median"] >= limit * base["q1"] else MISS


def row(label: str, unit: str, cells: dict, **extra) -> dict:
    """A table row. cells: variant -> summary dict, or {"values": [...]} for per-process values."""
    r = {"label": label, "unit": unit, "cells": cells, "ratio": None, "paired": None,
         "target": None, "verdict": None, "readme": False}
    r.update(extra)
    return r


def timed_row(runs: Runs, key: str, label: str, unit: str, *, better: str = "lower",
              limit: float | None = None, vs: tuple[str, str] = ("plugin", "native"),
              kind: str = "samples", base_key: str | None = None, **extra) -> dict:
    """A row of a timed quantity: per-variant median [IQR] over every repetition of every
    trial (kind="values": over the trials' single values), and cmp / base = vs. With base_key,
    the base variant's cell is that quantity instead (a reference the baseline measures)."""
    def cell(k: str, v: str) -> dict | None:
        return summ(runs.samples(k, v) if kind == "samples" else runs.values(k, v))

    cmp, base = vs
    cells = {v: cell(base_key if base_key and v == base else key, v) for v in runs.variants()}
    ratio, verdict = ratio_verdict(cells.get(cmp), cells.get(base), limit or 1.0, better)
    target = None
    if limit is not None:
        target = f"{cmp}/{base} {'<=' if better == 'lower' else '>='} {limit:g}"
    else:
        verdict = None
    return row(label, unit, cells, ratio=ratio,
               paired=summ(runs.paired(key, cmp, base, kind, base_key)),
               vs=f"{cmp}/{base}", target=target, verdict=verdict, **extra)


def value_row(runs: Runs, key: str, label: str, unit: str, *,
              check: Callable[[Any], bool] | None = None, target: str | None = None,
              checked: str = "plugin", **extra) -> dict:
    """A row of a per-process value (bytes, counts): every trial's value per variant; with a
    check, meets when the check holds for every trial of the `checked` variant."""
    cells = {v: {"values": runs.values(key, v)} for v in runs.variants()}
    verdict = None
    vals = cells.get(checked, {}).get("values")
    if check is not None and vals:
        verdict = MEETS if all(x is not None and check(x) for x in vals) else MISS
    return row(label, unit, cells, target=target, verdict=verdict, **extra)


def at_most_native_row(runs: Runs, key: str, label: str, unit: str, slack: float = 0,
                       target: str = "plugin <= native", **extra) -> dict:
    """A value row whose check is: every plugin trial <= the least native trial + ``slack``."""
    native = [x for x in runs.values(key, "native") if x is not None]
    most = min(native) + slack if native else None
    check = None if most is None else (lambda x: x <= most)
    return value_row(runs, key, label, unit, check=check, target=target, **extra)


def worst(verdicts: Iterable[str | None]) -> str | None:
    """The figure's verdict: MISS if any row misses, else within spread if any is, else meets."""
    vs = [v for v in verdicts if v]
    for v in (MISS, WITHIN, MEETS):
        if v in vs:
            return v
    return None
