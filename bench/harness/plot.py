"""The plot of one run: one panel per figure. A figure with a plot(ax, rows, runs) draws its own
panel; otherwise its rows that compare two variants are bars of the ratio of the medians, with
the paired per-trial ratios' q1..q3 as whiskers and the target as a dashed line.
"""

from __future__ import annotations

import math

from figures import FIGURES

from . import stats

COLORS = {stats.MEETS: "tab:green", stats.WITHIN: "tab:olive", stats.MISS: "tab:red"}


def ratio_panel(ax, name: str, fig: dict) -> bool:
    rows = [r for r in fig["rows"] if r.get("ratio") is not None]
    if not rows:
        return False
    ys = [r["ratio"] for r in rows]
    lo = [max(0.0, y - (r["paired"] or {"q1": y})["q1"]) for y, r in zip(ys, rows)]
    hi = [max(0.0, (r["paired"] or {"q3": y})["q3"] - y) for y, r in zip(ys, rows)]
    x = list(range(len(rows)))
    ax.bar(x, ys, yerr=[lo, hi], capsize=2,
           color=[COLORS.get(r.get("verdict"), "tab:gray") for r in rows])
    ax.axhline(1.0, color="k", lw=1, ls="--")
    ax.set_xticks(x)
    ax.set_xticklabels([r["label"][:28] for r in rows], rotation=75, fontsize=6)
    ax.set_ylabel(rows[0].get("vs", "ratio"), fontsize=8)
    top = max(y + h for y, h in zip(ys, hi))
    ax.set_ylim(0, min(4.0, max(1.3, top * 1.1)))
    return True


def plot(meta: dict, summary: dict, runs: dict, path: str) -> str | None:
    """Writes the PNG; returns why not (no matplotlib, nothing to plot) or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed"
    names = [n for n, f in summary.items()
             if hasattr(FIGURES[n], "plot") or any(r.get("ratio") is not None for r in f["rows"])]
    if not names:
        return "nothing to plot"
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        f = summary[name]
        custom = getattr(FIGURES[name], "plot", None)
        if custom is not None:
            custom(ax, f["rows"], runs[name])
        else:
            ratio_panel(ax, name, f)
        ax.set_title(f"{name} {f['title']}\n{f['target']}: {f['verdict'] or '-'}", fontsize=8)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle(f"torch_npu_pinpool vs native, pair {meta['pair']} (torch_npu "
                 f"{meta['torch_npu']}), simulated runtime, {meta['machine']['date_utc']}, "
                 f"{meta['trials']} trials", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None
