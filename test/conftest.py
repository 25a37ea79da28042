"""Shared pytest fixtures.

Allocator and runtime state is process-global (the host allocator registry, the simulated
runtime, torch_npu's caches), so every scenario that touches it runs in a process of its own
(``scenario`` / ``run_isolated``), forked from an interpreter that has imported torch (and
torch_npu, for a scenario that imports it first) where that equals a fresh one
(test/forkserver.py).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from forkserver import ForkServer, imports_torch_npu_first

_RESULT_TAG = "PINPOOL_RESULT:"

_PRELUDE = """
import json as _json, sys as _sys
result = None
"""

_EPILOGUE = f"""
_sys.stdout.flush()
print({_RESULT_TAG!r} + _json.dumps(result), flush=True)
"""


@dataclass
class Isolated:
    """What a scenario run in its own interpreter left behind."""

    returncode: int
    stdout: str
    stderr: str
    result: Any


def _run_child(
    argv: list[str], what: str, env: dict[str, str] | None, timeout: float, expect_ok: bool
) -> Isolated:
    """Run ``python ARGV`` in its own process and parse its ``PINPOOL_RESULT:`` line.

    The child gets this process's environment plus ``env`` and starts in an empty directory:
    from the repository root the source ``torch_npu_pinpool/`` (no compiled ``_C``) would shadow
    the installed plugin. It is forked from a fork server when that is the same as a fresh
    interpreter (Note [Scenarios forked from a torch-only interpreter], Note [Scenarios forked
    after torch_npu's import], test/forkserver.py). With
    ``expect_ok`` a non-zero exit fails the calling test with the child's output attached.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    # Emulated runs (the aarch64 leg under qemu-user) are several times slower than native.
    timeout *= float(os.environ.get("PINPOOL_TIMEOUT_SCALE", "1"))
    with tempfile.TemporaryDirectory(prefix="pinpool-run-") as cwd:
        server = _server_for(argv, full_env)
        if server is not None:
            pid, proc = _run_forked(server, argv, full_env, cwd, timeout)
        else:
            pid, proc = _run_fresh(argv, full_env, cwd, timeout)
    _fail_on_sanitizer_report(pid, what, proc)
    value = None
    for line in proc.stdout.splitlines():
        if line.startswith(_RESULT_TAG):
            value = json.loads(line[len(_RESULT_TAG) :])
    if expect_ok and proc.returncode != 0:
        pytest.fail(
            f"{what} exited {proc.returncode}\n--- stdout ---\n{proc.stdout[-6000:]}"
            f"\n--- stderr ---\n{proc.stderr[-6000:]}",
            pytrace=False,
        )
    return Isolated(proc.returncode, proc.stdout, proc.stderr, value)


def _run_fresh(
    argv: list[str], env: dict[str, str], cwd: str, timeout: float
) -> tuple[int, subprocess.CompletedProcess]:
    child = subprocess.Popen(
        [sys.executable, *argv],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with child:
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise
    return child.pid, subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def _run_forked(
    server: ForkServer, argv: list[str], env: dict[str, str], cwd: str, timeout: float
) -> tuple[int, subprocess.CompletedProcess]:
    with tempfile.TemporaryDirectory(prefix="pinpool-out-") as out_dir:  # not in the child's cwd
        out, err = os.path.join(out_dir, "stdout"), os.path.join(out_dir, "stderr")
        pid, returncode = server.run(argv, env, cwd, out, err, timeout)
        with open(out, errors="replace") as f_out, open(err, errors="replace") as f_err:
            stdout, stderr = f_out.read(), f_err.read()
    return pid, subprocess.CompletedProcess([sys.executable, *argv], returncode, stdout, stderr)


def _server_for(argv: list[str], env: dict[str, str]) -> ForkServer | None:
    """The fork server ``python ARGV`` with ``env`` may be forked from: the one that has imported
    torch_npu where the script imports it first, else the torch-only one; None: a fresh
    interpreter."""
    kinds = (True, False) if imports_torch_npu_first(argv) else (False,)
    servers = (_fork_server(torch_npu) for torch_npu in kinds)
    return next((s for s in servers if s is not None and s.serves(env)), None)


@functools.cache
def _fork_server(torch_npu: bool) -> ForkServer | None:
    """This process's fork server of that kind, started on first use; None where it must not be
    used: a sanitizer leg (its runtime is preloaded, its reports found by pid) or
    PINPOOL_TEST_FORKSERVER=0 (a test's own ``env`` may ask it too: ForkServer.serves)."""
    off = os.environ.get("PINPOOL_TEST_FORKSERVER", "1") == "0"
    sanitized = any(os.environ.get(v) for v in ("PINPOOL_SANITIZER_REPORTS", "LD_PRELOAD"))
    return None if off or sanitized else ForkServer(torch_npu)


def _fail_on_sanitizer_report(pid: int, what: str, proc: subprocess.CompletedProcess) -> None:
    """Under a sanitizer leg (ci/lib/sanitize.sh sets PINPOOL_SANITIZER_REPORTS), a report the
    child left (an error, or a leak in csrc/ or simcann/: test/sanitizer_reports.py) fails
    the calling test, also one that expected the child to fail."""
    reports_dir = os.environ.get("PINPOOL_SANITIZER_REPORTS")
    if not reports_dir:
        return
    from sanitizer_reports import failures_of_process

    found = failures_of_process(reports_dir, pid)
    if found:
        pytest.fail(
            f"{what} (pid {pid}, exit {proc.returncode}) left sanitizer reports:\n{found[-12000:]}"
            f"\n--- stderr ---\n{proc.stderr[-3000:]}",
            pytrace=False,
        )


def run_snippet(
    code: str,
    env: dict[str, str] | None = None,
    timeout: float = 300.0,
    expect_ok: bool = True,
) -> Isolated:
    """Run ``code`` (which assigns a JSON-serialisable value to ``result``) in a fresh ``python``
    and return that value. For short import checks and the README's own example; scenarios of
    the allocator are files (:func:`run_scenario`)."""
    program = _PRELUDE + textwrap.dedent(code) + _EPILOGUE
    return _run_child(["-c", program], "isolated snippet", env, timeout, expect_ok)


@pytest.fixture
def run_isolated() -> Callable[..., Isolated]:
    """Fixture form of :func:`run_snippet`."""
    return run_snippet


SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios")
# test/scenarios/_lib/simctl.py, loaded once by path: its ``available()`` (the tests ask it through
# ``simulator_api()`` in test/pinpool/_snippets.py) and the simulator leg's record.
_SIMCTL = os.path.join(SCENARIOS, "_lib", "simctl.py")
_spec = importlib.util.spec_from_file_location("simctl", _SIMCTL)
simctl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(simctl)


def run_scenario(
    name: str,
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
    timeout: float = 300.0,
    expect_ok: bool = True,
) -> Isolated:
    """Run ``test/scenarios/<name>.py`` by path in a process of its own (so allocator state
    never leaks between scenarios) and return what it ``report()``-ed.
    ``env`` is added to the environment (``TORCH_NPU_PINPOOL=0``: plugin off)."""
    path = os.path.join(SCENARIOS, name if name.endswith(".py") else name + ".py")
    return _run_child([path, *(args or [])], f"scenario {name}", env, timeout, expect_ok)


@pytest.fixture
def scenario() -> Callable[..., Isolated]:
    """Fixture form of :func:`run_scenario`: ``scenario("name", env={...}).result``."""
    return run_scenario


# --- markers and report header (owned by ci/; keep this section small) ------------------------
# `npu` tests need a real Ascend NPU; `simulator` tests only hold on the simulated CANN runtime
# (ci/sim-env.sh sets SIMCANN_LIB_DIR). A real NPU shows up as /dev/davinci0.
# PINPOOL_TEST_AS_NPU=1 (with SIMCANN_LIB_DIR unset; the simulator may still be the runtime
# underneath through LD_LIBRARY_PATH) makes the session treat the runtime as a real NPU: the
# path an Ascend runner takes, minus /dev/davinci0 (ci/test.sh's "as-npu" leg).


def _on_simulator() -> bool:
    return bool(os.environ.get("SIMCANN_LIB_DIR"))


def _as_npu() -> bool:
    return os.environ.get("PINPOOL_TEST_AS_NPU", "0") not in ("", "0")


def _real_npu() -> bool:
    return not _on_simulator() and (_as_npu() or os.path.exists("/dev/davinci0"))


def pytest_configure(config: pytest.Config) -> None:
    if _as_npu() and _on_simulator():
        raise pytest.UsageError(
            "PINPOOL_TEST_AS_NPU=1 treats the runtime as a real NPU, but SIMCANN_LIB_DIR is set "
            "(the simulator's control API would be visible): run with SIMCANN_LIB_DIR unset, "
            "e.g. 'env -u SIMCANN_LIB_DIR PINPOOL_TEST_AS_NPU=1 python -m pytest ...'"
        )


def pytest_report_header(config: pytest.Config) -> list[str]:
    from importlib import metadata

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    if _on_simulator():
        runtime = f"simulated CANN ({os.environ['SIMCANN_LIB_DIR']})"
    elif _as_npu():
        runtime = "treated as a real NPU (PINPOOL_TEST_AS_NPU=1, no simulator API)"
    else:
        runtime = "real NPU" if _real_npu() else "no NPU, no simulator"
    return [
        f"pinpool pair: {os.environ.get('PINPOOL_PAIR', '(not set)')}: torch {version('torch')},"
        f" torch_npu {version('torch_npu')}; runtime: {runtime}"
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_npu = pytest.mark.skip(reason="needs a real Ascend NPU")
    skip_sim = pytest.mark.skip(reason="simulated-runtime check (SIMCANN_LIB_DIR not set)")
    real, sim = _real_npu(), _on_simulator()
    skip_injected = pytest.mark.skip(
        reason="injected sanitizer reports: only in a sanitizer leg (ci/lib/sanitize.sh)"
    )
    in_leg = bool(os.environ.get("PINPOOL_SANITIZER_REPORTS"))
    for item in items:
        if item.get_closest_marker("sanitizer_injected") is not None and not in_leg:
            item.add_marker(skip_injected)
        if item.get_closest_marker("npu") is not None:
            simctl.record_use(item.nodeid)  # runs in the as-NPU leg, not here: it selects it
            if not real:
                item.add_marker(skip_npu)
        if item.get_closest_marker("simulator") is not None and not sim:
            item.add_marker(skip_sim)
