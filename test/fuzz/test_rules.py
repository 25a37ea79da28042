"""The fuzzer's own logic, without a runtime: programs are deterministic and valid, the rules of
compare.py judge synthetic observations as documented, shrink candidates stay valid."""

from __future__ import annotations

import json

from fuzz import compare, shrink
from fuzz.program import MiB, generate, size_classes, validate


def test_programs_deterministic_valid_bounded() -> None:
    for seed in range(300):
        p = generate(seed, 24)
        assert p == generate(seed, 24)
        assert json.loads(json.dumps(p)) == p
        assert validate(p), seed
        assert len(p["steps"]) <= 24 + 12, seed  # the budget plus the clean-up at the end
        assert all(4096 <= s.get("nbytes", 4096) <= 256 * MiB for s in p["steps"])


def test_themes_cover_issue_47_shapes() -> None:
    ops = {s["op"] for seed in range(120) for s in generate(seed, 24)["steps"]}
    assert {"pin", "fill", "h2d", "alias", "d2h", "free", "sync", "empty_cache", "capture",
            "replay", "reset", "thread", "dataloader", "dev_alloc", "activate"} <= ops
    hookless = [s for seed in range(120) for s in generate(seed, 24)["steps"]
                if s["op"] == "capture" and not s["hooks"]]
    assert hookless


def _obs(pins: list[int], nbytes: list[int], graphs: list[int] | None = None) -> dict:
    graphs = graphs or [0] * len(pins)
    return {
        "settings": "",
        "settings_end": "",
        "copies": [],
        "steps": [{"op": "pin", "pins": p, "bytes": b, "graphs": g}
                  for p, b, g in zip(pins, nbytes, graphs)],
    }


def _program(sizes: list[int]) -> dict:
    return {"steps": [{"op": "pin", "id": f"t{i}", "nbytes": n, "value": 1}
                      for i, n in enumerate(sizes)]}


def test_pins_slack_is_one_per_large_class() -> None:
    prog = _program([40 * MiB, 64 * MiB, 100 * MiB])
    assert size_classes(prog) == 2  # 64 MiB and 128 MiB classes
    ok = compare.compare(prog, _obs([1, 2, 4], [0, 0, 0]), _obs([1, 1, 2], [0, 0, 0]))
    assert ok == ("pass", [])
    verdict, fails = compare.compare(prog, _obs([2, 3, 5], [0, 0, 0]), _obs([1, 1, 2], [0, 0, 0]))
    assert verdict == "FAIL" and [f.check for f in fails] == ["pins"]


def test_bytes_compared_only_without_live_graphs() -> None:
    prog = _program([4096, 4096])
    native = _obs([1, 1], [10, 10], graphs=[1, 0])
    assert compare.compare(prog, _obs([1, 1], [99, 10], graphs=[1, 0]), native)[0] == "pass"
    verdict, fails = compare.compare(prog, _obs([1, 1], [10, 11], graphs=[1, 0]), native)
    assert [f.check for f in fails] == ["pinned_bytes"] and fails[0].step == 1


def test_bytes_delivered_and_errors() -> None:
    prog = _program([4096, 4096])
    plugin, native = _obs([1, 1], [0, 0]), _obs([1, 1], [0, 0])
    plugin["copies"] = [{"step": 0, "what": "h2d t0", "expect": 1, "got": [9]}]
    native["copies"] = [{"step": 0, "what": "h2d t0", "expect": 1, "got": [1]}]
    assert [f.check for f in compare.compare(prog, plugin, native)[1]] == ["bytes_delivered"]
    native["copies"] = [{"step": 0, "what": "h2d t0", "expect": 1, "got": [0, 1]}]
    assert [f.check for f in compare.compare(prog, plugin, native)[1]] == [
        "bytes_where_native_wrong"
    ]
    plugin, native = _obs([1, 1], [0, 0]), _obs([1, 1], [0, 0])
    native["steps"][1]["err"] = {"type": "RuntimeError", "msg": "refused"}
    assert [f.check for f in compare.compare(prog, plugin, native)[1]] == ["errors_match"]
    plugin["steps"][1]["err"] = {"type": "RuntimeError", "msg": "refused too"}
    assert compare.compare(prog, plugin, native)[0] == "pass"
    assert compare.compare(prog, None, native)[0] == "FAIL"
    assert compare.compare(prog, plugin, None)[0] == "skip"


