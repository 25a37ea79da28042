"""Worker processes that only ``import torch_npu`` (vLLM's one process per NPU), started by
``subprocess`` and by multiprocessing's ``spawn``: does torch's backend autoload activate the
plugin in each (issue #35)? This parent never imports torch nor the plugin, so nothing it
imported can leak into them.

Args: the start methods to try (``subprocess``, ``spawn``; both when none is named). Env:
TORCH_DEVICE_BACKEND_AUTOLOAD as the user sets it (the tests pass 1 and 0). Reports per start
method what test/scenarios/_lib/autoload_worker.py's ``work()`` returned.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def by_subprocess() -> dict:
    worker = os.path.join(HERE, "_lib", "autoload_worker.py")
    proc = subprocess.run(
        [sys.executable, worker], capture_output=True, text=True, timeout=240, check=False
    )
    for line in proc.stdout.splitlines():
        if line.startswith("PINPOOL_WORKER:"):
            return json.loads(line[len("PINPOOL_WORKER:") :])
    return {"error": f"exit {proc.returncode}: {proc.stderr[-1500:]}"}


def by_spawn() -> dict:
    sys.path.insert(0, HERE)
    from _lib.autoload_worker import work

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=work, args=(queue,))
    child.start()
    try:
        return queue.get(timeout=240)
    except Exception as e:  # the child died before it reported
        return {"error": f"{type(e).__name__}: exit {child.exitcode}"}
    finally:
        child.join(timeout=60)


if __name__ == "__main__":
    starts = {"subprocess": by_subprocess, "spawn": by_spawn}
    out = {how: starts[how]() for how in sys.argv[1:] or starts}
    sys.path.insert(0, HERE)
    from _lib.result import report  # torch-free: this parent never loads torch

    report(out)
