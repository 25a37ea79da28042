"""The host (pinned) cache API on every supported torch_npu build: ``torch_npu.npu``'s own
functions where the build has them, else the same through ATen's host-allocator registry.

torch_npu 2.8.0.post2 and 2.9.0 have no ``host_empty_cache`` / ``host_memory_stats`` (2.8.0.post5
and 2.9.1 add them). There the registered allocator - the plugin's, or torch_npu's own with the
plugin off - is asked directly (``csrc/python/host_cache_api.cpp``), and the statistics come back
as torch_npu's later builds return them: flat ``"name.current"`` keys.
"""

from __future__ import annotations

from typing import Any, Callable


def _native(name: str) -> Callable[[], Any] | None:
    """torch_npu.npu's ``name``, or None on a build without it."""
    import torch_npu

    return getattr(torch_npu.npu, name, None)


def _registry() -> Any:
    """The extension, loaded without activating anything (works with the plugin off)."""
    from . import _load_extension

    return _load_extension()


def _call(name: str, binding: str) -> Any:
    """torch_npu.npu's ``name()``, or the extension's ``binding()`` where the build lacks it."""
    native = _native(name)
    return native() if native is not None else getattr(_registry(), binding)()


def _flatten(prefix: str, value: Any, out: list[tuple[str, Any]]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else key, item, out)
    else:
        out.append((prefix, value))


def host_empty_cache() -> None:
    """Give the registered host allocator's cached pinned blocks back to the system:
    ``torch_npu.npu.host_empty_cache()`` on builds that have it."""
    _call("host_empty_cache", "registered_host_empty_cache")


def host_memory_stats() -> dict[str, Any]:
    """The registered host allocator's statistics, flat keys sorted
    (``"allocated_bytes.current"``, ...): ``torch_npu.npu.host_memory_stats()`` on builds that
    have it."""
    native = _native("host_memory_stats")
    if native is not None:
        return dict(native())  # already flat and sorted
    flat: list[tuple[str, Any]] = []
    _flatten("", _registry().registered_host_memory_stats(), flat)
    return dict(sorted(flat))


def reset_accumulated_host_memory_stats() -> None:
    """Reset the "allocated" / "freed" counters of ``host_memory_stats()``."""
    _call("reset_accumulated_host_memory_stats", "registered_host_reset_accumulated")


def reset_peak_host_memory_stats() -> None:
    """Reset the "peak" values of ``host_memory_stats()``."""
    _call("reset_peak_host_memory_stats", "registered_host_reset_peak")
