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

from importlib import metadata

import pytest

_RESULTS: dict[bool, dict] = {}

# torch_npu 2.9 and 2.10.0 (seen on the simulated runtime: 2.9 on 2026-11-24, 2.10.0 in the
# build sweep on 2026-11-27; 2.10.0.post4, .post6 and .post7 pass): the replay after
# NPUGraph.update still runs the old kernel, with the plugin and without it, and
# test/simcann/tests/test_task_update.py::test_npugraph_update_through_torch_npu shows the same
# through torch_npu alone; the explicit task-update path is right. Cause not found yet (the
# Python update flow is the same; the C++ side is not). Strict: the day it passes, drop the mark.
_NPU = metadata.version("torch_npu").split("+")[0]
_UPDATE_REPLAYS_OLD_KERNEL = pytest.mark.xfail(
    tuple(int(x) for x in _NPU.split(".")[:2]) < (2, 10) or _NPU == "2.10.0",
    reason=f"torch_npu {_NPU}: the replay after NPUGraph.update runs the old kernel (see above)",
    strict=True,
)


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
@pytest.mark.parametrize(
    "part", [pytest.param("dispatch", marks=_UPDATE_REPLAYS_OLD_KERNEL), "explicit"]
)
def test_update_fed_from_freed_pinned_memory(scenario, plugin, part):
    r = _result(scenario, plugin)[part]
    assert "raised" not in r, r
    assert r["replay_a"] == [1.0] and r["replay_b"] == [2.0], r
    assert r["junk_intact"], r
    assert r["capturing_in_update"] is False, r
    assert r.get("violations", 0) == 0, r
