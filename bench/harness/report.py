"""What a run writes: the JSON (every sample, the summary, the machine and the command), the
text table, and the "Latest run" section of bench/README.md (per pair, from the JSON files in
bench/results/). Standard library only: `bench.py --readme` runs with any Python.
"""

from __future__ import annotations

import glob
import json
import os
import re

KiB, MiB = 1024, 1024 * 1024
README_BEGIN = "<!-- latest-run:begin (bench.py --readme writes this section) -->"
README_END = "<!-- latest-run:end -->"


def fmt_num(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    if unit == "B":
        for name, div in (("MiB", MiB), ("KiB", KiB)):
            if abs(x) >= div:
                return f"{x / div:.2f} {name}".replace(".00 ", " ")
        return f"{x:.0f} B"
    if unit == "x":
        return f"{x:.3f}"
    if abs(x) >= 100 or float(x).is_integer():
        return f"{x:,.0f} {unit}".rstrip()
    return f"{x:.2f} {unit}".rstrip()


def fmt_cell(cell: dict | None, unit: str) -> str:
    if not cell:
        return "-"
    if "values" in cell:
        vals = [v for v in cell["values"] if v is not None]
        if not vals:
            return "-"
        if all(v == vals[0] for v in vals):
            return fmt_num(vals[0], unit) + (f" (x{len(vals)})" if len(vals) > 1 else "")
        return f"{fmt_num(min(vals), unit)} .. {fmt_num(max(vals), unit)}"
    return f"{fmt_num(cell['median'], unit)} [{fmt_num(cell['q1'], '')}-{fmt_num(cell['q3'], '')}]"


def fmt_ratio(r: dict) -> str:
    if r.get("ratio") is None:
        return "-"
    p = r.get("paired")
    spread = f" ({p['q1']:.2f}..{p['q3']:.2f})" if p and p["n"] > 1 else ""
    return f"{r['ratio']:.3f}{spread}"


def _variants(fig: dict) -> list[str]:
    seen: list[str] = []
    for r in fig["rows"]:
        seen += [v for v in r["cells"] if v not in seen]
    return seen


def _own_trials(fig: dict, meta: dict) -> str:
    """The suffix ", N trials" when the figure ran in more trials than the run (its `trials`
    setting), else nothing."""
    n = fig.get("trials")
    return f", {n} trials" if n and n != meta["trials"] else ""


def figure_lines(name: str, fig: dict, meta: dict) -> list[str]:
    vs = _variants(fig)
    head = (f"{name} {fig['title']}{_own_trials(fig, meta)}  |  target: {fig['target']}  |  "
            f"{fig['verdict'] or '-'}")
    lines = [head, "   " + " | ".join([f"{'':<44}"] + [f"{v:>26}" for v in vs]
                                       + ["ratio (paired q1..q3)", "target", "verdict"])]
    for r in fig["rows"]:
        cells = [f"{fmt_cell(r['cells'].get(v), r['unit']):>26}" for v in vs]
        lines.append("   " + " | ".join([f"{r['label'][:44]:<44}"] + cells + [
            f"{fmt_ratio(r):>21}", f"{r.get('target') or '':<18}", r.get("verdict") or ""]))
    for e in fig["errors"]:
        lines.append(f"   ERROR in {e['variant']}: {e['tb'].strip().splitlines()[-1][:300]}")
    return lines


def table(meta: dict, summary: dict, health: dict) -> str:
    m = meta["machine"]
    out = [f"== torch_npu_pinpool bench, pair {meta['pair']}: torch {meta['torch']}, "
           f"torch_npu {meta['torch_npu']}, plugin {meta['plugin']} ({meta['plugin_source']})",
           f"   {m['date_utc']}, {m['nproc']} CPUs ({m['cpu']}), load average "
           f"{m['loadavg_before'][0]:.1f} before / {meta.get('loadavg_after', 0):.1f} after, "
           f"{meta['trials']} trials, {meta.get('total_seconds', 0):.0f} s"
           f"{', QUICK (too short for timing verdicts)' if meta['quick'] else ''}",
           f"   command: {meta['command']}",
           "   simulated runtime: timings are CPU cost (allocator + torch_npu + simulator)",
           "   cells: median [q1-q3] over every repetition of every trial, or each process's value",
           ""]
    out += [f"   {v}: {what}" for v, what in meta["variants"].items()] + [""]
    for name, fig in summary.items():
        out += figure_lines(name, fig, meta) + [""]
    viol = ", ".join(f"{v} {n}" for v, n in sorted(health["violation_lines"].items()))
    out.append(f"health: failed runs {len(health['failed_runs'])}, simulator violation lines: "
               f"{viol}")
    for e in health["failed_runs"]:
        out.append(f"   FAILED {e['variant']}: {e['why']}\n      {e['stderr'][-600:]}")
    return "\n".join(out) + "\n"


def write(stem: str, data: dict, text: str) -> None:
    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump(data, f, indent=1)
    with open(stem + ".txt", "w") as f:
        f.write(text)


# --- bench/README.md ----------------------------------------------------------------------------
def _md_pair(data: dict) -> list[str]:
    meta, m = data["meta"], data["meta"]["machine"]
    out = [f"### Pair {meta['pair']}: torch {meta['torch']}, torch_npu {meta['torch_npu']}", "",
           f"{m['date_utc']}; {m['nproc']} CPUs ({m['cpu']}); load average "
           f"{m['loadavg_before'][0]:.1f} before, {meta.get('loadavg_after', 0):.1f} after; "
           f"{meta['trials']} trials, {meta.get('total_seconds', 0) / 60:.1f} min; plugin "
           f"sources {meta['plugin_source']}. Command: `{meta['command']}`. Table: "
           f"[`results/{meta['pair']}.txt`](results/{meta['pair']}.txt), plot "
           f"[`results/{meta['pair']}.png`](results/{meta['pair']}.png).", "",
           "| figure | quantity | native | plugin | plugin/native (paired q1..q3) | target | "
           "verdict |", "|---|---|---|---|---|---|---|"]
    for name, fig in data["summary"].items():
        rows = [r for r in fig["rows"] if r.get("readme")] or fig["rows"][:1]
        for i, r in enumerate(rows):
            first = (f"**{name}** {fig['title']}{_own_trials(fig, meta)}: "
                     f"{fig['verdict'] or '-'}") if i == 0 else ""
            cells = [fmt_cell(r["cells"].get(v), r["unit"]) for v in ("native", "plugin")]
            out.append(f"| {first} | {r['label']} | {cells[0]} | {cells[1]} | {fmt_ratio(r)} | "
                       f"{r.get('target') or ''} | {r.get('verdict') or ''} |")
        if fig["errors"]:
            out.append(f"| | {len(fig['errors'])} worker error(s): see the table | | | | | MISS |")
    h = data["health"]
    out += ["", f"Failed worker processes: {len(h['failed_runs'])}; simulator violation lines: "
            + ", ".join(f"{v} {n}" for v, n in sorted(h["violation_lines"].items())) + ".", ""]
    return out


def readme_section(results_dir: str) -> str:
    files = sorted(glob.glob(os.path.join(results_dir, "*.json")), reverse=True)
    out = [README_BEGIN, ""]
    if not files:
        out.append("No full run in `bench/results/` yet: `bash bench/run.sh`.")
    for path in files:
        with open(path) as f:
            out += _md_pair(json.load(f))
    return "\n".join(out + [README_END])


def update_readme(readme: str, results_dir: str) -> None:
    with open(readme) as f:
        text = f.read()
    pattern = re.escape(README_BEGIN) + ".*?" + re.escape(README_END)
    if not re.search(pattern, text, flags=re.S):
        raise SystemExit(f"{readme}: no '{README_BEGIN}' ... '{README_END}' section to rewrite")
    text = re.sub(pattern, lambda _: readme_section(results_dir), text, flags=re.S)
    with open(readme, "w") as f:
        f.write(text)
