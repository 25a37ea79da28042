"""ci/lib/leg_summary.py and ci/render_results.py: a leg's JUnit XML becomes a summary, and the
summaries become docs/test-results.md's table (one row per leg, every known pair listed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ci"))
sys.path.insert(0, str(REPO / "ci" / "lib"))
import leg_summary  # noqa: E402
import render_results  # noqa: E402

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="2" skipped="5" tests="40" time="1.0">
</testsuite></testsuites>
"""


def _summary(leg: str, pair: str, date: str = "2026-11-27", **extra: object) -> dict:
    data = {
        "leg": leg,
        "pair": pair,
        "arch": "x86_64",
        "torch": f"{pair}.0+cpu",
        "torch_npu": f"{pair}.0",
        "commit": "0123abc",
        "date": date,
        "passed": 30,
        "skipped": 2,
        "failed": 0,
        "result": "PASS",
        "source": "ci/test.sh",
    }
    data.update(extra)
    return data


def _write(directory: Path, *summaries: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for s in summaries:
        (directory / f"{leg_summary.slug(str(s['leg']))}.json").write_text(json.dumps(s))
    return directory


def test_junit_counts(tmp_path):
    """failed = failures + errors; passed = the rest of what ran and was not skipped."""
    junit = tmp_path / "run.xml"
    junit.write_text(JUNIT)
    assert leg_summary.counts(junit) == {"passed": 32, "skipped": 5, "failed": 3}


def test_leg_summary_writes_the_fields_the_page_needs(tmp_path):
    junit = tmp_path / "run.xml"
    junit.write_text(JUNIT)
    out = tmp_path / "results"
    cmd = [sys.executable, str(REPO / "ci/lib/leg_summary.py"), "--leg", "2.14 as-npu"]
    cmd += ["--pair", "2.14", "--junit", str(junit), "--rc", "0", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    data = json.loads((out / "2.14-as-npu.json").read_text())
    assert set(render_results.FIELDS) <= set(data)
    assert (data["leg"], data["pair"], data["passed"], data["failed"]) == (
        "2.14 as-npu",
        "2.14",
        32,
        3,
    )
    assert data["result"] == "FAIL", "a leg with failed tests is red even when its rc was 0"
    assert len(data["date"]) == 10 and data["commit"]


def test_render_table(tmp_path):
    """One row per leg, newest pair first; a pair whose full suite (leg PAIR) no summary names
    says so in its first row; summaries come from several directories."""
    ci = _write(tmp_path / "ci", _summary("2.14", "2.14"), _summary("2.10 asan", "2.10"))
    _write(tmp_path / "kept", _summary("2.8", "2.8"))
    page = render_results.render([ci, tmp_path / "kept"], pairs=["2.14", "2.10", "2.9", "2.8"])
    table = [line for line in page.splitlines() if line.startswith("| 2.")]
    assert table == [
        "| 2.14 | 2.14 | 2.14.0+cpu | 2.14.0 | 0123abc | 2026-11-27 | 30 | 2 | 0 | PASS |",
        "| 2.10 | 2.10 | - | - | - | - | - | - | - | not yet recorded by a generated leg |",
        "| 2.10 | 2.10 asan | 2.10.0+cpu | 2.10.0 | 0123abc | 2026-11-27 | 30 | 2 | 0 | PASS |",
        "| 2.9 | 2.9 | - | - | - | - | - | - | - | not yet recorded by a generated leg |",
        "| 2.8 | 2.8 | 2.8.0+cpu | 2.8.0 | 0123abc | 2026-11-27 | 30 | 2 | 0 | PASS |",
    ]


def test_a_summary_recorded_by_hand_is_refused(tmp_path):
    """Only ci/test.sh's summaries are results: one with another ``source`` (copied from a
    log, transcribed from a page) stops the renderer, naming the file and the fix."""
    ci = _write(tmp_path / "ci", _summary("2.14", "2.14"))
    hand = _write(tmp_path / "kept", _summary("2.8", "2.8", source="copied from a log by hand"))
    with pytest.raises(SystemExit, match="not written by ci/test.sh.*run the leg"):
        render_results.render([ci, hand], pairs=["2.14", "2.8"])


def test_committed_summaries_are_all_generated():
    """No summary kept in ci/results/ was recorded by hand."""
    for path in sorted((REPO / "ci" / "results").glob("*.json")):
        assert json.loads(path.read_text()).get("source") == "ci/test.sh", path


def test_build_checks_sit_under_their_line(tmp_path):
    """A build check (leg "LINE@BUILD as-npu", issue #35) is a row of its line, after the line's
    own legs, oldest build first (post2 before post10); a sweep build without a summary says
    so."""
    ci = _write(
        tmp_path / "ci",
        _summary("2.10", "2.10"),
        _summary("2.10@2.10.0.post10 as-npu", "2.10", torch_npu="2.10.0.post10"),
        _summary("2.10@2.10.0.post2 as-npu", "2.10", torch_npu="2.10.0.post2"),
    )
    builds = ["2.10@2.10.0.post2", "2.10@2.10.0.post10", "2.10@2.10.0.post4", "2.8@2.8.0"]
    page = render_results.render([ci], pairs=["2.10"], builds=builds)
    table = [line.split(" | ")[:4] for line in page.splitlines() if line.startswith("| 2.")]
    assert table == [
        ["| 2.10", "2.10", "2.10.0+cpu", "2.10.0"],
        ["| 2.10", "2.10@2.10.0.post2 as-npu", "2.10.0+cpu", "2.10.0.post2"],
        ["| 2.10", "2.10@2.10.0.post4 as-npu", "-", "2.10.0.post4"],
        ["| 2.10", "2.10@2.10.0.post10 as-npu", "2.10.0+cpu", "2.10.0.post10"],
        ["| 2.8", "2.8@2.8.0 as-npu", "-", "2.8.0"],
    ]
    assert page.count("not yet recorded by a generated leg") == 2


def test_a_refused_build_is_checked_by_its_refusal_leg(tmp_path):
    """A sweep build below the supported minimum (2.8@2.8.0) is covered by its refusal leg: no
    "no run" row for it besides that leg."""
    ci = _write(tmp_path / "ci", _summary("2.8@2.8.0 refusal", "2.8", torch_npu="2.8.0"))
    page = render_results.render([ci], pairs=[], builds=["2.8@2.8.0"])
    table = [line.split(" | ")[:4] for line in page.splitlines() if line.startswith("| 2.")]
    assert table == [["| 2.8", "2.8@2.8.0 refusal", "2.8.0+cpu", "2.8.0"]]
    assert "not yet recorded by a generated leg" not in page


def test_newest_summary_of_a_leg_wins(tmp_path):
    old = _write(tmp_path / "old", _summary("2.14", "2.14", date="2026-11-01", passed=1))
    new = _write(tmp_path / "new", _summary("2.14", "2.14", date="2026-11-27", passed=9))
    for dirs in ([old, new], [new, old]):
        rows = [r for r in render_results.render(dirs, pairs=["2.14"]).splitlines() if "2026" in r]
        assert len(rows) == 1 and "| 9 |" in rows[0], rows


def test_committed_page_is_the_rendered_one():
    """docs/test-results.md is the renderer's output for the summaries kept in ci/results/
    (plus, where this machine has them, build/test-results/): regenerate it, never edit it."""
    page = (REPO / "docs" / "test-results.md").read_text()
    assert page.startswith(render_results.HEADER)
    for pair in render_results.all_pairs():
        assert f"\n| {pair} |" in page, f"pair {pair} missing from docs/test-results.md"
    for build in render_results.npu_builds():  # a supported build's leg, or a refused one's
        legs = (f"| {build} as-npu |", f"| {build} refusal |")
        assert any(leg in page for leg in legs), f"build {build} missing from docs/test-results.md"
    kept = render_results.render([REPO / "ci" / "results"])
    testing = render_results.TESTING_PAGE.read_text()
    assert render_results.BLOCK.search(testing), "docs/testing.md lost its test-command block"
    if not (REPO / "build" / "test-results").is_dir():
        assert page == kept, "docs/test-results.md is stale: run python ci/render_results.py"
        rendered = render_results.testing_page(testing, [REPO / "ci" / "results"])
        assert testing == rendered, "docs/testing.md is stale: run python ci/render_results.py"


def _upstream(tmp_path: Path, *extra: str, on: str = "7/0/0", off: str = "6/0/1") -> dict:
    out = tmp_path / "results" / "upstream"
    cmd = [sys.executable, str(REPO / "ci/lib/upstream_record.py"), "--pair", "2.10"]
    cmd += ["--torch", "2.10.0", "--torch-npu", "2.10.0.post7", "--file", "/tmp/x/test_npu.py"]
    cmd += ["--on", on, "--off", off, "--commit", "0123abcdef01", "--out", str(out), *extra]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    return {p.name: json.loads(p.read_text()) for p in out.glob("*.json")}


def test_upstream_record_and_section(tmp_path):
    """ci/upstream.sh's records (ci/lib/upstream_record.py) become the page's "Upstream tests"
    section: one row per file / selection, counts on and off, the source, notes numbered."""
    _upstream(tmp_path)
    recs = _upstream(
        tmp_path,
        "--select",
        "pinned_memory",
        "--source",
        "Ascend/pytorch cf904390",
        "--note",
        "one skip: no CANN version",
        on="no result",
        off="5/2/0 (timed out)",
    )
    assert len(recs) == 2 and "upstream-2.10-test_npu.json" in recs
    plain = recs["upstream-2.10-test_npu.json"]
    assert plain["on"] == {"passed": 7, "failed": 0, "skipped": 0, "status": "PASS"}
    assert plain["command"] == "bash ci/upstream.sh 2.10 test_npu.py"
    page = render_results.render([tmp_path / "results"], pairs=["2.10"])
    section = page.split("## Upstream tests", 1)[1].splitlines()
    rows = [line for line in section if line.startswith("| 2.10")]
    assert rows == [
        "| 2.10 | 2.10.0.post7 | test_npu.py | - | all | 7/0/0 | 6/0/1 | 0123abcdef01 | "
        + plain["date"]
        + " |",
        "| 2.10 | 2.10.0.post7 | test_npu.py [2] | Ascend/pytorch cf904390 | `-k pinned_memory` | "
        "no result | 5/2/0 (timed out) | 0123abcdef01 | " + plain["date"] + " |",
    ]
    assert "2. one skip: no CANN version" in section
    assert "## Upstream tests" not in render_results.render([tmp_path / "none"], pairs=["2.10"])


def test_fuzz_record_and_section(tmp_path, monkeypatch):
    """A long fuzz run's record (test/fuzz/cli.py --record) becomes a row of the page's
    "Differential fuzzer" section: seeds, programs, failing seeds with their first check."""
    sys.path.insert(0, str(REPO / "test"))
    from fuzz import cli, compare

    monkeypatch.setenv("PINPOOL_PAIR", "2.10")
    args = cli.argparse.Namespace(program=[], seed=None, seeds="0-2", budget=24,
                                  record=str(tmp_path / "results" / "fuzz"))
    rows = [{"seed": 0, "verdict": "pass", "failures": []},
            {"seed": 1, "verdict": "FAIL", "failures": [compare.Failure("pins", 3, "2 > 1")]},
            {"seed": 2, "verdict": "skip", "failures": []}]
    path = cli.record(args, ["--seeds", "0-2", "--record", "DIR"], rows, 125.0, "0123abc")
    assert path.endswith("fuzz-2.10-0-2.json")
    page = render_results.render([tmp_path / "results"], pairs=["2.10"])
    section = page.split("## Differential fuzzer", 1)[1].splitlines()
    (row,) = [line for line in section if line.startswith("| 2.10")]
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[3:9] == ["0-2", "24", "3", "1 (1: pins)", "1", "2 min"], cells
    assert cells[-1] == "`python test/fuzz/cli.py --seeds 0-2 --record DIR`"
    assert "## Differential fuzzer" not in render_results.render([tmp_path / "x"], pairs=["2.10"])


def test_command_record_and_section(tmp_path):
    """ci/test.sh's record of its own run (ci/lib/command_record.py) becomes the page's "The test
    command" section: the wall time and the rows it printed, the newest record winning."""
    rows = tmp_path / "rows"
    rows.write_text("2.14 setup               PASS      300s  env 95s, plugin build 205s\n")
    for seconds, date in ((2000, "2026-11-28"), (1750, None)):
        r = subprocess.run([sys.executable, str(REPO / "ci/lib/command_record.py"), "--seconds",
                            str(seconds), "--cached-envs", "0", "--rows", str(rows), "--out",
                            str(tmp_path / "new")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        if date:  # an older record in another directory
            record = tmp_path / "new" / "command" / "test-command.json"
            data = json.loads(record.read_text())
            (tmp_path / "old" / "command").mkdir(parents=True)
            (tmp_path / "old" / "command" / record.name).write_text(
                json.dumps({**data, "date": date}))
    page = render_results.render([tmp_path / "old", tmp_path / "new"], pairs=["2.14"])
    section = page.split("## The test command", 1)[1]
    assert "29 min 10 s" in section and "33 min" not in section
    assert "from an empty cache" in section  # --cached-envs 0: every environment made in the run
    assert "env 95s, plugin build 205s" in section
    assert "## The test command" not in render_results.render([tmp_path / "x"], pairs=["2.14"])
    block = "<!-- results:test-command:begin x -->\nold\n<!-- results:test-command:end -->\n"
    docs = render_results.testing_page("a\n" + block, [tmp_path / "old", tmp_path / "new"])
    assert "29 min 10 s." in docs and "old" not in docs and docs.startswith("a\n<!-- results")
