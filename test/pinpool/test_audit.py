"""The audit report (TORCH_NPU_PINPOOL_REPORT, `python -m torch_npu_pinpool audit`): each hazard
kind counted with its bytes and the lines of the user's code (csrc/audit/audit.h), vllm-ascend's
races between host writes and queued copies / replays reported and their fixes not, a correct
graphed decode loop reporting nothing, stderr untouched with the report off.

Scenarios: test/scenarios/audit_*.py. Where a race has to be certain, the simulator's task delay
keeps the work queued (marker `simulator`); without it the same scenarios run as a real NPU sees
them, where only what holds at any timing is asserted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ._snippets import env_for, native_pools, pair, skip_without_audit

REPORT = {"TORCH_NPU_PINPOOL_REPORT": "1"}
KINDS = [
    "recycled_by_native",
    "leaked_by_native",
    "released_pool_recapture",
    "pageable_copy_in_capture",
    "written_while_queued",
]
DELAY_US = "200000"  # keeps a copy queued far longer than the host takes to rewrite its bytes
SLOW = pytest.mark.simulator  # the task delay is the simulator's
SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios")


@pytest.fixture(autouse=True)
def _needs_the_audit():
    skip_without_audit()


def _only(hazards: dict, kind: str) -> dict:
    """The entry of `kind`; every other kind counted nothing."""
    assert [h["kind"] for h in hazards.values()] == KINDS, "every kind is listed, in order"
    others = {k: h["count"] for k, h in hazards.items() if k != kind and h["count"]}
    assert others == {}, others
    return hazards[kind]


@pytest.mark.parametrize(
    "shape", ["before_freed_in_capture", "pinned_in_capture", "before_freed_after"]
)
def test_recycled_by_native(scenario, shape):
    """A block a captured copy reads, freed while its graph lives: the replay still reads the
    captured bytes, and the report counts one recycled block of 4096 B at its pin_memory()."""
    o = scenario("audit_recycled_by_native", env=dict(REPORT, AUDIT_SHAPE=shape)).result
    assert o["replay"] == [2.0]
    h = _only(o["hazards"], "recycled_by_native")
    assert (h["count"], h["bytes"], h["sites"]) == (1, 4096, [o["pin_site"]])
    native = {
        "before_freed_in_capture": "pinned before the capture, freed inside it",
        "pinned_in_capture": "pinned inside the capture",
        "before_freed_after": "pinned before the capture, freed after it",
    }[shape]
    assert h["affects"].startswith(native + ": torch_npu 2.8-"), h["affects"]
    assert "without the plugin" in h["affects"]


@pytest.mark.parametrize(
    "shape", ["before_freed_in_capture", "pinned_in_capture", "before_freed_after"]
)
def test_recycled_by_native_is_what_native_does(scenario, shape):
    """The same programs without the plugin: where the report's `affects` says this torch_npu
    recycles the block, the replay reads another owner's bytes (or freed memory)."""
    o = scenario("audit_recycled_by_native", env=env_for(False, AUDIT_SHAPE=shape)).result
    if shape == "pinned_in_capture" and native_pools():
        assert o["replay"] == [2.0], "torch_npu >= 2.11 keeps a capture-time block"
    else:
        assert o["replay"] != [2.0], "native hands the block to the next pin_memory()"


def test_leaked_by_native(scenario):
    """Three capture-time blocks a stream used, given back once their graphs were reset."""
    o = scenario("audit_leaked_by_native", env=REPORT).result
    assert o["held_after"] == o["held_before"], "the plugin gives them back"
    h = _only(o["hazards"], "leaked_by_native")
    assert (h["count"], h["bytes"], h["sites"]) == (3, 3 * 4096, [o["pin_site"]])
    assert "torch_npu 2.11-" in h["affects"]


