"""Render the performance lines of README.md and docs/ from the committed bench results
(``bench/results/PAIR.json``, written by ``bash bench/run.sh``), so no figure is written by hand.

    python ci/render_bench_lines.py          # rewrite every generated block
    python ci/render_bench_lines.py --check  # exit 1 if a committed block differs

A generated block sits between ``<!-- bench:NAME:begin ... -->`` and ``<!-- bench:NAME:end -->``
in the page ``BLOCKS`` names; the text in between is this script's, from the latest full run of
each pair. ``test/ci/test_render_bench_lines.py`` fails when a committed block differs from what
this renders, and when a page has a timing or ratio outside a block. bench/README.md's own
"Latest run" section is ``bench/bench.py --readme``'s (the same test checks it). Plain Python,
no third-party imports.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PAIRS = ("2.14", "2.10")  # the required pairs, newest first (ci/lib/pairs.sh)


def _report_module() -> Any:
    """bench/harness/report.py (standard library only): the number formats of the bench tables."""
    spec = importlib.util.spec_from_file_location(
        "pinpool_bench_report", REPO / "bench" / "harness" / "report.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _report_module()


def load(pair: str, results: Path = RESULTS) -> dict[str, Any]:
    path = results / f"{pair}.json"
    if not path.exists():
        raise SystemExit(f"render_bench_lines: {path} is missing; run `bash bench/run.sh`.")
    return json.loads(path.read_text())


def _row(data: dict[str, Any], figure: str, label_start: str) -> dict[str, Any]:
    for r in data["summary"][figure]["rows"]:
        if r["label"].startswith(label_start):
            return r
    raise SystemExit(
        f"render_bench_lines: {data['meta']['pair']}'s {figure} has no row '{label_start}...'; "
        "update ci/render_bench_lines.py to the figure's rows."
    )


def _value(r: dict[str, Any], variant: str) -> str:
    return report.fmt_cell(r["cells"].get(variant), r["unit"]).split(" (x")[0]


def _median(r: dict[str, Any], variant: str) -> str:
    return report.fmt_num(r["cells"][variant]["median"], "").strip()


def _why_not(r: dict[str, Any]) -> str:
    """A row whose target does not apply on this torch says why (" (n/a: ...)")."""
    target = r.get("target") or ""
    return f" ({target})" if target.startswith("n/a") else ""


def readme_performance(results: Path = RESULTS) -> list[str]:
    """README.md's Performance table, a column per required pair: bytes held over capture cycles
    and what replays read (P3), one huge request (P6), a graphed decode loop (P5)."""
    runs = [load(pair, results) for pair in PAIRS]
    head = " | ".join(
        f"torch_npu {d['meta']['torch_npu']}, {d['meta']['machine']['date_utc'][:10]}" for d in runs
    )
    cells: dict[str, list[str]] = {}
    for data in runs:
        settings = data["meta"]["settings"]
        growth = _row(data, "P3", "separate graphs: growth")
        wrong = _row(data, "P3", "separate: wrong bytes")
        huge = [r for r in data["summary"]["P6"]["rows"] if r["unit"] == "x"][-1]
        decode = _row(data, "P5", "steps/s")
        paired = decode["paired"]
        rows = {
            f"{settings['P3']['cycles']} capture / replay / reset cycles: growth of pinned memory "
            "held; wrong bytes read by replays": (
                f"{_value(growth, 'native')} -> {_value(growth, 'plugin')}; "
                f"{_value(wrong, 'native')} -> {_value(wrong, 'plugin')}"
            ),
            f"a {huge['label'].split(' / ')[0]} request (scaled down {settings['P6']['scale']} "
            "times): bytes pinned / requested": (
                f"{_value(huge, 'native')} -> {_value(huge, 'plugin')}{_why_not(huge)}"
            ),
            "graphed decode loop: steps per second, plugin / native (per-trial q1 - q3)": (
                f"{decode['ratio']:.3f} ({paired['q1']:.2f} - {paired['q3']:.2f}; "
                f"{decode['verdict'] or 'no verdict'} for the target {decode['target']})"
            ),
        }
        for label, cell in rows.items():
            cells.setdefault(label, []).append(cell)
    out = [
        "| latest full run, simulated runtime, native -> plugin in one run "
        f"([every figure](bench/README.md)) | {head} |",
        "|---" * (len(runs) + 1) + "|",
    ]
    return out + [f"| {label} | {' | '.join(c)} |" for label, c in cells.items()]


def audit_cost(results: Path = RESULTS) -> list[str]:
    """docs/audit.md's cost of the report (P10): Python-thread CPU medians, report off -> on."""
    data = load(PAIRS[0], results)
    meta = data["meta"]

    def pair_of(start: str) -> str:
        r = _row(data, "P10", start)
        return f"{_median(r, 'plugin')} -> {_median(r, 'report')} us"

    return [
        f"On torch_npu {meta['torch_npu']} (full run of {meta['machine']['date_utc'][:10]}, "
        f"{meta['trials']} trials, simulated runtime; `bench/results/{meta['pair']}.json`), "
        "Python-thread CPU medians, report off -> on: an H2D `copy_` of 1 KiB "
        f"{pair_of('copy 1 KiB: Python')}, of 1 MiB {pair_of('copy 1 MiB: Python')}, of 16 MiB "
        f"{pair_of('copy 16 MiB: Python')} (sampled: the same checksum work as 1 MiB), a replay "
        f"of a graph with four 64 KiB pinned inputs {pair_of('replay: Python')}.",
    ]


