"""The one place of helpers shared by the stress scenarios (``test/stress/scenarios/*.py``).

Each scenario is a file that runs by path in its own process (``run_scenario`` in
``test/conftest.py``, or by hand in a pair's environment); it puts this directory on
``sys.path``, imports what it needs from here, and ends with ``report(value)``.

Importing this module imports torch, torch_npu and -- unless TORCH_NPU_PINPOOL=0 -- the plugin.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import sys
from typing import Any

import torch
import torch_npu  # noqa: F401

import torch_npu_pinpool  # activates on import, unless TORCH_NPU_PINPOOL=0

PLUGIN = os.environ.get("TORCH_NPU_PINPOOL", "1") != "0"

torch.npu.set_device(0)
U8 = torch.uint8
RESULT_TAG = "PINPOOL_RESULT:"  # the line run_scenario (test/conftest.py) parses


def env_int(name: str, default: int) -> int:
    """A scenario's integer input: environment variable ``name``, else ``default``."""
    return int(os.environ.get(name, default))


def report(value: Any) -> None:
    """The scenario's result: one line ``PINPOOL_RESULT:<json>`` on stdout, as the plugin's
    scenario files print it (test/scenarios/_lib/result.py), for ``run_scenario`` and for a reader
    running the scenario by hand."""
    sys.stdout.flush()
    print(RESULT_TAG + json.dumps(value), flush=True)


class Sim:
    """ctypes view of the simulated runtime's control API (simcann/README.md)."""

    def __init__(self):
        lib_dir = os.environ.get("SIMCANN_LIB_DIR")
        name = os.path.join(lib_dir, "libascendcl.so") if lib_dir else "libascendcl.so"
        self.lib = ctypes.CDLL(name)
        L = self.lib
        L.simcann_host_bytes_live.restype = ctypes.c_int64
        L.simcann_violation_count.restype = ctypes.c_int64
        L.simcann_set_task_delay_us.argtypes = [ctypes.c_int64]
        L.simcann_set_task_delay_us.restype = None
        L.simcann_set_fault.argtypes = [ctypes.c_char_p, ctypes.c_int64]
        L.simcann_set_fault.restype = ctypes.c_int

    def host_bytes_live(self) -> int:
        return int(self.lib.simcann_host_bytes_live())

    def violations(self) -> int:
        return int(self.lib.simcann_violation_count())

    def set_task_delay_us(self, us: int) -> None:
        self.lib.simcann_set_task_delay_us(int(us))

    def set_fault(self, what: str, n: int) -> None:
        """Fail the n-th attempt of `what` from now (1 = the next one); 0 disarms.
        what: malloc_host, capture_begin, capture_end, invalidate_capture."""
        rc = self.lib.simcann_set_fault(what.encode(), int(n))
        if rc != 0:
            raise ValueError(f"simcann_set_fault({what!r}) -> {rc}")


sim = Sim()


def host_empty_cache():
    fn = getattr(torch_npu.npu, "host_empty_cache", None) or torch_npu_pinpool.host_empty_cache
    fn()


def host_stats() -> dict:
    fn = getattr(torch_npu.npu, "host_memory_stats", None) or torch_npu_pinpool.host_memory_stats
    return dict(fn())


def held() -> dict:
    """Pinned bytes held after gc + device sync + host_empty_cache, twice.

    ``sim_live_1st``: after the first host_empty_cache (what a user who calls it once sees);
    ``sim_live`` / ``allocated_bytes``: after a second sync + host_empty_cache, so work an
    allocator defers to its next call (retiring a graph pool after an event it records) is done.
    The leak checks use the second; test_single_host_empty_cache_releases checks the first.
    """
    gc.collect()
    torch.npu.synchronize()
    host_empty_cache()
    first = sim.host_bytes_live()
    torch.npu.synchronize()
    host_empty_cache()
    st = host_stats()
    return {
        "sim_live": sim.host_bytes_live(),
        "allocated_bytes": st.get("allocated_bytes.current"),
        "sim_live_1st": first,
    }


def tolerate_stale_device_capture():
    """Work around a torch_npu < 2.10 bug, so fault cases can still check this allocator.

    torch_npu 2.8 / 2.9's device caching allocator keeps a capture whose capture_begin or
    capture_end failed in its ``captures_underway``; the ``torch.npu.empty_cache()`` that every
    later ``torch.npu.graph`` enters with then fails "INTERNAL ASSERT captures_underway.empty()"
    (NPUCachingAllocator.cpp; the same with TORCH_NPU_PINPOOL=0). That call only trims the
    device cache: let exactly that assert pass so the following captures still exercise the
    pinned host allocator. No-op on torch_npu >= 2.10.
    """
    version = tuple(int(v) for v in torch_npu.__version__.split("+")[0].split(".")[:2])
    if version >= (2, 10):
        return
    native_empty_cache = torch.npu.empty_cache

    def empty_cache():
        try:
            native_empty_cache()
        except RuntimeError as e:
            if "captures_underway.empty()" not in str(e):
                raise

    torch.npu.empty_cache = empty_cache


def warm_up():
    """Lazy init (streams, events, device allocator, capture stream) outside any measurement."""
    x = torch.ones(16, dtype=U8).pin_memory().to("npu", non_blocking=True)
    torch.npu.synchronize()
    del x
    g = torch.npu.NPUGraph()
    d = torch.empty(16, dtype=U8, device="npu")
    h = torch.ones(16, dtype=U8).pin_memory()
    with torch.npu.graph(g):
        d.copy_(h, non_blocking=True)
    g.replay()
    torch.npu.synchronize()
    g.reset()
    del g, d, h
    gc.collect()
    gc.freeze()  # later gc.collect() calls only scan what the scenario made: fast


def wrong(dev_tensor, value) -> int:
    """Number of bytes of a device tensor that differ from `value`."""
    import numpy as np

    return int(np.count_nonzero(dev_tensor.cpu().numpy() != value))


def wrong_host(host_tensor, value) -> int:
    """Number of bytes of a CPU (pinned) uint8 tensor that differ from `value`."""
    import numpy as np

    return int(np.count_nonzero(host_tensor.numpy() != value))
