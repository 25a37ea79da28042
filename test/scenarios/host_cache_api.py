"""Scenario: torch_npu_pinpool's host-cache API through ATen's registry (the path it takes on
torch_npu builds without torch_npu.npu.host_empty_cache / host_memory_stats) against
torch_npu.npu's own functions where the build has them. Pins 4 blocks, frees them, reads the stats
both ways, empties the cache through the registry, reads them again.

Reports ``native_api`` (whether torch_npu.npu has the functions), ``registry_keys`` /
``native_keys`` (the flat keys each way), ``held_before`` / ``held_after`` (the held bytes the
registry reports before / after its empty_cache), ``same_values`` (every non-timing value the
same both ways, before the empty_cache), ``after_reset`` (the registry's stats after its two
resets: peak and accumulated of the held bytes)."""

from _lib.scenario import N, pinned, report, side_stream, torch, torch_npu

import torch_npu_pinpool
from torch_npu_pinpool import _host_cache

side_stream()
ext = torch_npu_pinpool._load_extension()


def registry_stats() -> dict:
    flat: list = []
    _host_cache._flatten("", ext.registered_host_memory_stats(), flat)
    return dict(sorted(flat))


HELD = "allocated_bytes.current" if "active_bytes" in ext.registered_host_memory_stats() else (
    "reserved_bytes.current"
)
blocks = [pinned(i, N * (i + 1)) for i in range(4)]
dev = torch.zeros(N, device="npu")
dev.copy_(blocks[0][:N], non_blocking=True)
torch.npu.synchronize()
del blocks
torch.npu.synchronize()
mine = registry_stats()
native = getattr(torch_npu.npu, "host_memory_stats", None)
theirs = dict(native()) if native is not None else {}
timing = ("total", "max", "min", "avg")
same = all(
    mine.get(k) == theirs.get(k) for k in theirs if not k.endswith(timing) or "time" not in k
)
ext.registered_host_empty_cache()
after = registry_stats()
ext.registered_host_reset_peak()
ext.registered_host_reset_accumulated()
reset = registry_stats()
report(
    {
        "native_api": native is not None,
        "registry_keys": sorted(mine),
        "native_keys": sorted(theirs),
        "held_before": mine[HELD],
        "held_after": after[HELD],
        "same_values": same,
        "after_reset": {k: reset[k] for k in reset if k.startswith(HELD.split(".")[0] + ".")},
        "public_matches": torch_npu_pinpool.host_memory_stats().get(HELD) == after[HELD],
    }
)
