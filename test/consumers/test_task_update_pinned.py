"""Task update between replays (NPUGraph.update with auto_dispatch_capture, and
graph_task_update_begin / graph_task_update_end by hand), fed from pinned host memory: scenario
test/scenarios/task_update_pinned.py.

Only kernels can be updated (a captured pinned copy cannot: the runtime refuses a copy inside a
task group), so what users do is point the group's kernel at a device buffer that an eager
non_blocking copy from pinned memory fills on the update stream. What a user relies on: the
replay after the update reads the new bytes although the pinned source was freed at once and
junk was pinned over it, and no junk byte is written. The update stream never captures, so the
copy is an ordinary eager use for the allocator, fenced when the source dies; native torch_npu
keeps it too.
"""

from __future__ import annotations

import pytest

_RESULTS: dict[bool, dict] = {}


def _result(scenario, plugin: bool) -> dict:
    if plugin not in _RESULTS:
        env = {} if plugin else {"TORCH_NPU_PINPOOL": "0"}
        _RESULTS[plugin] = scenario("task_update_pinned", env=env).result
    if "unavailable" in _RESULTS[plugin]:  # a build without the task-update API
        pytest.skip(_RESULTS[plugin]["unavailable"])
    return _RESULTS[plugin]


@pytest.mark.parametrize(
    "plugin", [pytest.param(True, id="plugin"), pytest.param(False, id="native")]
)
@pytest.mark.parametrize("part", ["dispatch", "explicit"])
def test_update_fed_from_freed_pinned_memory(scenario, plugin, part):
    r = _result(scenario, plugin)[part]
    assert "raised" not in r, r
    assert r["replay_a"] == [1.0] and r["replay_b"] == [2.0], r
    assert r["junk_intact"], r
    assert r["capturing_in_update"] is False, r
    assert r.get("violations", 0) == 0, r
