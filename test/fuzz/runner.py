"""Executes fuzz programs (test/fuzz/program.py) in this process and reports what each
step observably did: one ``PINPOOL_RESULT:<json>`` line at the end (``scenario.report()``).

Run by path, like test/scenarios/*.py, once with the plugin and once natively::

    python test/fuzz/runner.py PROGRAMS.json                        # plugin
    TORCH_NPU_PINPOOL=0 python test/fuzz/runner.py PROGRAMS.json    # torch_npu's own allocator

PROGRAMS.json holds one program or a list (``PINPOOL_FUZZ_PROGRAMS`` names it when argv does
not). Several programs run in sequence to amortise the process's start-up; between them every
graph is reset, every tensor dropped, the stream synchronized and ``host_empty_cache()`` called.
A program with late activation or ``alloc_conf`` must be alone: the process's first program
decides when the plugin - through test/scenarios/_lib/scenario.py - is imported (at its
``activate`` step, else before it starts) and PYTORCH_NPU_ALLOC_CONF (set before the device
allocator starts).

execute.py forks it from test/forkserver.py's server that has imported torch and torch_npu.

Per program the report holds, per step: ``pins`` and ``bytes`` (runtime pins and pinned bytes
live, simulator counters, relative to the program's start), ``graphs`` (graphs of the program
alive after the step), ``ms`` (wall time of a ``host_empty_cache()`` step) and ``runq_ms`` (of
it, the time the thread waited on the run queue for a CPU), ``settings`` (c10's allocator
settings string where torch has ``_accelerator_getAllocatorSettings``), ``oversize``
(device oversize allocations a ``dev_alloc`` step made) and ``err`` (the exception's type and
first line; the program stops there). ``copies`` lists every copy: the step that made it, what
it should have delivered (``expect``: the byte last written before it) and the distinct byte
values read back from the device after a synchronize (``got``: the first and last 64 bytes of
the destination - a block handed to another owner is overwritten from its start).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scenarios"))

from _lib import simctl  # noqa: E402  (no torch import: the order below is this file's)


def _load(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        data = json.load(f)
    return data if isinstance(data, list) else [data]


import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch_npu  # noqa: E402

# The imports' objects are never garbage: out of the collector's sight, the gc.collect() between
# programs takes milliseconds instead of half a second (and a forked child shares their pages).
gc.freeze()
scenario: Any = None  # test/scenarios/_lib/scenario.py, imported = the plugin activated
PROBE = 64  # bytes read back from each end of a copy's destination
FORK_TIMEOUT_S = 10.0  # a forked child that has not exited by then hung


def activate() -> None:
    global scenario
    if scenario is None:
        # imports the plugin: activates unless TORCH_NPU_PINPOOL=0
        from _lib import scenario as imported

        scenario = imported


def npu_version() -> tuple[int, int]:
    major, minor = torch_npu.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def sanitizers() -> str:
    """The sanitizers the active plugin was built with ("": a release build, or not active)."""
    if scenario is None or not scenario.PLUGIN:
        return ""
    return str(getattr(scenario.torch_npu_pinpool._ext, "sanitizers", ""))


def host_empty_cache() -> None:
    if scenario is not None:
        scenario.torch_npu_pinpool.host_empty_cache()
    else:  # before activation: torch_npu's own (importing the plugin would activate it)
        torch_npu.npu.host_empty_cache()


def allocator_settings() -> str | None:
    get = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
    return get() if get is not None else None


def oversize() -> int:
    return int(torch.npu.memory_stats().get("oversize_allocations.allocated", 0))


def run_queue_ms() -> float:
    """Milliseconds this thread has been runnable but waiting for a CPU (other processes ran)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e6
    except OSError:  # no schedstat: count it all as the call's own time
        return 0.0


def short(e: BaseException) -> dict[str, str]:
    text = (str(e).strip() or repr(e)).splitlines()
    return {"type": type(e).__name__, "msg": (text[0] if text else "")[:300]}


