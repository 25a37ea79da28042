"""No performance figure written by hand: README.md's and docs/'s figures are the blocks
ci/render_bench_lines.py renders from the committed bench results (bench/results/PAIR.json), and
bench/README.md's "Latest run" is what bench/bench.py --readme renders from the same files."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ci"))
import render_bench_lines  # noqa: E402

# A timing, a speed ratio against native, or a throughput: what only a bench run can say.
FIGURE = re.compile(r"\d\s?(us|µs|ns|ms)\b|\d(\.\d+)?x native|steps per second|steps/s")
PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize(
    "page,name",
    [(page, name) for page, blocks in render_bench_lines.BLOCKS.items() for name in blocks],
)
def test_committed_block_is_the_rendered_one(page, name):
    committed = render_bench_lines.committed(page, name)
    assert committed is not None, f"{page} lost its bench:{name} block"
    assert committed == render_bench_lines.block(name), (
        f"{page}'s bench:{name} block differs from bench/results/*.json: run "
        "`python ci/render_bench_lines.py` and commit the result"
    )


def test_bench_readme_latest_run_is_the_rendered_one():
    text = (REPO / "bench" / "README.md").read_text()
    report = render_bench_lines.report
    found = re.search(re.escape(report.README_BEGIN) + ".*?" + re.escape(report.README_END), text,
                      flags=re.S)
    assert found, "bench/README.md lost its latest-run section"
    assert found.group(0) == report.readme_section(str(REPO / "bench" / "results")), (
        "bench/README.md's Latest run differs from bench/results/*.json: run "
        "`python bench/bench.py --readme`"
    )


@pytest.mark.parametrize("page", PAGES)
def test_no_figure_outside_a_generated_block(page):
    text = (REPO / page).read_text()
    for name in render_bench_lines.BLOCKS.get(page, {}):
        text = re.sub(render_bench_lines._pattern(name), "", text, flags=re.S)
    if page == "docs/test-results.md":  # generated from the legs' summaries
        return
    found = [m.group(0) for m in FIGURE.finditer(text)]
    assert not found, (
        f"{page} states a performance figure by hand ({found}); render it from bench/results "
        "with ci/render_bench_lines.py (a block of BLOCKS) instead"
    )


def test_a_new_result_changes_the_rendered_lines(tmp_path):
    """The block follows the JSON: a different P5 ratio in a result file is what gets rendered."""
    results = tmp_path / "results"
    shutil.copytree(REPO / "bench" / "results", results, ignore=shutil.ignore_patterns("*.png"))
    data = json.loads((results / "2.10.json").read_text())
    row = next(r for r in data["summary"]["P5"]["rows"] if r["label"].startswith("steps/s"))
    row["ratio"] = 0.5
    (results / "2.10.json").write_text(json.dumps(data))
    lines = render_bench_lines.readme_performance(results)
    assert any("| 0.500 (" in line for line in lines), lines
    for page in render_bench_lines.BLOCKS:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / page, tmp_path / page)
    assert "README.md" in render_bench_lines.rewrite(tmp_path, results)
    assert "| 0.500 (" in (tmp_path / "README.md").read_text()
