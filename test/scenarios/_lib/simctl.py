"""The simulated CANN runtime's control API, for scenarios that check simulator state.

Only tests marked ``simulator`` may depend on it. ``available()`` is False on a real NPU and in
the "as a real NPU" leg (``SIMCANN_LIB_DIR`` unset), so a runtime-neutral scenario can take a
stronger simulator-only check as an extra, never as its only assertion::

    if simctl.available():
        checks["live"] = simctl.host_bytes()

``available()`` is the one question whose answer differs in that leg (the runtime underneath is
the same simulator, which reads neither variable), so every test and scenario asks it here, or
through ``simulator_api()`` in ``test/pinpool/_snippets.py``, never the variable itself
(ci/lib/check_sim_markers.py enforces it). With ``PINPOOL_SIM_API_RECORD=FILE`` (the simulator
leg, ci/legs/simulator.sh) each process appends the id of the test that asked to FILE:
ci/lib/as_npu_selection.py picks the as-a-real-NPU leg's tests from it.
"""

from __future__ import annotations

import ctypes
import os
import sys

_lib = None
RECORD_ENV = "PINPOOL_SIM_API_RECORD"
_recorded: set[str] = set()


def available() -> bool:
    """Whether the simulator's control API is visible to this process (``SIMCANN_LIB_DIR`` set)."""
    record_use()
    return bool(os.environ.get("SIMCANN_LIB_DIR"))


def record_use(who: str | None = None) -> None:
    """Append ``who`` (default: the test running now, ``PYTEST_CURRENT_TEST``, which the
    scenario processes inherit) to the file ``$PINPOOL_SIM_API_RECORD``, once per process.
    Asked outside a test (module-level code at collection): the test file whose code asked;
    failing that ``*``, which selects every test. No variable, no record."""
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    if who is None:
        current = os.environ.get("PYTEST_CURRENT_TEST")  # "NODEID (call)"
        who = current.rsplit(" (", 1)[0] if current else _asking_test_file()
    if who in _recorded:
        return
    _recorded.add(who)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (who + "\n").encode())  # one write: lines of concurrent processes stay whole
    finally:
        os.close(fd)


def _asking_test_file() -> str:
    here = os.path.abspath(__file__)  # REPO/test/scenarios/_lib/simctl.py
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if os.path.basename(name).startswith("test_") and name.endswith(".py"):
            return os.path.relpath(name, repo)
        frame = frame.f_back
    return "*"


def lib() -> ctypes.CDLL:
    """The simulator (the same library and state torch_npu loaded)."""
    global _lib
    if _lib is None:
        if not available():
            raise RuntimeError(
                "this scenario reads simulated-runtime state: run it on the simulated CANN "
                "runtime (source ci/sim-env.sh PAIR), or mark its test 'simulator'"
            )
        sim = ctypes.CDLL(os.path.join(os.environ["SIMCANN_LIB_DIR"], "libascendcl.so"))
        sim.simcann_host_bytes_live.restype = ctypes.c_int64
        sim.simcann_host_malloc_calls.restype = ctypes.c_int64
        sim.simcann_set_task_delay_us.argtypes = [ctypes.c_int64]
        sim.simcann_set_task_delay_us.restype = None
        sim.simcann_set_fault.argtypes = [ctypes.c_char_p, ctypes.c_int64]
        sim.simcann_violation_count.restype = ctypes.c_int64
        _lib = sim
    return _lib


def host_bytes() -> int:
    """Pinned bytes the runtime has handed out and not got back (the truth, every allocator)."""
    return int(lib().simcann_host_bytes_live())


def host_pins() -> int:
    """aclrtMallocHost* calls so far: what the runtime pinned, whichever allocator asked."""
    return int(lib().simcann_host_malloc_calls())


def set_delay_us(us: int) -> None:
    """Each stream task takes this long: copies stay queued while the host runs on."""
    lib().simcann_set_task_delay_us(us)


def fail_next(what: str, n: int = 1) -> None:
    """Make the next ``n`` calls of ``what`` fail (see simcann/README.md)."""
    assert lib().simcann_set_fault(what.encode(), n) == 0


def violations() -> int:
    """Hazards the runtime saw (replay over freed memory, ...)."""
    return int(lib().simcann_violation_count())
