"""The as-a-real-NPU leg's selection (issue #50): simctl's record of who asked whether the
simulator's API is visible, ci/lib/as_npu_selection.py's selection from it and its check of
what the leg ran, and the lint that keeps every such question going through simctl."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "ci" / "lib"))
import as_npu_selection as sel  # noqa: E402
import check_sim_markers  # noqa: E402

ASK = "from _lib import simctl; simctl.available(); simctl.available()"
RECORD = "PINPOOL_SIM_API_RECORD"


def _ask(tmp_path: Path, code: str = ASK, record: bool = True, **env: str) -> list[str]:
    """Run ``code`` as a scenario process would (test/scenarios on its path) with the simulator
    leg's variables, and return the lines it recorded."""
    out = tmp_path / "record.txt"
    full = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", RECORD)}
    full.update(env)
    if record:
        full[RECORD] = str(out)
    full["PYTHONPATH"] = str(REPO / "test" / "scenarios")
    subprocess.run([sys.executable, "-c", code], env=full, check=True, cwd=tmp_path, timeout=60)
    return out.read_text().splitlines() if out.exists() else []


def test_a_scenario_process_records_the_test_that_ran_it_once(tmp_path):
    lines = _ask(tmp_path, PYTEST_CURRENT_TEST="test/pinpool/test_x.py::test_y[a (b)] (call)")
    assert lines == ["test/pinpool/test_x.py::test_y[a (b)]"]


def test_a_question_outside_any_test_selects_everything(tmp_path):
    assert _ask(tmp_path) == ["*"]


def test_a_question_at_collection_names_the_test_file(tmp_path):
    module = tmp_path / "test_fake.py"
    module.write_text(ASK + "\n")
    lines = _ask(tmp_path, code=f"import runpy; runpy.run_path({str(module)!r})")
    assert lines == [os.path.relpath(module, REPO)]


def test_no_variable_no_record(tmp_path):
    current = "test/pinpool/test_x.py::test_y (call)"
    assert _ask(tmp_path, record=False, PYTEST_CURRENT_TEST=current) == []


@pytest.mark.parametrize(
    "source, shares",
    [
        ("_R = {}\ndef test_a():\n    _R['x'] = 1\n", True),
        ("_R: dict = {}\ndef test_a():\n    _R.setdefault('x', 1)\n", True),
        ("OFF = {'A': '0'}\ndef test_a():\n    env = dict(OFF)\n    env['B'] = '1'\n", False),
        ("env = {}\ndef test_a():\n    env = {}\n    env['B'] = '1'\n", False),
        ("import os\ndef test_a():\n    os.environ['X'] = '1'\n", True),
        ("import pytest\n@pytest.fixture(scope='module')\ndef f():\n    return 1\n", True),
        ("import functools\n@functools.cache\ndef f():\n    return 1\n", True),
        ("class TestA:\n    def test_a(self):\n        pass\n", True),
        ("n = 0\ndef test_a():\n    global n\n    n += 1\n", True),
        ("@pytest.mark.parametrize('v', ['empty_cache'])\ndef test_a(v):\n    pass\n", False),
    ],
)
def test_keeps_state(tmp_path, source, shares):
    path = tmp_path / "test_mod.py"
    path.write_text(textwrap.dedent(source))
    assert sel.keeps_state(path) is shares


def test_the_consumer_tests_that_cache_results_are_selected_whole():
    assert sel.keeps_state(REPO / "test/consumers/test_torchair_reduce_overhead.py")
    assert not sel.keeps_state(REPO / "test/pinpool/test_capture_replay.py")