def test_settings_and_time() -> None:
    prog = _program([4096])
    plugin, native = _obs([1], [0]), _obs([1], [0])
    plugin["settings"] = "pinned_max_round_threshold_mb:32"
    plugin["steps"][0]["ms"], native["steps"][0]["ms"] = 270.0, 10.0
    checks = [f.check for f in compare.compare(prog, plugin, native)[1]]
    assert checks == ["settings", "empty_cache_time"]


def test_timing_dependent_steps_are_not_compared() -> None:
    """An allocation while a copy may be in flight: from there on which blocks are free depends
    on the device's timing, and pins are no longer compared; bytes again after a
    host_empty_cache() with nothing in flight."""
    prog = {"steps": [
        {"op": "pin", "id": "t0", "nbytes": 4096, "value": 1},
        {"op": "h2d", "id": "t0"},
        {"op": "pin", "id": "t1", "nbytes": 4096, "value": 2},
        {"op": "sync"},
        {"op": "empty_cache"},
    ]}
    assert compare.timing_free(prog) == [
        (True, True), (True, True), (False, False), (False, False), (False, True)
    ]
    native = _obs([1, 1, 2, 2, 2], [10, 10, 20, 20, 20])
    assert compare.compare(prog, _obs([1, 1, 3, 3, 3], [10, 10, 30, 30, 20]), native)[0] == "pass"
    verdict, fails = compare.compare(prog, _obs([1, 1, 3, 3, 3], [10, 10, 30, 30, 21]), native)
    assert [(f.check, f.step) for f in fails] == [("pinned_bytes", 4)]


def test_shrink_candidates_are_valid_and_smaller() -> None:
    for seed in range(40):
        p = generate(seed, 24)
        cands = shrink.candidates(p)
        assert cands, seed
        for c in cands:
            assert validate(c)
            assert len(c["steps"]) < len(p["steps"]) or c != p


def _staged_view_program(activation: str) -> dict:
    steps = [{"op": "pin", "id": "t0", "nbytes": 4096, "value": 1}]
    if activation == "late":
        steps.append({"op": "activate"})
    steps += [
        {"op": "capture", "gid": "g0", "pool": "private", "hooks": True, "nbytes": 4096,
         "value": 1, "src": "t0", "view": "strided"},
        {"op": "replay", "gid": "g0"},
    ]
    return {"activation": activation, "steps": steps}


def _staged_view_obs(prog: dict, native: bool, replay_got: int = 1) -> dict:
    cap = len(prog["steps"]) - 2
    ran = prog["steps"][: cap + 1] if native else prog["steps"]
    steps = [{"op": s["op"], "pins": 1, "bytes": 4096, "graphs": 0} for s in ran]
    copies = []
    if native:
        steps[cap]["err"] = {"type": "RuntimeError", "msg": "The Inner error is reported as above"}
    else:
        copies = [{"step": cap + 1, "what": "replay g0", "expect": 1, "got": [replay_got]}]
    return {"settings": "", "settings_end": "", "copies": copies, "steps": steps}


def test_a_staged_view_capture_native_refuses_runs_on_and_is_checked_alone() -> None:
    """Note [Strided pinned copies in capture]: native refuses a strided view's capture, the
    plugin runs it; its later copies must then deliver the written bytes."""
    prog = _staged_view_program("import")
    native = _staged_view_obs(prog, native=True)
    plugin = _staged_view_obs(prog, native=False)
    plugin["steps"][1]["pins"] = 2  # its staging block (seed 279): native did not do the step
    assert compare.compare(prog, plugin, native) == ("pass", [])
    verdict, fails = compare.compare(prog, _staged_view_obs(prog, False, replay_got=9), native)
    assert verdict == "FAIL" and [f.check for f in fails] == ["bytes_delivered"]


