"""One benchmark process: native (torch_npu's allocator) or plugin, all figures once.

    python bench/worker.py --mode native|plugin --config '{"figures": ["P1", ...], ...}'

Prints one line ``BENCH_RESULT:{json}`` at the end. Run by bench/bench.py, which alternates
native and plugin processes (an allocator cannot be unregistered, so each mode needs its own
process) and aggregates. Every figure catches its own exception and reports it, so a failing
figure does not lose the others.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simrt  # noqa: E402

KiB = 1024
MiB = 1024 * 1024
U8 = None  # torch.uint8, set in main

DEFAULTS = {
    "figures": ["P1", "P2", "P3", "P4", "P5"],
    "reps": 9,  # timed repetitions per configuration inside one process
    "rep_seconds": 0.02,  # target duration of one timed repetition
    "p1_sizes": [4 * KiB, 64 * KiB, MiB, 16 * MiB],
    "p1_threads": [1, 2],
    "p2_sizes": [4 * KiB, 64 * KiB, MiB],
    "p2_max_bytes": 256 * MiB,  # cap on bytes allocated per timed loop inside a capture
    "p3_cycles": 100,
    "p3_every": 10,
    "p3_bytes": 64 * KiB,
    "p4_graphs": 8,
    "p4_bytes": MiB,
    "p5_steps": 200,
    "p5_bytes": 64 * KiB,
}


def _wrong(dev, value):
    """Bytes of a device uint8 tensor that differ from value (numpy: torch's CPU != is slow)."""
    import numpy as np

    return int(np.count_nonzero(dev.cpu().numpy() != value))


def _calibrate(body, rep_seconds, lo=10, hi=200000):
    """Iterations so that body(n) takes about rep_seconds."""
    n = lo
    while True:
        t0 = time.perf_counter()
        body(n)
        dt = time.perf_counter() - t0
        if dt >= rep_seconds / 4 or n >= hi:
            break
        n *= 4
    per = dt / n
    return max(lo, min(hi, int(rep_seconds / max(per, 1e-9))))


def _timed(body, n, threads=1):
    """(wall, cpu) seconds per iteration of body(n) run by `threads` threads at once.

    wall: elapsed time / n (each thread does n). cpu: CPU time of the threads running body
    (time.thread_time) / (threads * n) -- the time the allocator path actually ran, which a
    loaded machine (other processes taking the cores) inflates far less than wall time.
    """
    if threads == 1:
        c0, t0 = time.thread_time(), time.perf_counter()
        body(n)
        return (time.perf_counter() - t0) / n, (time.thread_time() - c0) / n
    barrier = threading.Barrier(threads + 1)
    errors, cpu = [], []

    def run():
        try:
            barrier.wait()
            c0 = time.thread_time()
            body(n)
            cpu.append(time.thread_time() - c0)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise RuntimeError(errors[0])
    return dt / n, sum(cpu) / (threads * n)


def _samples(body, n, reps, threads=1):
    """reps timed repetitions -> (wall ns/op list, cpu ns/op list)."""
    wall, cpu = [], []
    for _ in range(reps):
        w, c = _timed(body, n, threads)
        wall.append(w * 1e9)
        cpu.append(c * 1e9)
    return wall, cpu


# --- P1: eager cached alloc + free round trip ------------------------------------------------
def _p1_body(torch, op, size, threads):
    """body(n): n pinned alloc + free round trips; each thread pins its own pageable source."""
    srcs = [torch.empty(size, dtype=U8) for _ in range(threads)]
    tls = threading.local()
    idx = iter(range(10**9))
    lock = threading.Lock()

    def src():
        s = getattr(tls, "src", None)
        if s is None:
            with lock:
                s = tls.src = srcs[next(idx) % threads]
        return s

    if op == "pin_memory":

        def body(n):
            s = src()
            for _ in range(n):
                t = s.pin_memory()
                del t

    else:

        def body(n):
            for _ in range(n):
                t = torch.empty(size, dtype=U8, pin_memory=True)
                del t

    return body


def fig_p1(cfg):
    import torch

    out = []
    for op in ("pin_memory", "empty_pinned"):
        for size in cfg["p1_sizes"]:
            for threads in cfg["p1_threads"]:
                body = _p1_body(torch, op, size, threads)

                body(20)  # warm the cache (first call allocates the block)
                n = _calibrate(body, cfg["rep_seconds"] / threads)
                wall, cpu = _samples(body, n, cfg["reps"], threads)
                out.append(
                    {
                        "op": op,
                        "size": size,
                        "threads": threads,
                        "iters": n,
                        "ns_per_op": wall,
                        "cpu_ns_per_op": cpu,
                    }
                )
    return out


# --- P2: pinned allocation on a capturing stream vs eager cached --------------------------------
def fig_p2(cfg, sim):
    import torch

    out = []
    for size in cfg["p2_sizes"]:
        body = _p1_body(torch, "empty_pinned", size, 1)

        body(20)
        n = _calibrate(body, cfg["rep_seconds"])
        n = max(10, min(n, cfg["p2_max_bytes"] // size))
        eager, eager_cpu = _samples(body, n, cfg["reps"])

        g = torch.npu.NPUGraph()
        h0 = torch.empty(size, dtype=U8, pin_memory=True)
        d0 = torch.empty(size, dtype=U8, device="npu")
        cap, cap_cpu = [], []
        with torch.npu.graph(g):
            # (entering torch.npu.graph empties the host cache on >= 2.11: measure inside)
            before = sim.host_bytes_live()
            d0.copy_(h0, non_blocking=True)  # a captured task, so the model is not empty
            body(10)
            for _ in range(cfg["reps"]):
                w, c = _timed(body, n)
                cap.append(w * 1e9)
                cap_cpu.append(c * 1e9)
            during = sim.host_bytes_live()
        g.replay()
        torch.npu.synchronize()
        g.reset()
        del g, h0, d0
        after = simrt.held_bytes(sim)
        out.append(
            {
                "size": size,
                "iters": n,
                "eager_ns": eager,
                "capture_ns": cap,
                "eager_cpu_ns": eager_cpu,
                "capture_cpu_ns": cap_cpu,
                "sim_live_before": before,
                "sim_live_in_capture": during,
                "sim_live_after_reset": after["sim_live"],
            }
        )
    return out


# --- P3: held bytes after K capture / replay / reset cycles -------------------------------------
def fig_p3(cfg, sim):
    import torch

    n = cfg["p3_bytes"]
    d_keep = torch.empty(n, dtype=U8, device="npu")
    d_tmp = torch.empty(n, dtype=U8, device="npu")
    base = simrt.held_bytes(sim)
    traj = [{"k": 0, **base}]
    wrong_keep = wrong_tmp = 0
    bad_cycles = 0
    t0 = time.perf_counter()
    for k in range(1, cfg["p3_cycles"] + 1):
        v_keep, v_tmp = (2 * k) % 251 + 1, (2 * k + 1) % 251 + 1
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            # a persistent pinned input, allocated during capture and kept by the caller
            h_keep = torch.empty(n, dtype=U8, pin_memory=True)
            h_keep.fill_(v_keep)
            d_keep.copy_(h_keep, non_blocking=True)
            # a pinned staging temporary, freed inside the capture (torch.tensor(..).to(npu,
            # non_blocking=True) does this); the graph still reads it at every replay
            h_tmp = torch.full((n,), v_tmp, dtype=U8).pin_memory()
            d_tmp.copy_(h_tmp, non_blocking=True)
            del h_tmp
        # eager pinned traffic of the same size: reusing the freed temporary would clobber it
        clob = [torch.full((n,), 0xEE, dtype=U8).pin_memory() for _ in range(2)]
        g.replay()
        torch.npu.synchronize()
        wk = _wrong(d_keep, v_keep)
        wt = _wrong(d_tmp, v_tmp)
        wrong_keep += wk
        wrong_tmp += wt
        bad_cycles += bool(wk or wt)
        del clob
        g.reset()
        del g, h_keep
        if k % cfg["p3_every"] == 0 or k == cfg["p3_cycles"]:
            traj.append({"k": k, **simrt.held_bytes(sim)})
    dt = time.perf_counter() - t0
    end = traj[-1]

    def growth(key):
        a, b = base.get(key), end.get(key)
        return None if a is None or b is None else b - a

    return {
        "cycles": cfg["p3_cycles"],
        "bytes_per_input": n,
        "shared": _p3_shared_pool(cfg, sim),
        "baseline": base,
        "end": end,
        "growth_sim_live": growth("sim_live"),
        "growth_stats_allocated_bytes": growth("stats_allocated_bytes"),
        "growth_sim_live_2nd_empty": growth("sim_live_2nd_empty"),
        "trajectory": traj,
        "wrong_bytes_keep": wrong_keep,
        "wrong_bytes_tmp": wrong_tmp,
        "cycles_with_wrong_bytes": bad_cycles,
        "seconds": dt,
    }


def _p3_shared_pool(cfg, sim):
    """P3's shared-pool column: one pool for every graph (TorchAir use_custom_pool, vllm-ascend),
    one graph kept alive, then K cycles of a graph captured into that pool with a pinned staging
    temporary, replayed, checked and dropped (reset on even cycles, garbage collection on odd
    ones). Growth = held bytes after cycle K minus after cycle 1."""
    import torch

    n = cfg["p3_bytes"]
    pool = torch.npu.graph_pool_handle()
    d_kept, d_tmp = torch.empty(n, dtype=U8, device="npu"), torch.empty(n, dtype=U8, device="npu")
    kept = torch.npu.NPUGraph()
    with torch.npu.graph(kept, pool=pool):
        h_kept = torch.full((n,), 7, dtype=U8).pin_memory()
        d_kept.copy_(h_kept, non_blocking=True)
    after = {}
    wrong = 0
    for k in range(1, cfg["p3_cycles"] + 1):
        v = k % 251 + 1
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, pool=pool):
            h_tmp = torch.full((n,), v, dtype=U8).pin_memory()
            d_tmp.copy_(h_tmp, non_blocking=True)
            del h_tmp
        clob = [torch.full((n,), 0xEE, dtype=U8).pin_memory() for _ in range(2)]
        g.replay()
        kept.replay()
        torch.npu.synchronize()
        wrong += _wrong(d_tmp, v) + _wrong(d_kept, 7)
        del clob
        if k % 2 == 0:
            g.reset()
        del g
        if k in (1, cfg["p3_cycles"]):
            after[k] = simrt.held_bytes(sim)
    kept.reset()
    del kept, h_kept
    first, last = after[1], after[cfg["p3_cycles"]]

    def growth(key):
        a, b = first.get(key), last.get(key)
        return None if a is None or b is None else b - a

    cycles = max(cfg["p3_cycles"] - 1, 1)
    live = growth("sim_live")
    return {
        "growth_sim_live": live,
        "growth_stats_allocated_bytes": growth("stats_allocated_bytes"),
        "growth_per_cycle_sim_live": None if live is None else live / cycles,
        "after_cycle_1": first,
        "after_cycle_k": last,
        "wrong_bytes": wrong,
    }


# --- P4: N graphs sharing one pool vs N separate pools ------------------------------------------
def _p4_run(cfg, sim, shared, workload):
    import torch

    N, n = cfg["p4_graphs"], cfg["p4_bytes"]
    d_in = [torch.empty(n, dtype=U8, device="npu") for _ in range(N)]
    d_out = [torch.empty(n, dtype=U8, device="npu") for _ in range(N)]
    base = simrt.held_bytes(sim)["sim_live"]
    pool = torch.npu.graph_pool_handle() if shared else None
    graphs, after_first = [], None
    for i in range(N):
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, pool=pool):
            if workload == "bounce":
                # D2H into a pinned bounce buffer, then H2D back: the graph writes the buffer
                # before reading it at every replay, so graphs replayed one after another may
                # share it (the analogue of device-memory pool sharing).
                h = torch.empty(n, dtype=U8, pin_memory=True)
                h.copy_(d_in[i], non_blocking=True)
                d_out[i].copy_(h, non_blocking=True)
            elif workload == "staged":
                # "staged": host bytes written by the CPU at capture time, read by every replay.
                h = torch.full((n,), i + 1, dtype=U8).pin_memory()
                d_out[i].copy_(h, non_blocking=True)
            else:
                # "scratch": a pinned temporary the capture allocates and frees without any
                # captured operation touching it (CPU-side work during capture); the graph
                # itself only copies device to device. Sharing a pool can reuse this one.
                h = torch.empty(n, dtype=U8, pin_memory=True)
                h.fill_(i + 1)
                d_out[i].copy_(d_in[i], non_blocking=True)
            del h
        graphs.append(g)
        if i == 0:
            after_first = simrt.held_bytes(sim)["sim_live"]
    held = simrt.held_bytes(sim)["sim_live"]
    # correctness: replay every graph in order
    wrong = 0
    for i in range(N):
        if workload in ("bounce", "scratch"):
            d_in[i].copy_(torch.full((n,), i + 1, dtype=U8))
    for g in graphs:
        g.replay()
    torch.npu.synchronize()
    for i in range(N):
        wrong += _wrong(d_out[i], i + 1)
    for g in graphs:
        g.reset()
    del graphs, g
    end_all = simrt.held_bytes(sim)
    end, end2 = end_all["sim_live"], end_all["sim_live_2nd_empty"]

    def d(x):
        return None if x is None or base is None else x - base

    return {
        "shared": shared,
        "workload": workload,
        "one_graph_bytes": d(after_first),
        "held_bytes": d(held),
        "after_reset_bytes": d(end),
        "after_reset_2nd_empty_bytes": d(end2),
        "wrong_bytes": wrong,
    }


def fig_p4(cfg, sim):
    out = []
    for workload in ("scratch", "bounce", "staged"):
        for shared in (True, False):
            try:
                out.append(_p4_run(cfg, sim, shared, workload))
            except Exception as e:  # noqa: BLE001
                out.append({"shared": shared, "workload": workload, "error": repr(e)})
    return out


# --- P5: decode-style loop -----------------------------------------------------------------------
def fig_p5(cfg, sim):
    import torch

    n = cfg["p5_bytes"]
    h_in = torch.empty(n, dtype=U8, pin_memory=True)
    h_out = torch.empty(n, dtype=U8, pin_memory=True)
    d_in = torch.empty(n, dtype=U8, device="npu")
    d_out = torch.empty(n, dtype=U8, device="npu")
    d_pos = torch.empty(8, dtype=torch.int64, device="npu")
    srcs = [torch.full((n,), v, dtype=U8) for v in (3, 5, 7, 11)]
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        d_in.copy_(h_in, non_blocking=True)
        d_out.copy_(d_in)
    stream = torch.npu.current_stream()
    wrong = [0]

    def step(i):
        h_in.copy_(srcs[i & 3])  # write the step's inputs into the persistent pinned buffer
        pos = torch.full((8,), i, dtype=torch.int64).pin_memory()  # per-step pinned staging
        d_pos.copy_(pos, non_blocking=True)
        del pos
        g.replay()
        h_out.copy_(d_out, non_blocking=True)  # pinned D2H
        stream.synchronize()
        if not torch.equal(h_out, srcs[i & 3]):
            wrong[0] += 1

    for i in range(20):
        step(i)
    steps = cfg["p5_steps"]
    sps, cpu_us, thread_us = [], [], []
    for _ in range(cfg["reps"]):
        c0, t0, th0 = time.process_time(), time.perf_counter(), time.thread_time()
        for i in range(steps):
            step(i)
        sps.append(steps / (time.perf_counter() - t0))
        # CPU per step of the whole process (Python thread, torch_npu's task queue, the
        # simulator's stream workers) and of the Python thread alone (where the allocator's
        # alloc / free / record_event run): less sensitive to a loaded machine than wall time.
        cpu_us.append((time.process_time() - c0) / steps * 1e6)
        thread_us.append((time.thread_time() - th0) / steps * 1e6)
    g.reset()
    return {
        "steps": steps,
        "bytes": n,
        "steps_per_s": sps,
        "cpu_us_per_step": cpu_us,
        "thread_cpu_us_per_step": thread_us,
        "wrong_steps": wrong[0],
    }


def main():
    global U8
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=simrt.MODES, required=True)
    ap.add_argument("--config", default="{}")
    a = ap.parse_args()
    cfg = dict(DEFAULTS)
    cfg.update(json.loads(a.config))
    t_start = time.perf_counter()
    info = simrt.setup(a.mode)
    import torch

    U8 = torch.uint8
    sim = simrt.Sim()
    delay = cfg.get("task_delay_us")
    if delay is not None:
        sim.set_task_delay_us(delay)
    res = {"info": info, "sim_api": sim.available, "figures": {}, "errors": {}}
    res["info"]["import_seconds"] = time.perf_counter() - t_start
    # A tiny warm-up so lazy init (streams, events, device allocator) is outside every figure.
    x = torch.ones(16, dtype=U8).pin_memory().to("npu", non_blocking=True)
    torch.npu.synchronize()
    del x
    # Move everything alive now to gc's permanent generation: gc.collect() in the held-bytes
    # measurements then costs ~1 ms instead of ~200 ms (torch has many objects).
    gc.collect()
    gc.freeze()
    figs = {
        "P1": lambda: fig_p1(cfg),
        "P2": lambda: fig_p2(cfg, sim),
        "P3": lambda: fig_p3(cfg, sim),
        "P4": lambda: fig_p4(cfg, sim),
        "P5": lambda: fig_p5(cfg, sim),
    }
    for name in cfg["figures"]:
        t0 = time.perf_counter()
        try:
            res["figures"][name] = figs[name]()
        except Exception:  # noqa: BLE001
            res["errors"][name] = traceback.format_exc()[-3000:]
            try:
                torch.npu.synchronize()
            except Exception:  # noqa: BLE001
                pass
        res.setdefault("seconds", {})[name] = time.perf_counter() - t0
        gc.collect()
    res["violations_api"] = sim.violations()
    sys.stdout.flush()
    print("BENCH_RESULT:" + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
