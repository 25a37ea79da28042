"""Activation when the graph hooks cannot be installed (issue #33): ``import torch_npu_pinpool``
raises and registers nothing, and once the cause is gone a later import activates the plugin
whole - allocator and hooks - so captures are never invisible to it.

Run with torch's backend autoload off (the test environments' default). Reports
``first_import`` (the exception's type, or "ok"), then, after a second import: ``active``,
``hooked`` (NPUGraph's hooks are in), and ``values`` (a capture whose pinned input is freed in
it, replayed after the next owner wrote; right: [3]).
"""

import torch
import torch_npu  # noqa: F401
from torch_npu.npu import graphs

real = graphs.NPUGraph
graphs.NPUGraph = type("NPUGraph", (), {})  # a torch_npu without the methods the hooks wrap
try:
    import torch_npu_pinpool  # noqa: F401

    first_import = "ok"
except Exception as e:  # what a user sees: the cause, raised
    first_import = type(e).__name__
graphs.NPUGraph = real

from _lib.scenario import N, pinned, report, side_stream, values  # noqa: E402  (the plugin again)

import torch_npu_pinpool  # noqa: E402,F811

side_stream()
dev = torch.zeros(N, device="npu")
g = torch.npu.NPUGraph()
src = pinned(3.0)
with torch.npu.graph(g):
    dev.copy_(src, non_blocking=True)
    del src
owner = pinned(9.0)
g.replay()
torch.npu.synchronize()
report(
    {
        "first_import": first_import,
        "active": torch_npu_pinpool.is_active(),
        "hooked": bool(getattr(real, "_pinpool_hooked", False)),
        "values": values(dev),
    }
)
