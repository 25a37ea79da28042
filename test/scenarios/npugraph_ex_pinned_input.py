"""torch.compile(backend="npugraph_ex") with a pinned CPU input: the compiled function copies it
to the device (H2D inside the captured aclgraph). The caller frees the pinned input after the
first call and re-pins junk (value 9) before each later call with a fresh pinned input.

Reports the distinct values of each call's result (expected: the call's own input + 1; a replay
that reads the old captured address shows the first input's value, a recycled block shows 9),
and the pinned bytes held after the compiled function is dropped (torch._dynamo.reset) and one
host_empty_cache(). Env: CALLS (4).
"""

import gc

import torch
from _lib import simctl
from _lib.scenario import N, env_int, held_bytes, pinned, report, side_stream, values

import torch_npu_pinpool

CALLS = env_int("CALLS", 4)


def fn(host: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
    return dev + host.to("npu", non_blocking=True)


side_stream()
baseline = held_bytes()
dev = torch.ones(N, device="npu")
compiled = torch.compile(fn, backend="npugraph_ex", dynamic=False, fullgraph=True)
seen = []
junk: list[torch.Tensor] = []
for call in range(CALLS):
    host = pinned(float(10 * (call + 1)))
    out = compiled(host, dev)
    torch.npu.synchronize()
    seen.append(values(out))
    del host, out
    junk = []
    torch_npu_pinpool.host_empty_cache()
    junk = [pinned(9.0) for _ in range(4)]
junk = []
del compiled
torch._dynamo.reset()
gc.collect()
torch.npu.synchronize()
torch_npu_pinpool.host_empty_cache()
result = {"seen": seen, "baseline": baseline, "held_after": held_bytes()}
if simctl.available():
    result["violations"] = simctl.violations()
report(result)
