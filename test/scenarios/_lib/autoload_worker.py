"""A worker process as vLLM starts one per NPU: it only imports torch_npu (never the plugin),
then checks what a user relies on. Owned by autoload_workers.py (which starts it by
``subprocess`` and by multiprocessing ``spawn``); this module imports nothing at import time, so
a spawned child that unpickles ``work`` runs only what ``work`` does.

``work()`` returns ``{"loaded", "active", "replay"}``: whether torch_npu_pinpool was imported
(by torch's backend autoload: the ``torch.backends`` entry point) and is active, and what a
replay read from a pinned input freed inside its capture after other pinned tensors were
written (right: [2.0]; torch_npu alone recycles that block on every release: docs/problem.md,
defect 3).
"""

from __future__ import annotations

import json
import sys
from typing import Any

RESULT_TAG = "PINPOOL_WORKER:"


def work(queue: Any = None) -> dict[str, Any]:
    import torch
    import torch_npu  # noqa: F401  the only import a worker makes

    plugin = sys.modules.get("torch_npu_pinpool")
    out: dict[str, Any] = {
        "loaded": plugin is not None,
        "active": plugin is not None and plugin.is_active(),
    }
    torch.npu.set_device(0)
    torch.npu.set_stream(torch.npu.Stream())
    n = 1024
    dev = torch.zeros(n, device="npu")
    early = torch.full((n,), 2.0).pin_memory()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        dev.copy_(early, non_blocking=True)
        del early  # freed inside the capture: the graph still reads it at every replay
    others = [torch.full((n,), 9.0).pin_memory() for _ in range(8)]  # noqa: F841
    g.replay()
    torch.npu.synchronize()
    out["replay"] = sorted(set(dev.cpu().tolist()))
    if queue is not None:
        queue.put(out)
    return out


if __name__ == "__main__":  # the subprocess worker
    print(RESULT_TAG + json.dumps(work()), flush=True)
