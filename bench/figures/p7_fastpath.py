"""P7: the allocator's eager fast path without Python: p7_fastpath.cpp (built once per
environment by torch.utils.cpp_extension.load, called through ctypes with the GIL released)
runs T = 1 or 4 std::threads that each do `iters` rounds of
`at::getHostAllocator(kPrivateUse1)->allocate(n)` + DataPtr destruction, after one untimed round
(so every timed round reuses a cached block); n = 4 KiB, 64 KiB, 1 MiB, 16 MiB. CPU ns per round
(CLOCK_THREAD_CPUTIME_ID summed over the threads / rounds).
"""

from __future__ import annotations

import ctypes
import os
import sys

from harness import stats

NAME = "P7"
TITLE = "eager fast path in C++ (no Python), CPU ns per alloc + free"
TARGET = "plugin/native median <= 1.05"
VARIANTS = ("native", "plugin")
KiB, MiB = 1024, 1024 * 1024
SETTINGS = {"sizes": [4 * KiB, 64 * KiB, MiB, 16 * MiB], "threads": [1, 4], "iters": 20000}
QUICK = {"sizes": [4 * KiB, MiB], "iters": 5000}


def prepare(settings: dict) -> dict:
    """Builds p7_fastpath.cpp into this environment (once); the driver runs this."""
    old = os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD")
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # no torch_npu in the driver
    try:
        from torch.utils import cpp_extension

        build = os.path.join(sys.prefix, "pinpool-bench-build")
        os.makedirs(build, exist_ok=True)
        here = os.path.dirname(os.path.abspath(__file__))
        cpp_extension.load(name="p7_fastpath", sources=[os.path.join(here, "p7_fastpath.cpp")],
                           extra_cflags=["-O2"], build_directory=build,
                           is_python_module=False, verbose=False)
    finally:
        if old is None:
            os.environ.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
        else:
            os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = old
    return {**settings, "lib": os.path.join(build, "p7_fastpath.so")}


def measure(ctx) -> dict:
    lib = ctypes.CDLL(ctx.cfg["lib"])  # ctypes.CDLL releases the GIL during the call
    lib.p7_run.restype = ctypes.c_int
    lib.p7_run.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                           ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)]
    lib.p7_last_error.restype = ctypes.c_char_p
    samples = {}
    for size in ctx.cfg["sizes"]:
        for threads in ctx.cfg["threads"]:
            wall, cpu, xs = ctypes.c_double(), ctypes.c_double(), []
            for rep in range(ctx.cfg["reps"] + 1):  # the first call warms every thread's block
                if lib.p7_run(size, ctx.cfg["iters"], threads, ctypes.byref(wall),
                              ctypes.byref(cpu)) != 0:
                    raise RuntimeError(lib.p7_last_error().decode())
                if rep:
                    xs.append(cpu.value)
            samples[f"{size // KiB} KiB, {threads} threads"] = xs
    return {"samples": samples}


def summarize(runs: stats.Runs) -> list[dict]:
    keys = []
    for t in runs.trials:
        for f in t.values():
            keys += [k for k in (f or {}).get("samples", {}) if k not in keys]
    rows = [stats.timed_row(runs, k, k, "ns", limit=1.05) for k in keys]
    if rows and all(r["ratio"] is not None for r in rows):
        lo, hi = min(r["ratio"] for r in rows), max(r["ratio"] for r in rows)
        n_meet = sum(r["verdict"] == stats.MEETS for r in rows)
        rows.insert(0, stats.row(f"{len(rows)} configurations: ratio {lo:.2f} - {hi:.2f}, "
                                 f"{n_meet} meet", "ns", {}, readme=True))
    return rows