def test_leaked_by_native_is_what_native_does(scenario):
    o = scenario("audit_leaked_by_native", env=env_for(False)).result
    if native_pools():
        assert o["held_after"] >= o["held_before"] + 3 * 4096, "native >= 2.11 keeps them"
    else:
        # Native <= 2.10 keeps a block freed inside a capture or not depending on when torch_npu's
        # task queue runs its captured event record (4096 B more in two runs on 2.10, none in a
        # third): never more than the blocks the captures pinned, and never fewer than before.
        kept = o["held_after"] - o["held_before"]
        assert 0 <= kept <= 3 * 4096 and kept % 4096 == 0, o


def test_released_pool_recapture(scenario):
    """A capture into a pool id whose graph was reset, the pool having held a capture-time block
    a stream used: counted at the second capture's line (its 4096 B block also leaked natively,
    and was freed inside the first capture)."""
    o = scenario("audit_released_pool_recapture", env=dict(REPORT, AUDIT_SHAPE="staged")).result
    assert "error" not in o, o
    assert (o["first"], o["second"]) == ([1.0], [2.0])
    h = o["hazards"]["released_pool_recapture"]
    assert (h["count"], h["bytes"], h["sites"]) == (1, 0, [o["recapture_site"]])
    assert h["affects"].startswith("a pool id whose graphs were all released: torch_npu 2.11-")


def test_released_pool_without_kept_blocks_is_not_counted(scenario):
    """Nothing kept the pool (no capture-time block; torch.npu.graph empties the cache on entry):
    torch_npu alone captures again too, and nothing is reported."""
    o = scenario("audit_released_pool_recapture", env=dict(REPORT, AUDIT_SHAPE="kept")).result
    assert (o["first"], o["second"]) == ([1.0], [2.0])
    assert all(h["count"] == 0 for h in o["hazards"].values()), o["hazards"]


@pytest.mark.parametrize("shape", ["staged", "kept"])
def test_released_pool_recapture_is_what_native_does(scenario, shape):
    o = scenario("audit_released_pool_recapture", env=env_for(False, AUDIT_SHAPE=shape)).result
    if native_pools() and shape == "staged":
        assert "use_count" in o.get("error", ""), o
    else:
        assert o.get("second") == [2.0], o


@pytest.mark.skipif(pair() < (2, 10), reason="the pageable-copy guard needs torch >= 2.10")
def test_pageable_copy_in_capture(scenario):
    o = scenario("audit_pageable_copy_in_capture", env=REPORT).result
    assert "pageable (not pinned) CPU tensor" in o["error"]
    h = _only(o["hazards"], "pageable_copy_in_capture")
    assert (h["count"], h["bytes"], h["sites"]) == (1, 4096, [o["copy_site"]])


DELAYS = pytest.mark.parametrize(
    "delay", [pytest.param("0", id="delay0"), pytest.param(DELAY_US, id="queued", marks=SLOW)]
)


# written_while_queued needs each copy's direction, which the plugin reads by wrapping
# torch_npu's copy_ kernel: torch >= 2.10 only (csrc/audit/audit.h, Note [Copy direction]). On 2.8 /
# 2.9 no copy is checked, so these would assert nothing (seen: 0 copies compared on 2.8).
NEEDS_COPY_DIRECTION = pytest.mark.skipif(
    pair() < (2, 10), reason="written_while_queued needs torch >= 2.10 (Note [Copy direction])"
)


@NEEDS_COPY_DIRECTION
@DELAYS
@pytest.mark.parametrize("shape", ["refill", "table"])
def test_written_while_queued(scenario, shape, delay):
    """vllm-ascend's races. With the work held in the queue (the race certain) the device gets
    the rewritten bytes, and the report counts every step whose bytes changed before the
    device had read them (all but the last), naming the copy or replay and the allocation.
    Without the delay the program is just as wrong, but whether the device loses depends on
    timing: what is counted must still be told right."""
    env = dict(REPORT, AUDIT_SHAPE=shape, PINPOOL_DELAY_US=delay)
    o = scenario("audit_written_while_queued", env=env).result
    h = _only(o["hazards"], "written_while_queued")
    enqueued = o["sites"]["copy" if shape == "refill" else "replay"]
    if delay != "0":
        assert o["wrong_steps"] == [0, 1, 2], "the delay makes the race certain"
        assert h["count"] == 3
    if h["count"]:
        assert h["bytes"] == 4096 * h["count"]
        assert h["sites"] == [enqueued, o["sites"]["alloc"]]
    checks = o["checks"]
    assert checks["copies" if shape == "refill" else "replays"] + checks["unchecked"] == 4


