"""The audit for long-running servers (`python -m torch_npu_pinpool audit`, issue #49): reports of
processes that end by a signal (chained to the program's own handlers), the command forwarding
signals, periodic report lines that a SIGKILL leaves behind, the merged per-process summary,
and the audit's own record staying flat over a long copy loop.

Programs: test/scenarios/audit_server.py (spawned workers racing on a pinned buffer),
audit_signal_exit.py (a program ended by a signal), audit_bounded_state.py. Where a race has to
be certain, the simulator's task delay keeps the copies queued (marker `simulator`).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from ._snippets import ON_OFF, env_for, pair, skip_without_audit

SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios")
SERVER = os.path.join(SCENARIOS, "audit_server.py")
SIGNAL_EXIT = os.path.join(SCENARIOS, "audit_signal_exit.py")
SIGINT_DEFAULT = os.path.join(SCENARIOS, "_lib", "sigint_default.py")  # as from a terminal
TIMEOUT_S = 600.0
READY_S = 300.0  # a fresh interpreter importing torch_npu on a loaded 2-core machine
NEEDS_COPY_DIRECTION = pytest.mark.skipif(
    pair() < (2, 10), reason="written_while_queued needs torch >= 2.10 (Note [Copy direction])"
)


@pytest.fixture(autouse=True)
def _needs_the_audit():
    skip_without_audit()


def _site(path: str, marker: str) -> str:
    with open(path) as f:
        for number, line in enumerate(f, start=1):
            if line.rstrip().endswith(f"# site: {marker}"):
                return f"{path}:{number}"
    raise AssertionError(marker)


class Audit:
    """`python -m torch_npu_pinpool audit [OPTIONS] -- PROGRAM` started the way a user would
    (from an empty directory, torch's autoload off, TMPDIR of its own), its stdout read line by
    line."""

    def __init__(self, tmp_path, options: list[str], program: list[str], env: dict[str, str]):
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        full_env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", TMPDIR=str(self.tmp))
        full_env.pop("TORCH_NPU_PINPOOL_REPORT", None)
        full_env.update(env)
        self.proc = subprocess.Popen(
            [sys.executable, SIGINT_DEFAULT, sys.executable, "-m", "torch_npu_pinpool", "audit",
             *options, "--", *program],
            env=full_env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr = ""
        self.readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self.stdout.append(line)
            self.lines.put(line)

    def _read_stderr(self) -> None:
        self.stderr = self.proc.stderr.read()

    def wait_for(self, prefix: str) -> str:
        """The program's first stdout line starting with ``prefix`` (bounded wait)."""
        while True:
            try:
                line = self.lines.get(timeout=READY_S)
            except queue.Empty:
                self.proc.kill()
                raise AssertionError(f"no {prefix!r} line; stdout: {self.stdout}") from None
            if line.startswith(prefix):
                return line

    def finish(self) -> int:
        try:
            status = self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        for reader in self.readers:
            reader.join(TIMEOUT_S)
        return status

    def leftovers(self) -> list[str]:
        """What the command left in its TMPDIR (it removes its directory)."""
        return os.listdir(self.tmp)


# --- the server shape: spawned workers stopped with SIGTERM / SIGKILL ---------------------------


def _server(tmp_path, mode: str, options: list[str], env: dict) -> tuple[Audit, int, dict]:
    run = Audit(tmp_path, options, [sys.executable, SERVER, mode], env)
    status = run.finish()
    lines = [line for line in run.stdout if line.startswith("server: ")]
    assert lines, (status, run.stdout, run.stderr[-6000:])
    return run, status, json.loads(lines[0][len("server: ") :])


@NEEDS_COPY_DIRECTION
@pytest.mark.simulator  # the task delay is the simulator's
def test_workers_stopped_by_sigterm_are_in_the_merged_report(tmp_path):
    """Two spawned workers race until the main process sends them SIGTERM: each worker's
    written_while_queued is in the merged JSON with the copy's and the allocation's lines, each
    worker ended by SIGTERM as it would have without the audit, and the summary names them."""
    merged = tmp_path / "merged.json"
    delay = {"SIMCANN_TASK_DELAY_US": "100000"}  # keeps each copy queued while the host rewrites
    run, status, server = _server(tmp_path, "term", ["--json", str(merged)], delay)
    assert status == 0, run.stderr[-6000:]
    assert server["ready"] and sorted(server["workers"].values()) == [-15, -15], server
    report = json.loads(merged.read_text())
    by_pid = {str(p["pid"]): p for p in report["processes"]}
    copy, alloc = _site(SERVER, "copy"), _site(SERVER, "alloc")
    for pid in server["workers"]:
        worker = by_pid[pid]
        assert worker["ended"] == "signal SIGTERM", worker
        race = {h["kind"]: h for h in worker["hazards"]}["written_while_queued"]
        assert race["count"] >= 3, race  # the STEPS - 1 copies synchronized before the signal
        assert race["sites"][:2] == [copy, alloc], race
    total = {h["kind"]: h for h in report["hazards"]}["written_while_queued"]
    assert total["count"] == sum(
        {h["kind"]: h for h in by_pid[pid]["hazards"]}["written_while_queued"]["count"]
        for pid in server["workers"]
    )
    assert f"written_while_queued x{total['count']} in 2 process(es), at {copy}" in run.stderr
    for pid in server["workers"]:
        assert f"process {pid} (" in run.stderr and "ended by SIGTERM" in run.stderr
    assert run.leftovers() == []


@NEEDS_COPY_DIRECTION
@pytest.mark.simulator  # the task delay is the simulator's
def test_worker_killed_by_sigkill_leaves_its_periodic_lines(tmp_path):
    """With --interval 1, a worker killed with SIGKILL (no exit handler runs) still has its
    races in the merged report: what its last periodic line said. --json with {pid} keeps each
    process's own file (its JSON lines)."""
    per_process = tmp_path / "report-{pid}.jsonl"
    options = ["--interval", "1", "--json", str(per_process)]
    delay = {"SIMCANN_TASK_DELAY_US": "100000"}
    run, status, server = _server(tmp_path, "kill", options, delay)
    assert status == 0, run.stderr[-6000:]
    [(pid, code)] = server["workers"].items()
    assert code == -9 and server["lines"] == {pid: True}, server
    lines = [json.loads(line) for line in open(str(per_process).replace("{pid}", pid))]
    assert lines and all(not line["final"] for line in lines), "SIGKILL: no final line"
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    last = {h["kind"]: h for h in lines[-1]["hazards"]}["written_while_queued"]
    assert last["count"] >= 3 and last["sites"][0] == _site(SERVER, "copy"), last
    new = [h for line in lines for h in line["new"] if h["kind"] == "written_while_queued"]
    assert sum(h["count"] for h in new) == last["count"], "new counts add up to the totals"
    assert f"process {pid} (" in run.stderr and "no final report (killed?)" in run.stderr
    assert f"written_while_queued x{last['count']} at {_site(SERVER, 'copy')}" in run.stderr


# --- signals to the command and to the program --------------------------------------------------


def _signal_exit(tmp_path, handler: str, sig: signal.Signals, options=()) -> tuple[Audit, int]:
    run = Audit(tmp_path, list(options), [sys.executable, SIGNAL_EXIT, handler], {})
    ready = run.wait_for("ready ").split()
    assert ready[2] == "default_int_handler", "the program starts with Python's SIGINT handler"
    run.proc.send_signal(sig)  # to the command, which sends it on to the program
    return run, run.finish()


@pytest.mark.parametrize("when", ["before", "after"])
def test_program_sigterm_handler_still_decides_the_exit_status(tmp_path, when):
    """A SIGTERM handler of the program's (installed before or after torch_npu's import, where
    the audit activates the plugin) that calls sys.exit(3): the command exits 3, the process's
    report is written, and nothing is left in the temporary directory."""
    run, status = _signal_exit(tmp_path, when, signal.SIGTERM)
    assert status == 3, run.stderr[-6000:]
    assert "torch_npu_pinpool report (pid" in run.stderr
    assert "torch_npu_pinpool audit: 1 process report(s) above: no hazard" in run.stderr
    assert run.leftovers() == []


def test_sigterm_with_default_action_writes_the_report_then_ends_by_it(tmp_path):
    """No handler: the report is written, then the program dies of SIGTERM (status 128 + 15)."""
    run, status = _signal_exit(tmp_path, "none", signal.SIGTERM)
    assert status == 128 + signal.SIGTERM, run.stderr[-6000:]
    assert "torch_npu_pinpool report (pid" in run.stderr
    assert "ended by SIGTERM: no hazard" in run.stderr
    assert run.leftovers() == []


def test_sigint_to_the_command_stops_a_python_program(tmp_path):
    """SIGINT (as Ctrl-C, sent to the command) reaches the program, which stops with
    KeyboardInterrupt: status 128 + 2, the report and the summary printed."""
    run, status = _signal_exit(tmp_path, "none", signal.SIGINT)
    assert status == 128 + signal.SIGINT, run.stderr[-6000:]
    assert "KeyboardInterrupt" in run.stderr
    assert "torch_npu_pinpool report (pid" in run.stderr
    assert "1 process report(s) above" in run.stderr
    assert not any("no signal came" in line for line in run.stdout)
    assert run.leftovers() == []


def test_sigusr2_writes_the_report_of_a_running_process(tmp_path):
    """TORCH_NPU_PINPOOL_REPORT=PATH, no interval: SIGUSR2 asks a running program for its
    report, which is written to PATH while the program goes on; its SIGTERM then ends it as
    SIG_DFL would, once the final report is written."""
    path = tmp_path / "report.json"
    # torch's backend autoload activates the plugin (the program never imports it).
    env = dict(os.environ, TORCH_NPU_PINPOOL_REPORT=str(path), TORCH_DEVICE_BACKEND_AUTOLOAD="1")
    proc = subprocess.Popen(
        [sys.executable, SIGNAL_EXIT, "none"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert any(line.startswith("ready ") for line in proc.stdout), "the program got ready"
        proc.send_signal(signal.SIGUSR2)
        # Bounded wait for the file: the report is written by the program's own signal handler.
        deadline = time.monotonic() + READY_S
        while not _complete_json(path) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert _complete_json(path), "the report was written on request"
        assert proc.poll() is None, "SIGUSR2 does not end the program"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGTERM, stderr[-6000:]
    assert stderr.count("torch_npu_pinpool report (pid") == 2, "on request, then at the end"
    assert {h["kind"] for h in json.loads(path.read_text())["hazards"]} >= {"written_while_queued"}


def _complete_json(path) -> bool:
    try:
        json.loads(path.read_text())
        return True
    except (OSError, ValueError):
        return False


# --- the audit's own record: Note [Bounded audit state] -----------------------------------------

COPIES = 1_000_000


def test_audit_record_is_flat_over_a_million_copies(scenario):
    """10^6 eager H2D copies, each from a freshly pinned tensor (the pinned cache emptied now
    and then, so fresh blocks keep coming): the audit's per-block records stay within the
    tensors alive plus the copies in flight, its sites and code objects do not grow after the
    first checkpoint, and once every tensor is freed and every copy ran no block record is
    left."""
    env = {"TORCH_NPU_PINPOOL_REPORT": "1", "COPIES": str(COPIES)}
    o = scenario("audit_bounded_state", env=env, timeout=3000).result
    points = o["points"]
    assert len(points) == 10 and points[-1]["copies"] == COPIES
    window = 8 + 1  # WINDOW live tensors and the one being copied
    for p in points:
        assert p["blocks"] <= window + p["in_flight"] + 64, p  # 64: one sync period queued
        assert (p["sites"], p["code_objects"]) == (points[0]["sites"], points[0]["code_objects"])
        assert p["graphs"] == 0 and p["remembered_pools"] == 0
    assert o["after"]["blocks"] == 0 and o["after"]["in_flight"] == 0, o["after"]
    assert o["checks"]["copies"] + o["checks"]["unchecked"] == COPIES


# --- the sampled mode: Note [Sampled checks] ---------------------------------------------------


@NEEDS_COPY_DIRECTION
@pytest.mark.simulator  # the task delay makes the race happen on every step
def test_sampled_mode_still_reports_a_race_that_repeats(scenario):
    """TORCH_NPU_PINPOOL_REPORT_SAMPLE=4: vllm-ascend's refill race on each of 8 steps is still
    reported at the copy's line (one copy in 4 compared: within 4 steps), and every copy is
    accounted for: compared, not checked, or left out by sampling."""
    env = {
        "TORCH_NPU_PINPOOL_REPORT": "1",
        "TORCH_NPU_PINPOOL_REPORT_SAMPLE": "4",
        "AUDIT_SHAPE": "refill",
        "PINPOOL_DELAY_US": "200000",
        "STEPS": "8",
    }
    o = scenario("audit_written_while_queued", env=env).result
    assert o["wrong_steps"] == list(range(7)), "the race is certain on all but the last step"
    h = o["hazards"]["written_while_queued"]
    assert 1 <= h["count"] <= 2, h
    assert h["sites"] == [o["sites"]["copy"], o["sites"]["alloc"]]
    checks = o["checks"]
    assert checks["skipped"] == 6 and checks["copies"] + checks["unchecked"] == 2, checks


@NEEDS_COPY_DIRECTION
@pytest.mark.simulator  # the task delay makes the race happen on every step
def test_sampled_mode_checks_a_buffer_the_device_writes(scenario):
    """TORCH_NPU_PINPOOL_REPORT_SAMPLE=2 on a bounce buffer the device writes every step (Note
    [Sampled device writes]): its D2H copies hold no probe, yet every sampled read of it is
    checked, since the writes ran (the stream is idle after the synchronize), and the race on
    each sampled step is reported at the copy's and the buffer's lines."""
    env = {
        "TORCH_NPU_PINPOOL_REPORT": "1",
        "TORCH_NPU_PINPOOL_REPORT_SAMPLE": "2",
        "AUDIT_SHAPE": "bounce",
        "PINPOOL_DELAY_US": "200000",
        "STEPS": "8",
    }
    o = scenario("audit_written_while_queued", env=env).result
    assert o["wrong_steps"] == list(range(8)), "the race is certain on every step"
    h = o["hazards"]["written_while_queued"]
    assert h["count"] == 4, h
    assert h["sites"] == [o["sites"]["copy"], o["sites"]["alloc"]]
    checks = o["checks"]
    assert checks["skipped"] == 4 and checks["copies"] == 4 and checks["unchecked"] == 0, checks
    assert o["d2h_in_flight"] == [0] * 8, "a D2H copy launches no probe in sampled mode"


@ON_OFF
def test_sigterm_delivered_to_another_thread_ends_the_program_at_once(scenario, plugin, tmp_path):
    """SIGTERM, no handler, delivered to a thread other than the main one while the main thread
    waits: the process ends by it as natively, not when the wait ends (120 s: Python runs its
    handlers on the main thread only), with the report written."""
    path = tmp_path / "report.json"
    env = env_for(plugin, TORCH_NPU_PINPOOL_REPORT=str(path))
    start = time.monotonic()
    run = scenario("audit_signal_to_thread", env=env, expect_ok=False)
    took = time.monotonic() - start
    assert run.returncode == -signal.SIGTERM, (run.returncode, run.stdout[-3000:])
    assert took < 60, f"ended after {took:.0f} s: the main thread's wait ran out first"
    if plugin:
        assert path.exists() and "torch_npu_pinpool report (pid" in run.stderr, run.stderr[-3000:]
