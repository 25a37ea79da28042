"""torch_npu_pinpool: pinned host memory that is correct and frugal inside ACLGraph capture.

Installing the package is enough: torch's backend autoload (the ``torch.backends`` entry
point) or ``import torch_npu_pinpool`` activates it. ``TORCH_NPU_PINPOOL=0`` turns it off.
"""

from __future__ import annotations

import enum
import logging
import math
import os
import threading
from typing import Any

from ._host_cache import (
    host_empty_cache,
    host_memory_stats,
    reset_accumulated_host_memory_stats,
    reset_peak_host_memory_stats,
)
from ._version import __version__, check_torch_npu, env_off, major_minor, min_torch_npu

__all__ = [
    "__version__",
    "Activation",
    "activate",
    "is_active",
    "pool_stats",
    "mode",
    "report",
    "report_now",
    "host_empty_cache",
    "host_memory_stats",
    "reset_accumulated_host_memory_stats",
    "reset_peak_host_memory_stats",
]

log = logging.getLogger("torch_npu_pinpool")
_lock = threading.Lock()
_ext: Any = None  # the loaded extension (torch_npu_pinpool._C) once active
_warned_untested = False  # the untested-torch_npu warning is given once per process


def _disabled() -> bool:
    return env_off("TORCH_NPU_PINPOOL")


def _import_torch_npu():
    """torch and torch_npu, once torch_npu's release is known to be supported (the check
    reads only ``torch_npu.__version__``, before anything of torch_npu is used)."""
    global _warned_untested
    try:
        import torch
        import torch_npu
    except ImportError as e:
        raise ImportError(
            "torch_npu_pinpool needs torch_npu (and the torch it was built for); install "
            f"torch_npu >= {min_torch_npu()} first. ({e})"
        ) from e
    refusal, warning = check_torch_npu(torch_npu.__version__, "activate")
    if refusal:
        raise RuntimeError(
            f"torch_npu_pinpool: {refusal} (TORCH_NPU_PINPOOL=0 turns the plugin off.)"
        )
    if warning and not _warned_untested:
        _warned_untested = True
        log.warning("torch_npu_pinpool: %s", warning)
    return torch, torch_npu


def _load_extension():
    torch, _ = _import_torch_npu()
    from . import _C as ext

    if major_minor(torch.__version__) != major_minor(ext.built_with_torch):
        raise RuntimeError(
            f"torch_npu_pinpool was built against torch {ext.built_with_torch} but torch "
            f"{torch.__version__} is running. Reinstall it with this environment's pip: "
            "pip install --force-reinstall --no-deps <torch_npu_pinpool source or sdist>"
        )
    return ext


def mode() -> str:
    """``"backport"`` on torch_npu <= 2.10 (only the Python hooks register captures),
    ``"native-present"`` on >= 2.11 (torch_npu also calls the allocator's pool hooks; the
    hooks on the graph classes are installed in both modes)."""
    _, torch_npu = _import_torch_npu()
    return "backport" if major_minor(torch_npu.__version__) < (2, 11) else "native-present"


class Activation(enum.Enum):
    """What ``activate()`` did. Only ``ACTIVATED`` is true, so ``if activate():`` reads as
    "this call activated it"."""

    ACTIVATED = "activated"  # this call registered the allocator
    ALREADY_ACTIVE = "already_active"  # an earlier call (or the autoload) did
    SWITCHED_OFF = "switched_off"  # TORCH_NPU_PINPOOL=0: nothing registered or patched

    def __bool__(self) -> bool:
        return self is Activation.ACTIVATED


def activate() -> Activation:
    """Replace torch_npu's pinned host allocator and hook graph capture.

    Returns which case happened (``Activation``; true only for ``ACTIVATED``). Safe after
    pinned tensors exist: their frees and events still go to torch_npu's allocator.
    """
    global _ext
    if _disabled():
        return Activation.SWITCHED_OFF
    # Outside the lock: when torch is not imported yet, `import torch` runs torch's backend
    # autoload, whose entry point calls _autoload() -> activate() on this same thread.
    _import_torch_npu()
    with _lock:
        if _ext is not None and _ext.is_active():
            return Activation.ALREADY_ACTIVE
        ext = _load_extension()
        from . import _report

        report = _report.requested()
        if report is not None and not ext.audit_built:
            _report.warn_compiled_out()
        elif report is not None:  # before the allocator is made: csrc/audit/audit.h
            _report.interval()  # a bad value raises here, naming the fix, before anything is on
            ext.enable_report(_report.library_dirs(), os.getcwd(), _report.sample())
        from . import _hooks

        # The graph hooks go in before the allocator is registered: if they cannot, this raises
        # with nothing registered (pinned memory stays torch_npu's), and a later activate()
        # tries again - never an allocator that cannot see captures.
        ext.prepare()
        _hooks.install(ext, audit=ext.report_enabled())
        newly = ext.activate()
        _ext = ext
        if newly:
            # A clear error for pageable CPU <-> NPU copies during capture (issue #11):
            # Note [Pageable copy guard] in csrc/copy/pageable_copy_guard.cpp.
            # TORCH_NPU_PINPOOL_COPY_GUARD=0 leaves torch_npu's copy_ kernel alone.
            if not env_off("TORCH_NPU_PINPOOL_COPY_GUARD"):
                ext.install_pageable_copy_guard()
            elif ext.report_enabled():
                ext.install_copy_direction_scope()  # the report needs each copy's direction
            if ext.report_enabled():
                _report.start(ext, report or "")
            log.info(
                "torch_npu_pinpool %s active (%s mode): pinned memory is capture-aware",
                __version__,
                mode(),
            )
        return Activation.ACTIVATED if newly else Activation.ALREADY_ACTIVE


