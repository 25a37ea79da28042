"""Process setup shared by the benchmark workers: torch / torch_npu / the plugin, and the
simulated runtime's ctypes control API.

Imported only inside a worker process (bench/worker.py): importing it imports torch_npu.
"""

from __future__ import annotations

import ctypes
import gc
import os

MODES = ("native", "plugin")


def setup(mode: str):
    """Import torch + torch_npu, and the plugin when ``mode == "plugin"``.

    native: TORCH_NPU_PINPOOL=0 and the plugin is not imported (torch_npu's own allocator).
    plugin: the plugin is imported with TORCH_NPU_PINPOOL unset/1 (it registers itself).
    Returns a dict describing what is active.
    """
    if mode not in MODES:
        raise ValueError(mode)
    if mode == "native":
        os.environ["TORCH_NPU_PINPOOL"] = "0"
    else:
        os.environ.pop("TORCH_NPU_PINPOOL", None)
    import torch
    import torch_npu  # noqa: F401

    info = {
        "mode": mode,
        "torch": torch.__version__,
        "torch_npu": getattr(torch_npu, "__version__", "?"),
        "plugin_version": None,
    }
    if mode == "plugin":
        import torch_npu_pinpool  # noqa: F401  (activates on import)

        info["plugin_version"] = getattr(torch_npu_pinpool, "__version__", "?")
        active = getattr(torch_npu_pinpool, "is_active", None)
        info["plugin_active"] = bool(active()) if callable(active) else True
    torch.npu.set_device(0)
    return info


class Sim:
    """The simulated CANN runtime's control API (test/simcann, exported C functions).

    The simulator is already loaded by torch_npu; dlopen by soname returns that same copy.
    Every function is optional: a missing one reads as None / does nothing, so a bench run
    on a simulator without it still completes (the figure is then reported as missing).
    """

    def __init__(self):
        self.lib = None
        names = []
        lib_dir = os.environ.get("SIMCANN_LIB_DIR")
        if lib_dir:
            names.append(os.path.join(lib_dir, "libascendcl.so"))
        names.append("libascendcl.so")
        for name in names:
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        self._fn = {}

    def fn(self, name, restype=ctypes.c_int64, argtypes=()):
        if self.lib is None:
            return None
        if name not in self._fn:
            f = getattr(self.lib, name, None)
            if f is not None:
                f.restype = restype
                f.argtypes = list(argtypes)
            self._fn[name] = f
        return self._fn[name]

    @property
    def available(self) -> bool:
        return self.fn("simcann_host_bytes_live") is not None

    def host_bytes_live(self):
        f = self.fn("simcann_host_bytes_live")
        return int(f()) if f else None

    def set_task_delay_us(self, us: int) -> bool:
        f = self.fn("simcann_set_task_delay_us", ctypes.c_int, (ctypes.c_int64,))
        if f is None:
            return False
        f(int(us))
        return True

    def violations(self):
        for name in ("simcann_violation_count", "simcann_violations"):
            f = self.fn(name)
            if f is not None:
                return int(f())
        return None


def host_empty_cache():
    import torch
    import torch_npu

    fn = getattr(torch_npu.npu, "host_empty_cache", None) or torch.npu.host_empty_cache
    fn()


def host_stats() -> dict:
    import torch
    import torch_npu

    fn = getattr(torch_npu.npu, "host_memory_stats", None) or torch.npu.host_memory_stats
    try:
        return dict(fn())
    except Exception as e:  # noqa: BLE001  (a stats failure must not lose the run)
        return {"error": repr(e)}


def held_bytes(sim: Sim) -> dict:
    """Pinned host bytes held right now, after gc + sync + host_empty_cache."""
    import torch

    gc.collect()
    torch.npu.synchronize()
    host_empty_cache()
    st = host_stats()
    out = {
        "sim_live": sim.host_bytes_live(),
        "stats_allocated_bytes": st.get("allocated_bytes.current"),
        "stats_active_bytes": st.get("active_bytes.current"),
        "stats_allocations": st.get("allocations.current"),
    }
    # An allocator may retire blocks lazily (after an event it records in empty_cache): what a
    # second host_empty_cache right after leaves tells "deferred" from "leaked".
    torch.npu.synchronize()
    host_empty_cache()
    out["sim_live_2nd_empty"] = sim.host_bytes_live()
    return out
