"""A server's shape for `python -m torch_npu_pinpool audit -- python audit_server.py MODE`: a main
process that spawns workers (multiprocessing 'spawn', as vllm's engine does) and stops them with
a signal. It imports torch and torch_npu only (never torch_npu_pinpool nor the scenario helpers).

Each worker copies from a pinned buffer in a loop and rewrites it right after each non_blocking
copy, while the copy may still be queued (vllm-ascend #16428's race; certain only when the
runtime holds work back: SIMCANN_TASK_DELAY_US on the simulator). After STEPS (4) copies it
synchronizes once (so those copies were checked) and tells the main process, then goes on racing
until it is stopped.

MODE:
  term  two workers; once both are ready, the main process sends each SIGTERM (terminate()).
  kill  one worker; once it is ready and a periodic report line of its counts a race (run under
        `audit --interval 1`: the main process reads the worker's report file, which is the way
        to see that a line was written), the main process sends it SIGKILL.

Prints one line `server: {"workers": {pid: exitcode}, "lines": {...}}` and exits 0 (1 when a
worker never got ready).
"""

import json
import multiprocessing
import os
import sys
import time

import torch
import torch_npu  # noqa: F401

N = 1024
STEPS = int(os.environ.get("STEPS", "4"))
WAIT_S = 120.0  # bounded waits for the workers (a loaded 2-core machine starts them slowly)


def worker(ready) -> None:
    torch.npu.set_device(0)
    host = torch.zeros(N).pin_memory()  # site: alloc
    dev = torch.zeros(N, device="npu")
    torch.npu.synchronize()
    step = 0
    while True:
        dev.copy_(host, non_blocking=True)  # site: copy
        host.fill_(float(step))  # the race: the copy above may not have read the buffer yet
        step += 1
        if step == STEPS:
            torch.npu.synchronize()  # every copy so far ran, so each was checked
            ready.set()


def _line_with_race(pid: int, deadline: float) -> bool:
    """Whether the worker's report file (TORCH_NPU_PINPOOL_REPORT, set by the audit) has a
    periodic line that counts a race."""
    path = os.environ["TORCH_NPU_PINPOOL_REPORT"].replace("{pid}", str(pid))
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                for line in f:
                    report = json.loads(line)
                    if any(h["count"] for h in report["hazards"]):
                        return True
        except (OSError, ValueError):
            pass  # not written yet, or a line being written
        time.sleep(0.05)
    return False


def main() -> int:
    mode = sys.argv[1]
    ctx = multiprocessing.get_context("spawn")
    workers = []
    for _ in range(2 if mode == "term" else 1):
        ready = ctx.Event()
        p = ctx.Process(target=worker, args=(ready,))
        p.start()
        workers.append((p, ready))
    ok = all(ready.wait(WAIT_S) for _, ready in workers)
    lines = {}
    if ok and mode == "kill":
        p = workers[0][0]
        lines[p.pid] = _line_with_race(p.pid, time.monotonic() + WAIT_S)
    for p, _ in workers:
        p.kill() if mode == "kill" else p.terminate()
    for p, _ in workers:
        p.join(WAIT_S)
    codes = {p.pid: p.exitcode for p, _ in workers}
    print("server: " + json.dumps({"workers": codes, "lines": lines, "ready": ok}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