@NEEDS_COPY_DIRECTION
@DELAYS
@pytest.mark.parametrize("shape", ["refill", "table"])
def test_fixed_races_report_nothing(scenario, shape, delay):
    """The fixes (an event guard before the rewrite) report nothing, the work queued or not,
    although every copy / replay was compared at its completion."""
    env = dict(REPORT, AUDIT_SHAPE=shape, AUDIT_FIXED="1", PINPOOL_DELAY_US=delay, STEPS="4")
    o = scenario("audit_written_while_queued", env=env).result
    assert o["wrong_steps"] == []
    assert all(h["count"] == 0 for h in o["hazards"].values()), o["hazards"]
    assert o["checks"]["copies" if shape == "refill" else "replays"] == 4
    assert o["checks"]["unchecked"] == 0


@NEEDS_COPY_DIRECTION
@DELAYS
@pytest.mark.parametrize("fixed", ["0", "1"], ids=["race", "fixed"])
def test_bounce_buffer_the_device_writes(scenario, delay, fixed):
    """A pinned buffer the device writes (D2H), edited on the host after a synchronize, copied
    back and overwritten while that copy is queued: once the device's write has run, the read
    is checked like any other - the race is reported with the copy's and the buffer's lines,
    its fix (the copy's event synchronized before the overwrite) is not."""
    env = dict(REPORT, AUDIT_SHAPE="bounce", AUDIT_FIXED=fixed, PINPOOL_DELAY_US=delay)
    o = scenario("audit_written_while_queued", env=env).result
    h = _only(o["hazards"], "written_while_queued")
    checks = o["checks"]
    if fixed == "1":
        assert o["wrong_steps"] == [] and h["count"] == 0
        assert checks["copies"] == 4 and checks["unchecked"] == 0, checks
        return
    if delay != "0":
        assert o["wrong_steps"] == [0, 1, 2, 3], "the delay makes the race certain"
        assert h["count"] == 4
        assert all(n >= 1 for n in o["d2h_in_flight"]), "full mode: a probe behind each D2H"
    if h["count"]:
        assert h["sites"] == [o["sites"]["copy"], o["sites"]["alloc"]]
    assert checks["copies"] + checks["unchecked"] == 4, checks


@NEEDS_COPY_DIRECTION
@DELAYS
def test_clean_decode_loop_reports_nothing(scenario, delay):
    """Persistent pinned input and output, event-guarded, recaptured into one pool 3 times."""
    env = dict(REPORT, PINPOOL_DELAY_US=delay)
    o = scenario("audit_clean_decode", env=env).result
    assert o["wrong"] == []
    assert all(h["count"] == 0 for h in o["hazards"].values()), o["hazards"]
    assert o["checks"]["replays"] == 12


def _lines(stderr: str) -> list[str]:
    """stderr without the timestamps of c10's log lines ("[W1124 23:26:26.593407364 ...")."""
    return [re.sub(r"^\[([WIE])\d+ [\d:.]+ ", r"[\1 ", line) for line in stderr.splitlines()]


