"""Shared parameters of the plugin's tests: plugin on / off (``TORCH_NPU_PINPOOL=0`` leaves it
off: the native allocator runs) and the torch_npu pair under test. The scenarios themselves are
files in ``test/scenarios/``, run through the ``scenario`` fixture (``test/conftest.py``)."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata

import pytest

PLUGIN_ON = {}
PLUGIN_OFF = {"TORCH_NPU_PINPOOL": "0"}
ON_OFF = pytest.mark.parametrize(
    "plugin", [pytest.param(True, id="plugin"), pytest.param(False, id="native")]
)


def env_for(plugin: bool, **extra: object) -> dict[str, str]:
    """The environment of a scenario: plugin on or off (``TORCH_NPU_PINPOOL=0``), and ``extra``
    as strings."""
    env = dict(PLUGIN_ON if plugin else PLUGIN_OFF)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def with_alloc_conf(scenario, name: str, env: dict[str, str]) -> object:
    """``scenario(name, env=env)`` where ``env`` sets PYTORCH_NPU_ALLOC_CONF: the test skips when
    this torch_npu build does not know the option (its first device use raises "Unrecognized
    CachingAllocator option: X", plugin or not: torch_npu 2.9.0 has neither pinned_mem_register
    nor pin_memory_expandable_segments) and fails on any other non-zero exit."""
    run = scenario(name, env=env, expect_ok=False)
    unknown = re.search(r"Unrecognized CachingAllocator option: (\w+)", run.stderr)
    if unknown:
        version = metadata.version("torch_npu")
        pytest.skip(f"torch_npu {version} has no allocator option {unknown.group(1)}")
    if run.returncode != 0:
        out = run.stdout[-3000:] + run.stderr[-6000:]
        pytest.fail(f"scenario {name} exited {run.returncode}\n{out}")
    return run


def pair() -> tuple[int, int]:
    """The torch_npu pair under test: ``PINPOOL_PAIR`` (set by ci/sim-env.sh), else the installed
    torch_npu's version (an Ascend runner)."""
    value = os.environ.get("PINPOOL_PAIR") or metadata.version("torch_npu")
    major, minor = value.split(".")[:2]
    return int(major), int(minor)


def native_pools() -> bool:
    return pair() >= (2, 11)


# The pairs on which native's figures in the tests were measured (on the simulated runtime:
# torch_npu 2.14.0 and 2.10.0.post7; docs/problem.md, "A capture that fails").
MEASURED = ((2, 14), (2, 10))


def native_measured() -> None:
    """Skip a test of native's figures on a pair they were not measured on."""
    if pair() not in MEASURED:
        pytest.skip(f"native's figures were measured on {MEASURED}, not {pair()}")


def under_sanitizer() -> bool:
    """A sanitizer leg (ci/lib/sanitize.sh): every process runs several times slower, so a
    native defect that shows only when another thread wins a race in time may not show. Only
    for such a demonstration of native's defect, never for what the plugin must do."""
    return bool(os.environ.get("PINPOOL_SANITIZER_REPORTS"))


def under_thread_sanitizer() -> bool:
    """The thread leg (ci/lib/sanitize.sh with KIND thread): TSan sees the simulated device's
    kernels, so a race of torch_npu's own device writes fails the test that triggers it."""
    return under_sanitizer() and bool(os.environ.get("TSAN_OPTIONS"))


def simulator_api() -> bool:
    """Whether the simulated runtime's control API is visible to this session (not on a real NPU,
    nor in the "as a real NPU" leg). Only for an extra, simulator-only assertion. Asks
    ``simctl.available()``, which the simulator leg records (test/scenarios/_lib/simctl.py)."""
    from conftest import simctl  # test/conftest.py

    return simctl.available()


# The simulated runtime's device count: configuration, not state (a real NPU host has the
# devices it has, and ignores the variable), so tests may pass it without the simulator marker.
TWO_DEVICES = {"SIMCANN_DEVICE_COUNT": "2"}

# The CANN version the simulated runtime reports (torch_npu's pinned_mem_register needs >= 8.5):
# configuration, not state (a real NPU host has the CANN it has and ignores the variable).
CANN_8_5 = {"SIMCANN_CANN_VERSION": "8.5.0"}


AUDIT_OUT = (
    "the audit report is compiled out of this build (TORCH_NPU_PINPOOL_AUDIT=0 at build time): "
    "rebuild without it to run the audit's tests"
)


@functools.cache
def audit_built() -> bool:
    """Whether the installed extension has the audit report (``_C.audit_built``), asked once in
    a child interpreter (this one imports no torch). A child that cannot tell counts as built,
    so the audit's tests run and fail loudly rather than skip."""
    code = "import torch, torch_npu, torch_npu_pinpool._C as c; print('AUDIT', c.audit_built)"
    env = dict(os.environ, TORCH_NPU_PINPOOL="0", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tempfile.gettempdir(),  # not the checkout: its torch_npu_pinpool/ has no _C
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    return "AUDIT False" not in out


def skip_without_audit() -> None:
    if not audit_built():
        pytest.skip(AUDIT_OUT)