class Run:
    """One program's execution."""

    def __init__(self, program: dict[str, Any]) -> None:
        self.program = program
        self.tensors: dict[str, torch.Tensor] = {}
        self.values: dict[str, int] = {}
        self.graphs: dict[str, tuple[Any, torch.Tensor, int]] = {}
        self.pending: list[tuple[int, str, int, torch.Tensor, int]] = []
        self.copies: list[dict[str, Any]] = []
        self.pool: Any = None
        self.side: Any = None
        biggest = max([s.get("nbytes", 0) for s in program["steps"]] + [4096])
        self.scratch = torch.empty(biggest, dtype=torch.uint8, device="npu")
        self.lock = threading.Lock()
        self.step = -1

    # -- copies and their read-back ---------------------------------------------------------
    def probe(self, dst: torch.Tensor, what: str, expect: int) -> None:
        """Queue (in stream order, after the copy) a device-to-device read of both ends of
        ``dst``; read at the next synchronize."""
        n = dst.numel()
        m = min(PROBE, n)
        probe = torch.empty(2 * m, dtype=torch.uint8, device="npu")
        probe[:m].copy_(dst[:m])
        probe[m:].copy_(dst[n - m :])
        with self.lock:
            self.pending.append((self.step, what, expect, probe, m))

    def h2d(self, src: torch.Tensor, what: str, expect: int, scratch: Any = None) -> None:
        n = src.numel()
        dst = (self.scratch if scratch is None else scratch)[:n]
        dst.copy_(src, non_blocking=True)
        self.probe(dst, what, expect)

    def settle(self) -> list[dict[str, Any]]:
        torch.npu.synchronize()
        done = []
        with self.lock:
            pending, self.pending = self.pending, []
        for step, what, expect, probe, _ in pending:
            got = sorted(set(probe.cpu().tolist()))
            done.append({"step": step, "what": what, "expect": expect, "got": got})
        self.copies += done
        return done

    # -- steps -----------------------------------------------------------------------------
    def pinned(self, nbytes: int, value: int) -> torch.Tensor:
        t = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        t.fill_(value)
        return t

    def do(self, step: dict[str, Any], obs: dict[str, Any]) -> None:
        op = step["op"]
        if op == "pin":
            self.tensors[step["id"]] = self.pinned(step["nbytes"], step["value"])
            self.values[step["id"]] = step["value"]
        elif op == "fill":
            self.tensors[step["id"]].fill_(step["value"])
            self.values[step["id"]] = step["value"]
        elif op == "h2d":
            self.h2d(self.tensors[step["id"]], f"h2d {step['id']}", self.values[step["id"]])
        elif op == "alias":
            self.alias(step)
        elif op == "d2h":
            n = step["nbytes"]
            src = self.scratch[:n]
            src.copy_(torch.full((n,), step["value"], dtype=torch.uint8))  # pageable H2D
            p = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            p.copy_(src, non_blocking=True)
            del p  # freed with the copy queued
        elif op == "free":
            del self.tensors[step["id"]]
        elif op == "sync":
            obs["copies"] = len(self.settle())
        elif op == "empty_cache":
            # The run-queue reads sit inside the wall-clock reads: a wait for a CPU between
            # two reads then counts in the wall time only, never in runq_ms alone.
            t0 = time.perf_counter()
            q0 = run_queue_ms()
            host_empty_cache()
            q1 = run_queue_ms()
            obs["ms"] = round((time.perf_counter() - t0) * 1000, 3)
            obs["runq_ms"] = round(q1 - q0, 3)
        elif op == "capture":
            self.capture(step, obs)
        elif op == "replay":
            if step["gid"] in self.graphs:
                graph, dev, expect = self.graphs[step["gid"]]
                graph.replay()
                self.probe(dev, f"replay {step['gid']}", expect)
        elif op == "reset":
            if step["gid"] in self.graphs:
                graph, _, _ = self.graphs.pop(step["gid"])
                graph.reset()
        elif op == "thread":
            self.thread(step)
        elif op == "dataloader":
            self.dataloader(step)
        elif op == "fork":
            self.fork(step, obs)
        elif op == "dev_alloc":
            before = oversize()
            x = torch.empty(step["nbytes"], dtype=torch.uint8, device="npu")
            del x
            obs["oversize"] = oversize() - before
            obs["settings"] = allocator_settings()
        elif op == "activate":
            activate()
            obs["settings"] = allocator_settings()
            obs["active"] = scenario.PLUGIN
        else:
            raise ValueError(f"unknown step {op!r}")

    def alias(self, step: dict[str, Any]) -> None:
        t = self.tensors[step["id"]]
        how, k = step["how"], step.get("k", 0)
        if how == "numpy":
            a = torch.from_numpy(t.numpy())
        elif how == "dlpack":
            a = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t))
        elif how == "frombuffer":
            a = torch.frombuffer(t.numpy(), dtype=torch.uint8)
        elif how == "offset":
            a = t[k:]
        else:
            raise ValueError(f"unknown alias {how!r}")
        self.h2d(a, f"alias {how} {step['id']}", self.values[step["id"]])
        del a

    def capture(self, step: dict[str, Any], obs: dict[str, Any]) -> None:
        hooks = step["hooks"]
        if not hooks and npu_version() < (2, 11):
            obs["skipped"] = "torch_npu <= 2.10 tells the host allocator nothing without hooks"
            return
        if self.side is None:
            self.side = torch.npu.Stream()
        if step["pool"] == "shared" and self.pool is None:
            self.pool = torch.npu.graph_pool_handle()
        pool = self.pool if step["pool"] == "shared" else None
        graph = torch.npu.NPUGraph()
        src = step["src"]
        strided = step.get("view") == "strided"  # a non-contiguous view: a staged copy
        n = (step["nbytes"] + 1) // 2 if strided else step["nbytes"]
        dev = torch.empty(n, dtype=torch.uint8, device="npu")
        expect = step["value"] if src == "inside" else self.values[src]
        torch.npu.synchronize()
        with torch.npu.stream(self.side):
            if hooks:
                graph.capture_begin(pool=pool, capture_error_mode="thread_local")
            else:
                kwargs: dict[str, Any] = {"capture_error_mode": "thread_local"}
                if pool is not None:
                    kwargs["pool"] = pool
                torch_npu._C._NPUGraph.capture_begin(graph, report_shape=True, **kwargs)
            try:
                if src == "inside":
                    x = self.pinned(step["nbytes"], step["value"])
                    dev.copy_(x, non_blocking=True)
                    del x
                else:
                    t = self.tensors[src]
                    dev.copy_(t[::2] if strided else t, non_blocking=True)
                    del t
            finally:
                if hooks:
                    graph.capture_end()
                else:
                    torch_npu._C._NPUGraph.capture_end(graph)
        self.graphs[step["gid"]] = (graph, dev, expect)

    def thread(self, step: dict[str, Any]) -> None:
        errors: list[BaseException] = []
        n = step["nbytes"]

        def run() -> None:
            try:
                torch.npu.set_device(0)
                scratch = torch.empty(n, dtype=torch.uint8, device="npu")
                for j in range(step["count"]):
                    value = (step["value"] + j) % 256
                    t = self.pinned(n, value)
                    self.h2d(t, f"thread copy {j}", value, scratch)
                    del t
            except BaseException as e:  # noqa: BLE001 - re-raised on the main thread
                errors.append(e)

        th = threading.Thread(target=run)
        th.start()
        th.join()
        if errors:
            raise errors[0]

    def dataloader(self, step: dict[str, Any]) -> None:
        from torch.utils.data import DataLoader, TensorDataset

        n, value = step["nbytes"], step["value"]
        data = TensorDataset(torch.full((step["batches"], n), value, dtype=torch.uint8))
        for (x,) in DataLoader(data, batch_size=1, pin_memory=True):
            self.h2d(x[0], "dataloader batch", value)
            del x

    def fork(self, step: dict[str, Any], obs: dict[str, Any]) -> None:
        """Fork a child (while a busy thread pins and empties the cache, with ``busy``) and
        wait for it up to FORK_TIMEOUT_S: ``child`` is "ok", "exit N" or "hung" (killed), and
        ``child_calls`` what each of its allocator calls gave ("ok" or the exception's type).
        The queued copies run first: CANN does not support a fork while asynchronous memory
        operations run ("errors or hangs", with either allocator: AscendCL's restrictions,
        hiascend.com/document/detail/en/canncommercial/800/appdevg/aclcppdevg/
        aclcppdevg_000220.html), and the simulator's stream worker holds the runtime's lock as
        it starts and ends each one (natively forked children of test_fuzz.py's seeds hung on
        it)."""
        torch.npu.synchronize()
        stop = threading.Event()

        def busy() -> None:
            while not stop.is_set():
                host_empty_cache()
                self.pinned(4096, 1)

        thread = threading.Thread(target=busy, daemon=True) if step["busy"] else None
        if thread is not None:
            thread.start()
            time.sleep(0.02)
        try:
            obs["child"], obs["child_calls"] = self.fork_child(step["nbytes"])
        finally:
            stop.set()
            if thread is not None:
                thread.join()

    def fork_child(self, nbytes: int) -> tuple[str, dict[str, str]]:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report through the pipe, never return into the program
            os.close(read_end)
            calls: dict[str, str] = {}
            for name, call in (
                # not filled: a fill_ that large runs on OpenMP's threads, which a forked
                # child lacks (libgomp then waits forever, with either allocator)
                ("pin", lambda: torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)),
                ("stats", lambda: torch.npu.host_memory_stats()),
                ("empty_cache", host_empty_cache),
                ("free", self.tensors.clear),
            ):
                try:
                    call()
                    calls[name] = "ok"
                except Exception as e:  # noqa: BLE001 - what the child would see
                    calls[name] = type(e).__name__
            os.write(write_end, json.dumps(calls).encode())
            os._exit(0)
        os.close(write_end)
        deadline = time.monotonic() + FORK_TIMEOUT_S
        status: Any = None
        while status is None and time.monotonic() < deadline:
            done, raw = os.waitpid(pid, os.WNOHANG)
            status = os.waitstatus_to_exitcode(raw) if done else None
            time.sleep(0 if done else 0.01)
        if status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        calls = json.loads(os.read(read_end, 1 << 16) or b"{}")
        os.close(read_end)
        child = "hung" if status is None else "ok" if status == 0 else f"exit {status}"
        return child, calls

    # -- the program -----------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        program = self.program
        simctl.set_delay_us(int(program.get("delay_us", 0)))
        base_pins, base_bytes = simctl.host_pins(), simctl.host_bytes()
        out: dict[str, Any] = {
            "seed": program.get("seed"),
            "settings": allocator_settings(),
            "steps": [],
        }
        for i, step in enumerate(program["steps"]):
            self.step = i
            obs: dict[str, Any] = {"op": step["op"]}
            try:
                self.do(step, obs)
            except Exception as e:  # noqa: BLE001 - observed, compare.py decides
                obs["err"] = short(e)
            obs["pins"] = simctl.host_pins() - base_pins
            obs["bytes"] = simctl.host_bytes() - base_bytes
            obs["graphs"] = len(self.graphs)
            out["steps"].append(obs)
            if "err" in obs:
                break
        try:
            self.settle()
        except Exception as e:  # noqa: BLE001
            out["end_err"] = short(e)
        simctl.set_delay_us(0)
        out["copies"] = self.copies
        out["settings_end"] = allocator_settings()
        out["active"] = bool(scenario is not None and scenario.PLUGIN)
        out["host_pools"] = npu_version() >= (2, 11)  # compare.graph_slack
        out["sanitizers"] = sanitizers()  # compare: empty_cache_time
        return out

    def cleanup(self) -> None:
        for graph, _, _ in self.graphs.values():
            try:
                graph.reset()
            except Exception:  # noqa: BLE001 - the next program starts clean regardless
                pass
        self.graphs.clear()
        self.tensors.clear()
        self.pending.clear()
        del self.scratch
        gc.collect()
        torch.npu.synchronize()
        host_empty_cache()


