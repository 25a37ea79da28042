"""P10: what the audit report (TORCH_NPU_PINPOOL_REPORT=1, csrc/audit/audit.h) costs when it is on,
against the plugin with it off, in the same run.

Per copy: `iters` eager `dev.copy_(pinned, non_blocking=True)` H2D copies of n = 1 KiB, 1 MiB
and 16 MiB on the current stream, then a synchronize; with the report on each copy is
checksummed at enqueue and again by its completion probe (Note [Completion probes]); 16 MiB is
above the whole-hash limit (1 MiB), so it measures the sampled checksum (Note [Bounded
checksums]). Per replay: a graph of `inputs` pinned 64 KiB H2D inputs (+ a D2D each), replayed
`iters` times, then a synchronize; with the report on every replay checksums its inputs at
enqueue and at its completion. CPU of the Python thread per copy / replay (where the enqueue-side
checksum and the site run) and of the whole process (with the completion probes on the
runtime's threads). The report variant also returns how many copies and replays it compared.
"""

from __future__ import annotations

import time

from harness import stats

NAME = "P10"
TITLE = "audit report on vs off: CPU per H2D copy and per replay"
TARGET = "a figure, no target: the cost of TORCH_NPU_PINPOOL_REPORT=1 (report/plugin)"
VARIANTS = ("plugin", "report")
KiB, MiB = 1024, 1024 * 1024
SETTINGS = {"sizes": [KiB, MiB, 16 * MiB], "copy_bytes_per_rep": 32 * MiB, "max_iters": 300,
            "inputs": 4, "input_bytes": 64 * KiB, "replays": 100}
QUICK = {"copy_bytes_per_rep": 8 * MiB, "max_iters": 100, "replays": 30}


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // KiB} KiB"


def _timed(torch, fn, iters: int, reps: int) -> tuple[list[float], list[float]]:
    """Thread and process CPU us per call, `iters` calls then a synchronize per repetition."""
    for _ in range(min(iters, 20)):
        fn()
    torch.npu.synchronize()
    thread, proc = [], []
    for _ in range(reps):
        th0, c0 = time.thread_time(), time.process_time()
        for _ in range(iters):
            fn()
        torch.npu.synchronize()
        thread.append((time.thread_time() - th0) / iters * 1e6)
        proc.append((time.process_time() - c0) / iters * 1e6)
    return thread, proc


def _copies(torch, n: int, cfg: dict) -> tuple[list[float], list[float]]:
    """`copy_bytes_per_rep` bytes (at least 5, at most `max_iters` copies) per repetition."""
    src = torch.full((n,), 7, dtype=torch.uint8).pin_memory()
    dev = torch.empty(n, dtype=torch.uint8, device="npu")
    iters = max(5, min(cfg["max_iters"], cfg["copy_bytes_per_rep"] // n))
    return _timed(torch, lambda: dev.copy_(src, non_blocking=True), iters, cfg["reps"])


def measure(ctx) -> dict:
    import torch

    cfg, u8, samples = ctx.cfg, torch.uint8, {}
    for n in cfg["sizes"]:
        th, pr = _copies(torch, n, cfg)
        samples[f"copy {_size(n)} thread"], samples[f"copy {_size(n)} process"] = th, pr
    n = cfg["input_bytes"]
    h_in = [torch.full((n,), i, dtype=u8).pin_memory() for i in range(cfg["inputs"])]
    d_in = [torch.empty(n, dtype=u8, device="npu") for _ in h_in]
    d_out = [torch.empty(n, dtype=u8, device="npu") for _ in h_in]
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        for h, d, o in zip(h_in, d_in, d_out):
            d.copy_(h, non_blocking=True)
            o.copy_(d)
    th, pr = _timed(torch, g.replay, cfg["replays"], cfg["reps"])
    samples["replay thread"], samples["replay process"] = th, pr
    torch.npu.synchronize()
    wrong = sum(int(not torch.equal(o.cpu(), h)) for o, h in zip(d_out, h_in))
    g.reset()
    values = {"wrong replays": wrong}
    if ctx.variant == "report":
        import torch_npu_pinpool

        rep = torch_npu_pinpool.report(wait=5.0)
        values["hazards"] = sum(h["count"] for h in rep["hazards"])
        checks = torch_npu_pinpool._ext.report_checks()
        values["copies compared"], values["replays compared"] = checks["copies"], checks["replays"]
    return {"samples": samples, "values": values}


def summarize(runs: stats.Runs) -> list[dict]:
    rows, vs = [], ("report", "plugin")
    keys = []
    for t in runs.trials:
        for f in t.values():
            keys += [k for k in (f or {}).get("samples", {}) if k not in keys]
    for k in keys:
        what, clock = k.rsplit(" ", 1)
        label = f"{what}: {'Python-thread' if clock == 'thread' else 'process'} CPU per call"
        rows.append(stats.timed_row(runs, k, label, "us", vs=vs, readme=clock == "thread"))
    rows.append(stats.value_row(runs, "wrong replays", "replays whose output was wrong", "",
                                check=lambda x: x == 0, target="report 0", checked="report"))
    rows.append(stats.value_row(runs, "hazards", "hazards reported (a correct program)", "",
                                check=lambda x: x == 0, target="report 0", checked="report"))
    for k in ("copies compared", "replays compared"):
        rows.append(stats.value_row(runs, k, f"{k} at completion (report)", ""))
    return rows