# page (relative to the repository) -> block name -> its renderer
BLOCKS: dict[str, dict[str, Callable[..., list[str]]]] = {
    "README.md": {"performance": readme_performance},
    "docs/audit.md": {"report-cost": audit_cost},
}


def begin(name: str) -> str:
    return f"<!-- bench:{name}:begin (python ci/render_bench_lines.py writes this) -->"


def end(name: str) -> str:
    return f"<!-- bench:{name}:end -->"


def block(name: str, results: Path = RESULTS) -> str:
    """The whole generated block, markers included."""
    for blocks in BLOCKS.values():
        if name in blocks:
            return "\n".join([begin(name), *blocks[name](results), end(name)])
    raise KeyError(name)


def _pattern(name: str) -> str:
    return re.escape(f"<!-- bench:{name}:begin") + r"[^\n]*-->.*?" + re.escape(end(name))


def committed(page: str, name: str, repo: Path = REPO) -> str | None:
    """The block as committed in ``page``; None when the page has no such block."""
    found = re.search(_pattern(name), (repo / page).read_text(), flags=re.S)
    return found.group(0) if found else None


def rewrite(repo: Path = REPO, results: Path = RESULTS) -> list[str]:
    """Rewrite every block; returns the pages changed."""
    changed = []
    for page, blocks in BLOCKS.items():
        path = repo / page
        text = path.read_text()
        new = text
        for name in blocks:
            if not re.search(_pattern(name), new, flags=re.S):
                raise SystemExit(
                    f"render_bench_lines: {page} has no '{begin(name)}' ... '{end(name)}' block"
                )
            rendered = block(name, results)
            new = re.sub(_pattern(name), lambda _, r=rendered: r, new, flags=re.S)
        if new != text:
            path.write_text(new)
            changed.append(page)
    return changed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on a diff")
    args = parser.parse_args(argv)
    if args.check:
        stale = [
            f"{page}: {name}"
            for page, blocks in BLOCKS.items()
            for name in blocks
            if committed(page, name) != block(name)
        ]
        for s in stale:
            print(f"render_bench_lines: stale block {s}; run `python ci/render_bench_lines.py`")
        return 1 if stale else 0
    for page in rewrite():
        print(f"render_bench_lines: rewrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
