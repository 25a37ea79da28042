"""Eager pin / copy / free cycles per size band, and two sizes in turn: how often the runtime
pins (aclrtMallocHost*) per request, with the plugin and natively (issue #33).

Env: PIN_CYCLES (default 10). Each band starts after host_empty_cache(); each request pins a
uint8 tensor, copies it to the device (non_blocking) and frees it once the copy ran.
Reports per band: ``requests``, ``pins`` (runtime pins: only where the simulator runs),
``num_host_alloc`` (host_memory_stats()), ``right`` (every copy delivered its bytes).
"""

import torch
from _lib import simctl
from _lib.scenario import env_int, report, side_stream

import torch_npu_pinpool

MiB = 1 << 20
CYCLES = env_int("PIN_CYCLES", 10)
BANDS = {
    "4KiB": [4096],
    "1MiB": [MiB],
    "17MiB": [17 * MiB],
    "20MiB": [20 * MiB],
    "31MiB": [31 * MiB],
    "32MiB": [32 * MiB],
    "33MiB": [33 * MiB],
    "48MiB": [48 * MiB],
    "130MiB": [130 * MiB],
    "17+31MiB": [17 * MiB, 31 * MiB],
    "40+100MiB": [40 * MiB, 100 * MiB],
}


def num_host_alloc() -> int:
    return int(torch_npu_pinpool.host_memory_stats().get("num_host_alloc", 0))


def run_band(sizes: list[int], dev: torch.Tensor, stream: torch.npu.Stream) -> dict:
    torch_npu_pinpool.host_empty_cache()
    pins0 = simctl.host_pins() if simctl.available() else 0
    stat0 = num_host_alloc()
    right = True
    for cycle in range(CYCLES):
        for size in sizes:
            t = torch.empty(size, dtype=torch.uint8, pin_memory=True)
            value = (cycle * 7 + size // MiB) % 250 + 1
            t.fill_(value)
            dev[:size].copy_(t, non_blocking=True)
            del t
            stream.synchronize()
            right = right and int(dev[size - 1].item()) == value
    out = {
        "requests": CYCLES * len(sizes),
        "num_host_alloc": num_host_alloc() - stat0,
        "right": right,
    }
    if simctl.available():
        out["pins"] = simctl.host_pins() - pins0
    return out


stream = side_stream()
dev = torch.zeros(130 * MiB, dtype=torch.uint8, device="npu")
report({band: run_band(sizes, dev, stream) for band, sizes in BANDS.items()})
