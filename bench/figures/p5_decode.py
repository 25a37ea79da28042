"""P5: a decode-style loop: per step write the step's 64 KiB input into a persistent pinned
buffer, pin an 8-element position tensor and copy it non_blocking (per-step staging), replay a
graph (pinned H2D + D2D), copy its output back into a persistent pinned buffer non_blocking,
synchronize the stream, check it. `steps` steps per repetition: steps/s (wall), and CPU per step
of the Python thread (where the allocator, the replay hook and the copy guard run) and of the
whole process (with torch_npu's task queue and the simulator's stream workers). `warmup` steps
run first, so the repetitions time the loop's steady state with either allocator. The loop's
speed differs between processes with either allocator (a process settles into a fast or a slow
mode: the per-trial medians in the JSON), so P5 runs in `trials` processes per variant: the
extra ones run P5 alone.
"""

from __future__ import annotations

import time

from harness import stats

NAME = "P5"
TITLE = "decode loop, one replay per step"
TARGET = "plugin/native steps/s >= 0.99"
VARIANTS = ("native", "plugin")
SETTINGS = {"steps": 200, "bytes": 64 * 1024, "reps": 15, "warmup": 2000, "trials": 24}
QUICK = {"steps": 50, "trials": 0}


def make_step(torch, n: int):
    u8 = torch.uint8
    h_in = torch.empty(n, dtype=u8, pin_memory=True)
    h_out = torch.empty(n, dtype=u8, pin_memory=True)
    d_in, d_out = torch.empty(n, dtype=u8, device="npu"), torch.empty(n, dtype=u8, device="npu")
    d_pos = torch.empty(8, dtype=torch.int64, device="npu")
    srcs = [torch.full((n,), v, dtype=u8) for v in (3, 5, 7, 11)]
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        d_in.copy_(h_in, non_blocking=True)
        d_out.copy_(d_in)
    stream = torch.npu.current_stream()
    wrong = [0]

    def step(i: int) -> None:
        h_in.copy_(srcs[i & 3])  # the step's inputs into the persistent pinned buffer
        pos = torch.full((8,), i, dtype=torch.int64).pin_memory()  # per-step pinned staging
        d_pos.copy_(pos, non_blocking=True)
        del pos
        g.replay()
        h_out.copy_(d_out, non_blocking=True)  # pinned D2H
        stream.synchronize()
        if not torch.equal(h_out, srcs[i & 3]):
            wrong[0] += 1

    return step, g, wrong


def measure(ctx) -> dict:
    import torch

    step, g, wrong = make_step(torch, ctx.cfg["bytes"])
    for i in range(ctx.cfg["warmup"]):
        step(i)
    steps = ctx.cfg["steps"]
    sps, proc, thread = [], [], []
    for _ in range(ctx.cfg["reps"]):
        c0, t0, th0 = time.process_time(), time.perf_counter(), time.thread_time()
        for i in range(steps):
            step(i)
        sps.append(steps / (time.perf_counter() - t0))
        proc.append((time.process_time() - c0) / steps * 1e6)
        thread.append((time.thread_time() - th0) / steps * 1e6)
    g.reset()
    return {"samples": {"steps/s": sps, "thread cpu": thread, "process cpu": proc},
            "values": {"wrong steps": wrong[0]}}


def summarize(runs: stats.Runs) -> list[dict]:
    return [
        stats.timed_row(runs, "steps/s", "steps/s (wall)", "steps/s", better="higher",
                        limit=0.99, readme=True),
        stats.timed_row(runs, "thread cpu", "Python-thread CPU per step", "us", limit=1.01,
                        readme=True),
        stats.timed_row(runs, "process cpu", "process CPU per step", "us"),
        stats.value_row(runs, "wrong steps", "steps whose output was wrong", "",
                        check=lambda x: x == 0, target="plugin 0"),
    ]