def test_report_off_leaves_stderr_unchanged(scenario):
    """TORCH_NPU_PINPOOL_REPORT unset: stderr is what torch_npu alone writes; set: the report
    comes at exit."""
    if "TORCH_NPU_PINPOOL_REPORT" in os.environ:
        pytest.skip("this session runs with TORCH_NPU_PINPOOL_REPORT set")
    off = scenario("audit_clean_decode")
    native = scenario("audit_clean_decode", env=env_for(False))
    assert off.result["hazards"] == {}
    assert _lines(off.stderr) == _lines(native.stderr)
    on = scenario("audit_clean_decode", env=REPORT)
    assert _lines(on.stderr)[: len(_lines(native.stderr))] == _lines(native.stderr)
    assert "torch_npu_pinpool report (pid" in on.stderr and "no hazard seen" in on.stderr


# --- the command: python -m torch_npu_pinpool audit -- python PROGRAM ---------------------------

PROGRAM = os.path.join(SCENARIOS, "audit_program.py")


def _site(marker: str) -> str:
    with open(PROGRAM) as f:
        for number, line in enumerate(f, start=1):
            if line.rstrip().endswith(f"# site: {marker}"):
                return f"{PROGRAM}:{number}"
    raise AssertionError(marker)


def _audit(tmp_path, *program: str, env: dict[str, str] | None = None, json_path: str = ""):
    """Runs the command the way a user would, from an empty directory, with torch's backend
    autoload off (the program never imports torch_npu_pinpool either)."""
    full_env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    full_env.pop("TORCH_NPU_PINPOOL_REPORT", None)
    full_env.update(env or {})
    options = ["--json", json_path] if json_path else []
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "torch_npu_pinpool", "audit", *options, "--", *program],
        env=full_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _json(path) -> dict:
    """The command's --json file without {pid}: the merged report (a process's own keys, and
    each process's totals)."""
    with open(path) as f:
        report = json.load(f)
    assert set(report) == {"torch_npu", "plugin", "hazards", "processes"}
    assert [h["kind"] for h in report["hazards"]] == KINDS
    for h in report["hazards"]:
        assert set(h) == {"kind", "count", "bytes", "affects", "sites"}
    return {h["kind"]: h for h in report["hazards"]}


def test_audit_command_recycle(tmp_path):
    """A program that frees a pinned tensor inside a capture after a captured copy read it:
    recycled_by_native at its pin_memory() line; the program's exit status is the command's."""
    out = tmp_path / "report.json"
    proc = _audit(tmp_path, sys.executable, PROGRAM, "recycle", "3", json_path=str(out))
    assert proc.returncode == 3, proc.stderr
    assert "read [[2.0]]" in proc.stdout
    assert "torch_npu_pinpool report (pid" in proc.stderr
    assert "torch_npu_pinpool audit: 1 process report(s) above: recycled_by_native x1" in (
        proc.stderr
    )
    h = _only(_json(out), "recycled_by_native")
    assert (h["count"], h["bytes"], h["sites"]) == (1, 4096, [_site("pin")])


def test_audit_command_clean(tmp_path):
    """Pinned input kept alive, each replay waited for before the rewrite: no hazard."""
    out = tmp_path / "report.json"
    proc = _audit(tmp_path, sys.executable, PROGRAM, "clean", json_path=str(out))
    assert proc.returncode == 0, proc.stderr
    assert "read [[0.0], [1.0], [2.0]]" in proc.stdout
    assert all(h["count"] == 0 for h in _json(out).values())
    assert "no hazard seen" in proc.stderr


@NEEDS_COPY_DIRECTION
@pytest.mark.simulator  # the task delay is the simulator's
def test_audit_command_race(tmp_path):
    """A pinned input rewritten while its replay is still queued (the simulator holds each task
    back): written_while_queued at the replay() and allocation lines."""
    out = tmp_path / "report.json"
    env = {"SIMCANN_TASK_DELAY_US": "100000"}
    proc = _audit(tmp_path, sys.executable, PROGRAM, "race", env=env, json_path=str(out))
    assert proc.returncode == 0, proc.stderr
    assert "read [[2.0], [2.0], [2.0]]" in proc.stdout, "the device got the rewritten bytes"
    h = _only(_json(out), "written_while_queued")
    assert (h["count"], h["bytes"]) == (2, 2 * 4096)
    assert h["sites"] == [_site("replay"), _site("input")]