def test_a_staged_view_of_memory_pinned_before_activation_must_be_refused() -> None:
    prog = _staged_view_program("late")
    native = _staged_view_obs(prog, native=True)
    verdict, fails = compare.compare(prog, _staged_view_obs(prog, native=False), native)
    assert verdict == "FAIL" and [f.check for f in fails] == ["errors_match"]


def test_free_of_a_copied_tensor_and_reset_of_a_replayed_graph_are_in_flight() -> None:
    """Both allocators record an event at such a free (the plugin a fence at such a reset) and
    reuse the block once it completed: a host_empty_cache() right after is timing, one after a
    sync is not. A reset of a graph never replayed gives its blocks back at once: compared."""
    prog = {"steps": [
        {"op": "pin", "id": "t0", "nbytes": 4096, "value": 1},
        {"op": "h2d", "id": "t0"},
        {"op": "sync"},
        {"op": "free", "id": "t0"},
        {"op": "empty_cache"},
        {"op": "sync"},
        {"op": "empty_cache"},
        {"op": "reset", "gid": "g0"},
        {"op": "replay", "gid": "g1"},
        {"op": "sync"},
        {"op": "reset", "gid": "g1"},
    ]}
    bytes_ok = [b for _, b in compare.timing_free(prog)]
    assert bytes_ok == [True, True, True, True, False, False, True, True, True, True, False]


def test_captures_without_host_pools_allow_one_pin_each() -> None:
    prog = {"steps": [
        {"op": "capture", "gid": "g0", "pool": "private", "hooks": True, "nbytes": 4096,
         "value": 1, "src": "inside"},
        {"op": "pin", "id": "t0", "nbytes": 4096, "value": 2},
    ]}
    native = _obs([0, 1], [0, 0], graphs=[1, 1])
    plugin = _obs([1, 2], [0, 0], graphs=[1, 1])
    assert compare.compare(prog, plugin, {**native, "host_pools": False})[0] == "pass"
    verdict, fails = compare.compare(prog, plugin, {**native, "host_pools": True})
    assert [(f.check, f.step) for f in fails] == [("pins", 0)]


def test_empty_cache_time_is_never_negative() -> None:
    """Seeds 74 and 102 on 2.10 under load: native's run-queue wait, read after a preemption,
    exceeded its wall time (-242 ms), and a 28 ms plugin call failed the +250 ms bound."""
    prog = {"steps": [{"op": "empty_cache"}]}
    plugin, native = _obs([0], [0]), _obs([0], [0])
    plugin["steps"][0].update(ms=1278.7, runq_ms=1250.5)
    native["steps"][0].update(ms=1411.4, runq_ms=1654.0)
    assert compare.compare(prog, plugin, native)[0] == "pass"
    plugin["steps"][0].update(runq_ms=1000.0)
    verdict, fails = compare.compare(prog, plugin, native)
    assert [(f.check, f.step) for f in fails] == [("empty_cache_time", 0)]


def test_empty_cache_time_is_not_checked_for_a_sanitized_build() -> None:
    """Seed 5 in the ASan leg: the instrumented plugin's call took 1,674 ms, torch_npu's
    uninstrumented one 733 ms; a release build's time is checked in the other legs."""
    prog = {"steps": [{"op": "empty_cache"}]}
    plugin, native = _obs([0], [0]), _obs([0], [0])
    plugin["steps"][0]["ms"], native["steps"][0]["ms"] = 1674.5, 732.6
    assert [f.check for f in compare.compare(prog, plugin, native)[1]] == ["empty_cache_time"]
    plugin["sanitizers"] = "address,undefined"
    assert compare.compare(prog, plugin, native)[0] == "pass"
