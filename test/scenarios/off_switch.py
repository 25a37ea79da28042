"""Whether the plugin registered its allocator and patched NPUGraph (the off switch's check)."""

from _lib.scenario import report, torch_npu_pinpool
from torch_npu.npu.graphs import NPUGraph

report(
    {
        "active": torch_npu_pinpool.is_active(),
        "patched": getattr(NPUGraph, "_pinpool_hooked", False),
        "replay_is_native": not hasattr(NPUGraph.replay, "__wrapped__"),
    }
)
