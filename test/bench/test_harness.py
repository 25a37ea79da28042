"""The benchmark harness (bench/bench.py) runs and writes what bench/README.md promises: one
command gives a JSON with the machine, the command and a summary row per measured quantity, and
a text table. Byte figures are deterministic, so their verdicts are asserted too; timings never
are (speed targets live in the benchmark, not in tests). Needs the simulator (byte counts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "bench.py")


@pytest.mark.simulator
def test_quick_run_writes_summary_and_byte_verdicts(tmp_path):
    """One trial of P3 (10 capture / replay / reset cycles) and P9 (10 and 100 graphs in one
    pool): exit 0, a JSON whose plugin rows show 0 bytes of growth, 0 wrong bytes and nothing
    left after host_empty_cache(), and the text table beside it."""
    cmd = [sys.executable, BENCH, "--quick", "--trials", "1", "--figures", "P3,P9",
           "--set", "P9.graphs=[10,100]", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    path = next(tmp_path.glob("*.json"))  # PAIR-quick.json
    data = json.loads(path.read_text())
    assert data["meta"]["command"].endswith("--out " + str(tmp_path))
    assert data["meta"]["machine"]["nproc"] >= 1
    assert set(data["meta"]["variants"]) == {"native", "plugin"}
    assert data["health"]["failed_runs"] == []
    for name in ("P3", "P9"):
        fig = data["summary"][name]
        assert fig["errors"] == [] and fig["rows"], fig
        checked = [r for r in fig["rows"] if r["target"] == "plugin 0"]
        assert checked and all(r["verdict"] == "meets" for r in checked), checked
        assert all(r["cells"]["plugin"]["values"] == [0] for r in checked), checked
    table = path.with_name(path.name[: -len(".json")] + ".txt").read_text()
    assert "P9 many graphs in one pool" in table


@pytest.mark.simulator
def test_figure_trials_setting_runs_that_figure_in_extra_processes(tmp_path):
    """A figure's `trials` setting gives it more processes per variant than the run's
    --trials, and the extra processes run that figure alone (P5: its speed differs between
    processes). One run trial of P3 and P5, P5 asking for 2: P5's summary covers 2 trials, P3's
    1, and the second trial's workers ran P5 only."""
    cmd = [sys.executable, BENCH, "--quick", "--trials", "1", "--figures", "P3,P5",
           "--set", "P5.trials=2", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert data["summary"]["P5"]["trials"] == 2
    assert data["summary"]["P3"]["trials"] == 1
    first, second = data["trials"]
    for variant in ("native", "plugin"):
        assert set(first[variant]["figures"]) == {"P3", "P5"}
        assert set(second[variant]["figures"]) == {"P5"}
    table = next(tmp_path.glob("*.txt")).read_text()
    assert "P5 decode loop, one replay per step, 2 trials" in table
