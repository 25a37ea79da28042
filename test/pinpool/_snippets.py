"""Shared prelude for the plugin's isolated scenarios (run through ``run_isolated``).

``PRELUDE`` imports torch + torch_npu over the simulated runtime, then torch_npu_pinpool
(``TORCH_NPU_PINPOOL=0`` in ``env`` leaves it off: the native allocator runs), and opens the
simulator's control API (same library, same state).
"""

from __future__ import annotations

import os

import pytest

PRELUDE = r'''
import ctypes, gc, os, threading
import torch, torch_npu
import torch_npu_pinpool
SIM = ctypes.CDLL(os.path.join(os.environ["SIMCANN_LIB_DIR"], "libascendcl.so"))
SIM.simcann_host_bytes_live.restype = ctypes.c_int64
SIM.simcann_set_task_delay_us.argtypes = [ctypes.c_int64]
SIM.simcann_set_task_delay_us.restype = None
SIM.simcann_set_fault.argtypes = [ctypes.c_char_p, ctypes.c_int64]
SIM.simcann_violation_count.restype = ctypes.c_int64

def host_bytes():
    return int(SIM.simcann_host_bytes_live())

def set_delay_us(us):
    SIM.simcann_set_task_delay_us(us)

def fail_next(what, n=1):
    assert SIM.simcann_set_fault(what.encode(), n) == 0

def npu_version():
    return tuple(int(x) for x in torch_npu.__version__.split("+")[0].split(".")[:2])

PLUGIN = torch_npu_pinpool.is_active()
N = 1024
torch.npu.set_device(0)
DEV = torch.zeros(N, device="npu")
torch.npu.synchronize()

def pinned(value, n=N):
    return torch.full((n,), float(value)).pin_memory()

def values(t):
    """The distinct values of a tensor, as a sorted list."""
    return sorted(set(t.cpu().tolist()))
'''

PLUGIN_ON = {}
PLUGIN_OFF = {"TORCH_NPU_PINPOOL": "0"}
ON_OFF = pytest.mark.parametrize(
    "plugin", [pytest.param(True, id="plugin"), pytest.param(False, id="native")]
)


def env_for(plugin: bool, **extra: str) -> dict[str, str]:
    env = dict(PLUGIN_ON if plugin else PLUGIN_OFF)
    env.update(extra)
    return env


def pair() -> tuple[int, int]:
    """The torch_npu pair under test, from ``PINPOOL_PAIR`` (set by ci/sim-env.sh)."""
    value = os.environ.get("PINPOOL_PAIR", "2.13")
    major, minor = value.split(".")[:2]
    return int(major), int(minor)


def native_pools() -> bool:
    return pair() >= (2, 11)