def test_selection_from_a_record(tmp_path):
    record = tmp_path / "record.txt"
    audit = "test/pinpool/test_audit.py::test_clean_decode_loop_reports_nothing[queued]"
    record.write_text(
        "\n".join([
            audit,
            "test/consumers/test_torchair_reduce_overhead.py::test_torchair_replays_right_with_plugin[default]",
            "test/repo/test_packaging.py::test_sdist",  # never in the leg
            "simcann/tests/test_build.py::test_names",  # not the leg's directories
            "test/pinpool/test_capture_replay.py::test_replay_reads_captured_bytes[plugin]",
        ]) + "\n"
    )
    args, what = sel.select(record)
    tests = sorted({audit, *sel.REQUIRED.values()})
    assert args == ["test/consumers/test_torchair_reduce_overhead.py", *tests]
    assert "1 tests and 1 whole files" in what and "7 required" in what
    assert sel.select(None)[0] == sel.FULL
    assert sel.select(tmp_path / "missing.txt")[0] == sel.FULL
    record.write_text(audit + "\n*\n")
    assert sel.select(record)[0] == sel.FULL


def test_what_an_earlier_pair_passed_is_left_out_but_the_required_floor(tmp_path):
    """PINPOOL_AS_NPU_COVERED: the second pair's leg runs only what the first pair's did not
    (each test without the simulator's API once per run), and every required test again."""
    audit = "test/pinpool/test_audit.py::test_clean_decode_loop_reports_nothing[queued]"
    only_here = "test/pinpool/test_fork.py::test_forked_child_neither_hangs_nor_calls_the_runtime"
    record = tmp_path / "record.txt"
    record.write_text(f"{audit}\n{only_here}\n")
    first, _ = sel.select(record)
    covered = tmp_path / "covered.txt"
    covered.write_text("\n".join(first) + "\n")
    record.write_text(f"{audit}\n{only_here}[native]\n")
    args, what = sel.select(record, covered)
    assert sorted(args) == sorted([f"{only_here}[native]", *sel.REQUIRED.values()])
    assert "1 of these already passed on an earlier pair" in what
    out = subprocess.run(
        [sys.executable, str(REPO / "ci/lib/as_npu_selection.py"), "--select", str(record),
         "--covered", str(covered)],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    assert out[1:] == args
    # a required test in a whole file (its tests share state) the first pair ran: run it alone
    consumers = sel.REQUIRED["consumers"].split("::")[0]
    covered.write_text(consumers + "\n")
    record.write_text(sel.REQUIRED["consumers"] + "[x]\n")
    assert sorted(sel.select(record, covered)[0]) == sorted(sel.REQUIRED.values())


def test_required_tests_exist():
    """A renamed test must be renamed in REQUIRED too (the leg would fail "MISSING")."""
    for prefix in sel.REQUIRED.values():
        path, _, name = prefix.partition("::")
        tree = ast.parse((REPO / path).read_text())
        assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, prefix


def _junit(tmp_path: Path, cases: list[tuple[str, str, str]]) -> str:
    body = "".join(
        f'<testcase classname="{c}" name="{n}">{"<failure/>" if o == "failed" else ""}</testcase>'
        for c, n, o in cases
    )
    path = tmp_path / "as-npu.xml"
    path.write_text(f"<testsuites><testsuite>{body}</testsuite></testsuites>")
    return str(path)


def test_check_requires_every_feature_unless_partial(tmp_path, capsys):
    cases = []
    for prefix in sel.REQUIRED.values():
        path, _, name = prefix.partition("::")
        cases.append((path.removesuffix(".py").replace("/", "."), name + "[plugin]", "passed"))
    assert sel.check(_junit(tmp_path, cases), partial=False) == 0
    assert sel.check(_junit(tmp_path, cases[1:]), partial=False) == 1
    assert "MISSING required: capture/replay" in capsys.readouterr().out
    assert sel.check(_junit(tmp_path, cases[1:]), partial=True) == 0
    failed = cases + [("test.pinpool.test_audit", "test_x", "failed")]
    assert sel.check(_junit(tmp_path, failed), partial=True) == 1


def test_only_simctl_asks_for_the_simulator_api():
    assert check_sim_markers.leg_variable_readers() == []
