"""torch_npu_pinpool: pinned host memory that is correct and frugal inside ACLGraph capture.

Installing the package is enough: torch's backend autoload (the ``torch.backends`` entry
point) or ``import torch_npu_pinpool`` activates it. ``TORCH_NPU_PINPOOL=0`` turns it off.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from ._version import MIN_TORCH_NPU, __version__

__all__ = ["__version__", "activate", "is_active", "pool_stats", "mode"]

log = logging.getLogger("torch_npu_pinpool")
_lock = threading.Lock()
_ext: Any = None  # the loaded extension (torch_npu_pinpool._C) once active


def _parse(version: str) -> tuple[int, int]:
    major, minor = version.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _disabled() -> bool:
    return os.environ.get("TORCH_NPU_PINPOOL", "1").strip().lower() in ("0", "false", "off", "no")


def _import_torch_npu():
    try:
        import torch
        import torch_npu
    except ImportError as e:
        raise ImportError(
            "torch_npu_pinpool needs torch_npu (and the torch it was built for); install "
            f"torch_npu >= {MIN_TORCH_NPU[0]}.{MIN_TORCH_NPU[1]}.0 first. ({e})"
        ) from e
    npu_version = _parse(torch_npu.__version__)
    if npu_version < MIN_TORCH_NPU:
        raise RuntimeError(
            f"torch_npu_pinpool supports torch_npu >= {MIN_TORCH_NPU[0]}.{MIN_TORCH_NPU[1]}.0;"
            f" this is torch_npu {torch_npu.__version__}. Upgrade torch_npu, or set "
            "TORCH_NPU_PINPOOL=0."
        )
    return torch, torch_npu


def _load_extension():
    torch, _ = _import_torch_npu()
    from . import _C as ext

    if _parse(torch.__version__) != _parse(ext.built_with_torch):
        raise RuntimeError(
            f"torch_npu_pinpool was built against torch {ext.built_with_torch} but torch "
            f"{torch.__version__} is running. Reinstall it in this environment: "
            "pip install --no-build-isolation --force-reinstall torch_npu_pinpool"
        )
    return ext


def mode() -> str:
    """``"backport"`` on torch_npu <= 2.10 (Python hooks register captures),
    ``"native-present"`` on >= 2.11 (torch_npu calls the allocator's pool hooks)."""
    _, torch_npu = _import_torch_npu()
    return "backport" if _parse(torch_npu.__version__) < (2, 11) else "native-present"


def activate() -> bool:
    """Replace torch_npu's pinned host allocator and hook graph capture.

    Returns True if this call activated it, False if it was active already or is switched
    off with ``TORCH_NPU_PINPOOL=0`` (then nothing is registered or patched). Safe after
    pinned tensors exist: their frees and events still go to torch_npu's allocator.
    """
    global _ext
    if _disabled():
        return False
    with _lock:
        if _ext is not None and _ext.is_active():
            return False
        ext = _load_extension()
        newly = ext.activate()
        _ext = ext
        if newly:
            from . import _hooks

            _hooks.install(ext, native_pools=ext.aten_host_pools)
            log.info(
                "torch_npu_pinpool %s active (%s mode): pinned memory is capture-aware",
                __version__,
                mode(),
            )
        return newly


def is_active() -> bool:
    """Whether our allocator is the one in ATen's host-allocator registry."""
    return _ext is not None and _ext.registered_is_ours()


def pool_stats() -> list[dict[str, Any]]:
    """One dict per graph memory pool on the host side: ``id``, ``graphs`` (graphs using
    it), ``capturing``, ``retiring`` (no graph left; blocks wait for the last replays),
    ``blocks``, ``bytes_held``, ``bytes_in_use``, ``adopted_blocks`` (pinned before the
    capture and used by it)."""
    if _ext is None:
        return []
    _ext.process_pending()
    return list(_ext.pool_stats())


def _autoload() -> None:
    """The ``torch.backends`` entry point: torch calls it while importing torch."""
    if _disabled():
        return
    try:
        activate()
    except Exception as e:  # never break `import torch`
        log.warning("torch_npu_pinpool not activated: %s", e)


if not _disabled():
    activate()