def begin(programs: list[dict[str, Any]]) -> None:
    """What the process does before its first program: PYTORCH_NPU_ALLOC_CONF before the device
    allocator starts (at ``set_device``), the plugin unless a program activates it late."""
    late = any(p.get("activation", "import") != "import" for p in programs)
    conf = {p.get("alloc_conf") or "" for p in programs}
    if (late or conf != {""}) and len(programs) != 1:
        raise SystemExit("runner: a program with late activation or alloc_conf must run alone")
    if conf != {""}:
        os.environ["PYTORCH_NPU_ALLOC_CONF"] = conf.pop()
    torch.npu.set_device(0)
    if not late:
        activate()


def run_programs(programs: list[dict[str, Any]]) -> None:
    """Run ``programs`` in this process and report their results."""
    begin(programs)
    results = []
    for program in programs:
        run = Run(program)
        t0 = time.perf_counter()
        try:
            result = run.run()
        finally:
            run.cleanup()
        result["seconds"] = round(time.perf_counter() - t0, 3)
        results.append(result)
        del run
    activate()  # report() lives in scenario.py (a late program that stopped early imports it now)
    scenario.report(
        {
            "plugin": scenario.PLUGIN,
            "torch_npu": torch_npu.__version__,
            "numpy": np.__version__,
            "programs": results,
        }
    )


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ["PINPOOL_FUZZ_PROGRAMS"]
    run_programs(_load(path))


main()
