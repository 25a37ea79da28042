"""docs/what-it-changes.md against the code: what activating the plugin changes in a process
(test/scenarios/what_it_changes.py compares the process before and after ``import
torch_npu_pinpool``), with its defaults, with each switch, and with the plugin off. The same
expectations hold in both modes (``backport`` on 2.8-2.10, ``native-present`` on 2.11-2.14)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "what-it-changes.md"
GRAPH_METHODS = ("capture_begin", "capture_end", "replay", "reset")
LAUNCHERS = ("_launch_host_func", "_launch_host_func_pending")
CASES = {
    "defaults": {},
    "off": {"TORCH_NPU_PINPOOL": "0"},
    "off_spelled_no": {"TORCH_NPU_PINPOOL": " No "},
    "guard_off": {"TORCH_NPU_PINPOOL_COPY_GUARD": "off"},
    "report": {"TORCH_NPU_PINPOOL_REPORT": "1"},
    "report_guard_off": {"TORCH_NPU_PINPOOL_REPORT": "1", "TORCH_NPU_PINPOOL_COPY_GUARD": "false"},
}


def _at_least(version: str, major: int, minor: int) -> bool:
    return tuple(int(p) for p in version.split("+")[0].split(".")[:2]) >= (major, minor)


@pytest.mark.parametrize("case", CASES)
def test_activation_changes_exactly_what_the_page_lists(scenario, tmp_path, case):
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0", **CASES[case]}
    json_report = tmp_path / "report-{pid}.json"
    if env.get("TORCH_NPU_PINPOOL_REPORT") == "1" and case == "report":
        env["TORCH_NPU_PINPOOL_REPORT"] = str(json_report)
    r = scenario("what_it_changes", env=env).result
    on = not case.startswith("off")
    report = "TORCH_NPU_PINPOOL_REPORT" in env
    guard = "TORCH_NPU_PINPOOL_COPY_GUARD" not in env
    torch = r["torch"]

    # The host allocator: the plugin's exactly when on.
    assert r["active"] is on, r
    # The graph classes: NPUGraph's four methods, and torch.accelerator.Graph's from torch 2.13;
    # with the report on, also torch_npu's host-function launchers. Nothing else of torch or
    # torch_npu changes.
    classes = ["NPUGraph"]
    if _at_least(torch, 2, 13):
        classes.append("torch.accelerator.Graph")
    expected = {f"{cls}.{m}" for cls in classes for m in GRAPH_METHODS} if on else set()
    if on and report:
        expected |= {f"torch_npu.npu.{n}" for n in r["host_func_launchers"]}
    # The classes also gain `_pinpool_hooked` and a `__del__` (a collected graph is reset
    # through the wrapper; it wraps the class's own `__del__` where it has one).
    marks = ("_pinpool_hooked", "__del__")
    added = {f"{cls}.{a}" for cls in classes for a in marks} if on else set()
    assert set(r["changed"]) - {f"{cls}.__del__" for cls in classes} == expected, r["changed"]
    assert set(r["changed"]) | set(r["added"]) == expected | added, r
    # aten::copy_'s NPU kernel: wrapped from torch 2.10 when on, unless the guard is off and the
    # report is off too.
    plugin_kernel = r["copy_kernel"][1] == "pageable_copy_guard.cpp"
    assert r["copy_kernel"][0] != "pageable_copy_guard.cpp", r["copy_kernel"]
    assert plugin_kernel == (on and _at_least(torch, 2, 10) and (guard or report)), r
    # Exit handlers: one when on (graph deaths stop being reported), a second with the report.
    assert r["exit_handlers_added"] == ((1 + report) if on else 0), r
    # No environment variable, logging handler or file of its own.
    assert r["environ_changed"] == [] and r["log_handlers_added"] == 0 and r["files"] == [], r
    if case == "report":
        assert list(tmp_path.glob("report-*.json")), "TORCH_NPU_PINPOOL_REPORT=PATH wrote nothing"
    # c10's allocator settings: never written.
    before, after = r["settings"]
    assert before == after, f"activation wrote c10's allocator settings: {before!r} -> {after!r}"


def test_the_page_names_what_the_code_does():
    """Each mechanism the page lists is the one in the code, and the page names every symbol
    the scenario finds patched."""
    page = PAGE.read_text()
    allocator = (REPO / "csrc" / "core" / "pin_pool_allocator.cpp").read_text()
    assert "at::setHostAllocator(at::kPrivateUse1, ours, /*priority=*/1)" in allocator
    assert "at::setHostAllocator(kPrivateUse1, ..., priority 1)" in page
    assert re.search(r"pthread_atfork\(&\w+, &\w+, &\w+\)", allocator), "the three handlers"
    assert "`pthread_atfork` handlers" in page
    report = (REPO / "torch_npu_pinpool" / "_report.py").read_text()
    wait = re.search(r"^EXIT_WAIT_S = ([\d.]+)", report, flags=re.M)
    assert wait and f"waits up to {float(wait.group(1)):g} s" in page
    guard = (REPO / "csrc" / "copy" / "pageable_copy_guard.cpp").read_text()
    assert '->impl("copy_"' in guard and "PINPOOL_TORCH_AT_LEAST(2, 10)" in guard
    assert "`aten::copy_` for the NPU** (torch >= 2.10" in page
    for name in (*GRAPH_METHODS, *LAUNCHERS, "_pinpool_hooked", "torch.accelerator.Graph"):
        assert name in page, name
    for switch in ("PINPOOL=0", "PINPOOL_COPY_GUARD=0", "PINPOOL_AUDIT=0"):
        assert f"TORCH_NPU_{switch}" in page, switch
    assert "writes none of them" in page  # c10's string: test_activation_changes_... checks it
