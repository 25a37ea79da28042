"""Runtime-neutral helpers for the plugin's scenario files (``test/scenarios/*.py``).

A scenario is a small program that runs by path in a fresh interpreter, on a real Ascend NPU or
on the simulated CANN runtime alike::

    python test/scenarios/<name>.py            # plugin on
    TORCH_NPU_PINPOOL=0 python test/scenarios/<name>.py   # torch_npu's own allocator

It imports this module first (torch, torch_npu, then the plugin unless ``TORCH_NPU_PINPOOL=0``),
takes its inputs from environment variables, and ends with ``report(value)``: one line
``PINPOOL_RESULT:<json>`` that ``run_scenario`` in ``test/conftest.py`` parses. Everything here
uses torch / torch_npu / plugin APIs only; simulator state lives in ``simctl.py``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch
import torch_npu

import torch_npu_pinpool

RESULT_TAG = "PINPOOL_RESULT:"
PLUGIN: bool = torch_npu_pinpool.is_active()
N = 1024  # elements of the default test tensor (float32: 4 KiB)


def npu_version() -> tuple[int, int]:
    """torch_npu's (major, minor)."""
    major, minor = torch_npu.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def native_pools() -> bool:
    """Whether torch_npu itself calls the host allocator's pool hooks (>= 2.11)."""
    return npu_version() >= (2, 11)


# host_memory_stats() keys: torch 2.10 renamed them (held: reserved_bytes -> allocated_bytes,
# in use: allocated_bytes -> active_bytes).
def _stat_keys() -> tuple[str, str]:
    if npu_version() >= (2, 10):
        return "allocated_bytes.current", "active_bytes.current"
    return "reserved_bytes.current", "allocated_bytes.current"


def held_bytes() -> int:
    """Pinned bytes the registered host allocator holds (cached or in use, every pool)."""
    return int(torch_npu.npu.host_memory_stats().get(_stat_keys()[0], 0))


def in_use_bytes() -> int:
    """Pinned bytes the registered host allocator has handed out and not got back."""
    return int(torch_npu.npu.host_memory_stats().get(_stat_keys()[1], 0))


def pool_bytes() -> int:
    """Bytes every graph pool of the plugin holds (0 with the plugin off)."""
    return sum(p["bytes_held"] for p in torch_npu_pinpool.pool_stats())


def pinned(value: float, n: int = N) -> torch.Tensor:
    """A pinned float32 tensor of ``n`` elements, all ``value``."""
    return torch.full((n,), float(value)).pin_memory()


def values(t: torch.Tensor) -> list[float]:
    """The distinct values of a tensor, sorted (a device tensor is copied to the host)."""
    return sorted(set(t.cpu().tolist()))


def side_stream() -> torch.npu.Stream:
    """Make a fresh side stream current (graphs cannot be captured on the default stream)."""
    stream = torch.npu.Stream()
    torch.npu.set_stream(stream)
    return stream


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def report(value: Any) -> None:
    """The scenario's result, for ``run_scenario`` (and for a reader running it by hand)."""
    sys.stdout.flush()
    print(RESULT_TAG + json.dumps(value), flush=True)


torch.npu.set_device(0)