def test_readme_example_names_the_programs_lines():
    """README, "Is my program affected?": the report quoted there names audit_program.py's lines
    of replay() and of the input's allocation (kept true when the program changes)."""
    readme = open(os.path.join(os.path.dirname(SCENARIOS), "..", "README.md")).read()
    section = readme.split("## Is my program affected?", 1)[1].split("\n## ", 1)[0]
    replay, alloc = (os.path.basename(_site(m)) for m in ("replay", "input"))
    assert f"enqueued / allocated at {replay}, {alloc}" in section


def test_audit_command_says_what_it_could_not_audit(tmp_path):
    """Plugin switched off: the command says so and still exits with the program's status; a
    program that never imports torch_npu: nothing to audit."""
    proc = _audit(tmp_path, sys.executable, PROGRAM, "clean", "5", env={"TORCH_NPU_PINPOOL": "0"})
    assert proc.returncode == 5
    assert "imported torch_npu but was not audited: TORCH_NPU_PINPOOL=0 turns it off" in (
        proc.stderr
    )
    proc = _audit(tmp_path, sys.executable, "-c", "print('no torch here')")
    assert proc.returncode == 0
    assert "never imported torch_npu" in proc.stderr


def test_audit_command_runs_the_sitecustomize_it_shadows(tmp_path):
    """A sitecustomize already on the program's PYTHONPATH still runs."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text(
        "import sys\nprint('own sitecustomize', file=sys.stderr)\n"
    )
    proc = _audit(tmp_path, sys.executable, PROGRAM, "clean", env={"PYTHONPATH": str(own)})
    assert proc.returncode == 0, proc.stderr
    assert "own sitecustomize" in proc.stderr
    assert "no hazard seen" in proc.stderr


# --- the text report: labelled counts, what to do, never a bare "none" --------------------------

_TEXT = """
from torch_npu_pinpool import _report
hazards = [dict(kind=k, count=0, bytes=0, affects="", sites=[]) for k in _report.KIND_TEXT]
hazards[0].update(count=2, bytes=8192, affects="pinned inside the capture: ...", sites=["a.py:3"])
hazards[2].update(count=1, affects="a released pool id: ...", sites=["a.py:9"])
report = {"torch_npu": "2.9.1", "plugin": "0.1.0", "hazards": hazards}
unchecked = "not checked on this torch (2.9.1+cpu): the check needs torch >= 2.10"
compared = "compared at completion: 1 H2D copies and 0 replays; not checked: 0 reads, 0 queued"
result = {"unchecked": _report.text(report, unchecked), "compared": _report.text(report, compared)}
"""


def test_report_text_labels_counts_and_says_what_to_do(run_isolated):
    """Each kind seen: its count with a unit, the bytes when there are any, the sites, what
    happened, what native does and what to change. The race check: "not checked on this torch"
    where it cannot run, how much it compared where it found nothing; never a bare "none"."""
    r = run_isolated(_TEXT, env={"TORCH_NPU_PINPOOL": "0"}).result
    lines = r["unchecked"].splitlines()
    assert "  recycled_by_native: 2 pinned blocks, 8.0 KiB" in lines
    assert "  released_pool_recapture: 1 capture" in lines, "no bytes shown when there are none"
    assert "    pinned at a.py:3" in lines and "    captured at a.py:9" in lines
    for label in ("what happened:", "native torch_npu:", "to stop depending on the plugin:"):
        assert sum(line.strip().startswith(label) for line in lines) == 2, (label, lines)
    assert "  written_while_queued: not checked on this torch (2.9.1+cpu)" in r["unchecked"]
    assert "written_while_queued: none seen (compared at completion: 1 H2D copies" in r["compared"]
    for text in r.values():
        assert not any(line.rstrip().endswith(": none") for line in text.splitlines()), text
