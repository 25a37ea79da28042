"""Worker process setup: torch / torch_npu / the plugin, the simulated runtime's ctypes control
API, and the held-bytes measurement every byte figure uses. Used inside worker processes only
(harness/worker.py); setup() imports torch_npu.
"""

from __future__ import annotations

import ctypes
import gc
import os


def setup(plugin: bool) -> dict:
    """Import torch + torch_npu, and the plugin when ``plugin``; the variant's environment
    (TORCH_NPU_PINPOOL=0 for native: torch's backend autoload then leaves the plugin off) was
    set by the driver. Returns what is active; raises if the plugin's state is not the asked one.
    """
    import torch
    import torch_npu

    info = {"torch": torch.__version__, "torch_npu": getattr(torch_npu, "__version__", "?"),
            "plugin_version": None, "plugin_active": False}
    if plugin:
        import torch_npu_pinpool

        info["plugin_version"] = torch_npu_pinpool.__version__
        info["plugin_active"] = bool(torch_npu_pinpool.is_active())
        if not info["plugin_active"]:
            raise RuntimeError("torch_npu_pinpool imported but not active (is_active() False)")
    torch.npu.set_device(0)
    return info


class Sim:
    """The simulated CANN runtime's control API (simcann, exported C functions).

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

    def host_pins(self):
        """aclrtMallocHost* calls so far (simcann's simcann_host_malloc_calls)."""
        f = self.fn("simcann_host_malloc_calls")
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


def growth(before: dict, after: dict, key: str):
    """after[key] - before[key], or None when either is unknown."""
    a, b = before.get(key), after.get(key)
    return None if a is None or b is None else b - a
