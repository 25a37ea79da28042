"""A non_blocking H2D copy from an *alias* of a pinned tensor, the source freed right after and
the next pinned tensor of that size written at once (issue #33). torch_npu's copy kernel hands
the host allocator the alias's ctx (a PyObject*, an ATenDLMTensor*, ...), not the allocator's:
the block must be found by its address (csrc Note [Block map]).

Env: ALIAS (numpy | dlpack | frombuffer | plain), ALIAS_BYTES (default 48 MiB: a large block),
ALIAS_IN_CAPTURE=1 (the copy is captured, the source freed inside the capture, the graph
replayed after the next owner wrote), ALIAS_DELAY_US (simulator task delay: keeps the eager
copy queued while the host runs on; applied only where the simulator runs).
Reports ``values``: the distinct bytes the device buffer received (right: [1]).
"""

import torch
from _lib import simctl
from _lib.scenario import env_int, report, side_stream, values

n = env_int("ALIAS_BYTES", 48 << 20)
how = __import__("os").environ.get("ALIAS", "numpy")
in_capture = env_int("ALIAS_IN_CAPTURE", 0) == 1
delay = env_int("ALIAS_DELAY_US", 0) if simctl.available() else 0


def alias(t: torch.Tensor) -> torch.Tensor:
    """Another tensor over t's bytes, with a storage (and ctx) of its own."""
    if how == "numpy":
        return torch.from_numpy(t.numpy())
    if how == "dlpack":
        return torch.from_dlpack(t)
    if how == "frombuffer":
        return torch.frombuffer(t.numpy(), dtype=torch.uint8)
    assert how == "plain", how
    return t


def source() -> torch.Tensor:
    t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    t.fill_(1)
    a = alias(t)
    assert a.data_ptr() == t.data_ptr() and a.is_pinned()
    return a  # t dies with the alias


def next_owner() -> torch.Tensor:
    t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    t.fill_(2)
    return t


side_stream()
dev = torch.zeros(n, dtype=torch.uint8, device="npu")
torch.npu.synchronize()
if in_capture:
    g = torch.npu.NPUGraph()
    src = source()
    with torch.npu.graph(g):
        dev.copy_(src, non_blocking=True)
        del src
    owner = next_owner()
    g.replay()
else:
    src = source()
    if delay:
        simctl.set_delay_us(delay)
    dev.copy_(src, non_blocking=True)
    del src
    owner = next_owner()
torch.npu.synchronize()
if delay:
    simctl.set_delay_us(0)
report({"values": values(dev)})