def is_active() -> bool:
    """Whether our allocator is the one in ATen's host-allocator registry."""
    return _ext is not None and _ext.registered_is_ours()


def pool_stats() -> list[dict[str, Any]]:
    """One dict per graph memory pool on the host side: ``id``, ``device`` (a pool id names
    one pool per device), ``graphs`` (graphs using it), ``capturing``, ``released`` (no graph
    left: its id is erased, its blocks go back as they settle), ``blocks``, ``bytes_held``,
    ``bytes_in_use``, ``adopted_blocks`` (pinned before the capture and used by it). Only
    reads: what dead graphs hold goes back on the allocator's next pass (a pin, a graph's
    capture or death, ``host_memory_stats()``, ``host_empty_cache()``)."""
    if _ext is None:
        return []
    return list(_ext.pool_stats())


def report(wait: float = 0.0) -> dict[str, Any]:
    """The audit report so far (``TORCH_NPU_PINPOOL_REPORT``): ``{"torch_npu", "plugin",
    "hazards": [{"kind", "count", "bytes", "affects", "sites"}, ...]}``, every kind listed.
    ``wait``: give copies and replays still queued up to that many seconds to complete and be
    checked first. Raises ``RuntimeError`` when the report is off (set the variable before the
    process starts) or the plugin is not active, ``ValueError`` for a ``wait`` that is not a
    finite number of seconds >= 0."""
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait < math.inf:
        raise ValueError(
            f"torch_npu_pinpool.report: wait must be a number of seconds >= 0 (finite), got "
            f"{wait!r}."
        )
    if _ext is not None and not _ext.audit_built:
        from ._report import COMPILED_OUT

        raise RuntimeError(COMPILED_OUT)
    if _ext is None or not _ext.report_enabled():
        raise RuntimeError(
            "torch_npu_pinpool: the report is off; set TORCH_NPU_PINPOOL_REPORT=1 (or a JSON "
            "path) before the process starts, or run it with "
            "`python -m torch_npu_pinpool audit -- python PROGRAM ARGS`."
        )
    from . import _report

    return _report.data(_ext, wait_s=wait)


def report_now() -> dict[str, Any]:
    """Write the audit report now, for a process that must not stop (a server): prints it to
    stderr and writes it to the report path (with ``TORCH_NPU_PINPOOL_REPORT_INTERVAL_S``, one
    more line there; else the JSON document, which the exit rewrites). Returns it, as
    :func:`report`. SIGUSR2 does the same, unless the program handles SIGUSR2 itself. Raises
    ``RuntimeError`` when the report is off."""
    from . import _report_writer

    if _ext is not None and not _ext.audit_built:
        from ._report import COMPILED_OUT

        raise RuntimeError(COMPILED_OUT)
    return _report_writer.report_now()


def _autoload() -> None:
    """The ``torch.backends`` entry point: torch calls it while importing torch."""
    if _disabled():
        return
    try:
        activate()
    except Exception as e:  # never break `import torch`
        log.warning("torch_npu_pinpool not activated: %s", e)


def _loaded_by_torch_autoload() -> bool:
    """Whether this module is being imported while torch itself is still being imported:
    that is torch's backend autoload (``torch._import_device_backends``) loading the
    ``torch.backends`` entry point, which calls ``_autoload()`` right after. An exception from
    here would make ``import torch`` fail (torch turns it into a RuntimeError), so activation
    is left to ``_autoload()``, which logs failures instead of raising. (``_initializing`` is
    what importlib sets on a module's spec while the module executes.)"""
    import sys

    torch = sys.modules.get("torch")
    spec = getattr(torch, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _imported_for_the_command_line() -> bool:
    """Whether this package is being imported by ``python -m torch_npu_pinpool`` (runpy's
    ``_run_module_as_main`` is locating this package's ``__main__``). The commands activate the
    plugin themselves: ``doctor`` explains why it cannot (e.g. a source checkout without a
    built ``_C``), ``audit`` activates it in the program it runs, not in its own process. Any
    other ``python -m`` target that imports this package activates it as usual."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_run_module_as_main" and "runpy" in code.co_filename:
            return str(frame.f_locals.get("mod_name", "")).split(".")[0] == __name__
        frame = frame.f_back
    return False


if not _disabled() and not _loaded_by_torch_autoload() and not _imported_for_the_command_line():
    activate()
