"""Runtime-neutral helpers for the plugin's scenario files (``test/scenarios/*.py``).

A scenario is a small program that runs by path in a process of its own, on a real Ascend NPU or
on the simulated CANN runtime alike::

    python test/scenarios/<name>.py            # plugin on
    TORCH_NPU_PINPOOL=0 python test/scenarios/<name>.py   # torch_npu's own allocator

It imports this module first, as ``from _lib.scenario import ...`` (torch, torch_npu, then the
plugin unless ``TORCH_NPU_PINPOOL=0``), takes its inputs from environment variables, and ends
with ``report(value)``: one line ``PINPOOL_RESULT:<json>`` that ``run_scenario`` in
``test/conftest.py`` parses. Everything here
uses torch / torch_npu / plugin APIs only; simulator state lives in ``simctl.py``.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from typing import Any

import torch
import torch_npu

import torch_npu_pinpool

from .result import report  # noqa: F401 (the scenarios import it from here)

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
    return int(torch_npu_pinpool.host_memory_stats().get(_stat_keys()[0], 0))


def in_use_bytes() -> int:
    """Pinned bytes the registered host allocator has handed out and not got back."""
    return int(torch_npu_pinpool.host_memory_stats().get(_stat_keys()[1], 0))


def pools() -> list[dict[str, Any]]:
    """The plugin's pool_stats() once a pass gave back what dead graphs whose replays are over
    hold (pool_stats() itself only reads); [] with the plugin off."""
    if not PLUGIN:
        return []
    torch_npu_pinpool._ext.process_pending()
    return torch_npu_pinpool.pool_stats()


def pool_bytes() -> int:
    """Bytes every graph pool of the plugin holds (0 with the plugin off)."""
    return sum(p["bytes_held"] for p in pools())


def pinned(value: float, n: int = N) -> torch.Tensor:
    """A pinned float32 tensor of ``n`` elements, all ``value``."""
    return torch.full((n,), float(value)).pin_memory()


def values(t: torch.Tensor) -> list[float]:
    """The distinct values of a tensor, sorted (a device tensor is copied to the host)."""
    return sorted(set(t.cpu().tolist()))


def settled_held(baseline: int) -> int:
    """Pinned bytes held above ``baseline`` once garbage is collected, queued work has run and
    ``host_empty_cache()`` gave the cached blocks back."""
    gc.collect()
    torch.npu.synchronize()
    torch_npu_pinpool.host_empty_cache()
    return held_bytes() - baseline


def capture_pinned_copy(capturing: Any, dev: torch.Tensor, value: float) -> None:
    """In the capture ``with capturing``: a ``non_blocking`` copy into ``dev`` from a pinned
    float32 tensor of ``value`` (``dev``'s element count), freed inside the capture."""
    with capturing:
        x = pinned(value, dev.numel())
        dev.copy_(x, non_blocking=True)
        del x


def replay_over_others(graph: Any, dev: torch.Tensor, others: int = 4) -> list[float]:
    """``graph.replay()`` after ``others`` other pinned tensors (9.0) were written, the blocks a
    pinned input given back too early would be handed to; returns ``values(dev)`` once it ran."""
    junk = [pinned(9.0) for _ in range(others)]
    graph.replay()
    torch.npu.synchronize()
    result = values(dev)
    del junk
    return result


def side_stream() -> torch.npu.Stream:
    """Make a fresh side stream current (graphs cannot be captured on the default stream)."""
    stream = torch.npu.Stream()
    torch.npu.set_stream(stream)
    return stream


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def end_graphs(graphs: list, how: str) -> None:
    """End every graph in ``graphs`` (emptied) by ``how``: ``"reset"`` calls ``reset()``,
    ``"gc"`` drops the last references and collects (no ``reset``, as TorchAir and vllm-ascend
    drop graphs)."""
    if how == "reset":
        for g in graphs:
            g.reset()
    elif how != "gc":
        raise ValueError(f"end graphs by 'reset' or 'gc', not {how!r}")
    graphs.clear()
    gc.collect()


def reset_after_failed_capture(out: dict, graph: Any) -> None:
    """``graph.reset()`` after a capture that may have raised: ``out["reset"]`` is True or the
    error it raised, ``out["capturing"]`` the plugin's capture flag of every pool left (none may
    be set; ``[]`` with the plugin off)."""
    try:
        graph.reset()
        out["reset"] = True
    except RuntimeError as e:
        out["reset"] = str(e)
    out["capturing"] = [p["capturing"] for p in torch_npu_pinpool.pool_stats()] if PLUGIN else []


class Churn:
    """Another thread that keeps pinning junk (``value``) and calling ``host_empty_cache()``
    while the scenario runs, as a serving engine's eager side does: a block given back too early
    is handed to it and overwritten. ``with Churn(): ...``"""

    def __init__(self, value: float = -1.0, keep: int = 64) -> None:
        self._value, self._keep = value, keep
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        junk = []  # kept alive, so each new pin_memory() may get a block given back
        while not self._stop.is_set():
            junk += [pinned(self._value) for _ in range(4)]
            if len(junk) >= self._keep:
                junk.clear()
                torch_npu_pinpool.host_empty_cache()

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def accelerator_graph_available() -> bool:
    """Whether torch.accelerator.Graph captures on the NPU: torch has it (>= 2.12) and torch_npu
    registers the NPU's graph implementation for it (torch_npu 2.12.0.post3 does not: "Graph is
    not supported on device type: npu")."""
    graph_class = getattr(getattr(torch, "accelerator", None), "Graph", None)
    if graph_class is None:
        return False
    try:
        graph_class()
    except RuntimeError as e:
        if "not supported on device type" in str(e):
            return False
        raise  # any other failure to construct one is a failure, not a missing feature
    return True


def torchair_counts_captures() -> bool:
    """Whether this TorchAir counts its aclgraph captures in torch._dynamo's
    ``counters["npugraph_ex"]`` (``captured_<graph>``, the recapture counts); torch_npu 2.9.0's
    TorchAir keeps no such counter."""
    import inspect

    from torch_npu.dynamo.torchair._acl_concrete_graph import acl_graph

    return 'counters["npugraph_ex"]' in inspect.getsource(acl_graph)


torch.npu.set_device(0)


def site(marker: str) -> str:
    """``"FILE:LINE"`` of the line in the calling scenario file that carries the comment
    ``# site: MARKER``: what the audit report (``TORCH_NPU_PINPOOL_REPORT``) names as the user's
    code for the call on that line (the file as Python names it, absolute when run by path)."""
    path = sys._getframe(1).f_code.co_filename
    with open(path) as f:
        for number, text in enumerate(f, start=1):
            if text.rstrip().endswith(f"# site: {marker}"):
                return f"{path}:{number}"
    raise ValueError(f"no line ends with '# site: {marker}' in {path}")


def _reporting() -> bool:
    return PLUGIN and torch_npu_pinpool._ext.report_enabled()


def hazards() -> dict[str, dict[str, Any]]:
    """The audit report's entries by kind (``torch_npu_pinpool.report()``); ``{}`` when the
    plugin or the report (``TORCH_NPU_PINPOOL_REPORT``) is off."""
    if not _reporting():
        return {}
    torch_npu_pinpool._ext.process_pending()  # blocks of dead graphs settle (leaked_by_native)
    return {h["kind"]: h for h in torch_npu_pinpool.report(wait=10.0)["hazards"]}


def checks_in_flight() -> int | None:
    """The audit's checks launched and not yet finished (None when the report is off)."""
    if not _reporting():
        return None
    return int(torch_npu_pinpool._ext.audit_sizes()["in_flight"])


def report_checks() -> dict[str, int]:
    """How many H2D copies / replays the report compared at completion, and how many reads it
    could not check (``{}`` when the plugin is off)."""
    if not _reporting():
        return {}
    return dict(torch_npu_pinpool._ext.report_checks())
