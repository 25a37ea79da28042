"""The simulated CANN runtime's control API, for scenarios that check simulator state.

Only tests marked ``simulator`` may depend on it. ``available()`` is False on a real NPU and in
the "as a real NPU" leg (``SIMCANN_LIB_DIR`` unset), so a runtime-neutral scenario can take a
stronger simulator-only check as an extra, never as its only assertion::

    if simctl.available():
        checks["live"] = simctl.host_bytes()
"""

from __future__ import annotations

import ctypes
import os

_lib = None


def available() -> bool:
    return bool(os.environ.get("SIMCANN_LIB_DIR"))


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
    """Make the next ``n`` calls of ``what`` fail (see test/simcann/README.md)."""
    assert lib().simcann_set_fault(what.encode(), n) == 0


def violations() -> int:
    """Hazards the runtime saw (replay over freed memory, ...)."""
    return int(lib().simcann_violation_count())
