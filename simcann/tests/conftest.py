"""pytest wiring of the simulator's own tests (simcann/tests/): the ``simulator`` marker and the
``run_isolated`` fixture. Self-contained: the plugin's tests (test/) use the simulator, never the
other way round, so nothing here comes from test/conftest.py.

- ``simulator``: these tests need the built library (SIMCANN_LIB_DIR, exported by
  ``source ci/sim-env.sh PAIR``); without it they are skipped.
- ``run_isolated(code, env=None, timeout=300, expect_ok=True)``: the runtime's state is
  process-global, so every snippet runs in a fresh ``python`` (this environment plus ``env``, in
  an empty directory). The snippet assigns a JSON-serialisable value to ``result``; the fixture
  returns it with the exit code and output. With ``expect_ok`` a non-zero exit fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

_HERE = Path(__file__).resolve().parent
_MARK = "SIMCANN_TEST_RESULT="


@dataclass
class Snippet:
    """What a snippet run in its own interpreter left: exit code, output, its ``result``."""

    returncode: int
    stdout: str
    stderr: str
    result: Any


def _program(code: str) -> str:
    body = textwrap.dedent(code)
    tail = f"import json as _j, sys as _s\n_s.stdout.flush()\nprint({_MARK!r} + _j.dumps(result))"
    return "result = None\n" + body + "\n" + tail + "\n"


def _run(code: str, env=None, timeout: float = 300.0, expect_ok: bool = True) -> Snippet:
    with tempfile.TemporaryDirectory(prefix="simcann-test-") as cwd:
        done = subprocess.run(
            [sys.executable, "-c", _program(code)],
            env={**os.environ, **(env or {})},
            cwd=cwd,  # not the checkout: its sources must not shadow installed packages
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    found = [ln[len(_MARK) :] for ln in done.stdout.splitlines() if ln.startswith(_MARK)]
    if expect_ok and done.returncode != 0:
        pytest.fail(
            f"snippet exited {done.returncode}\n--- stdout ---\n{done.stdout[-6000:]}"
            f"\n--- stderr ---\n{done.stderr[-6000:]}",
            pytrace=False,
        )
    result = json.loads(found[-1]) if found else None
    return Snippet(done.returncode, done.stdout, done.stderr, result)


@pytest.fixture
def run_isolated() -> Callable[..., Snippet]:
    return _run


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "simulator: needs the simulated CANN runtime (SIMCANN_LIB_DIR)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("SIMCANN_LIB_DIR"):
        return
    skip = pytest.mark.skip(reason="simulator not built (SIMCANN_LIB_DIR not set)")
    for item in items:  # this hook sees the whole session: mark only this folder's tests
        if _HERE in Path(str(item.path)).parents and item.get_closest_marker("simulator"):
            item.add_marker(skip)
