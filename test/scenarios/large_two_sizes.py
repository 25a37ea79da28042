"""Two sizes in one power-of-two bucket (PyTorch PR 192722): a cached block is only handed to a
request it can hold (issue #14). Eagerly, and inside one graph capture.

Env: LARGE_SMALL / LARGE_BIG (bytes; default 40 and 48 MiB: both in the 64 MiB bucket).
Reports, per mode, whether the big request got the small block's address (an overflow: the
caller writes past the block) and what the big buffer reads back after being filled.
"""

import torch
from _lib.scenario import env_int, report, side_stream

small_n = env_int("LARGE_SMALL", 40 << 20)
big_n = env_int("LARGE_BIG", 48 << 20)


def one_round() -> dict:
    a = torch.empty(small_n, dtype=torch.uint8, pin_memory=True)
    a_ptr = a.data_ptr()
    del a
    b = torch.empty(big_n, dtype=torch.uint8, pin_memory=True)
    b.fill_(5)
    return {"reused_smaller": b.data_ptr() == a_ptr, "tail": int(b[-1].item())}


result = {"eager": one_round()}
side_stream()
g = torch.npu.NPUGraph()
dev = torch.zeros(16, device="npu")
with torch.npu.graph(g):
    dev.add_(1)
    result["capture"] = one_round()
report(result)
