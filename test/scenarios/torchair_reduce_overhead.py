"""TorchAir's aclgraph mode:
torch.compile(fn, backend=torchair.get_npu_backend(compiler_config=cfg)) with
cfg.mode = "reduce-overhead" (NPUGraph capture / replay underneath, no GE), dynamic=True, so
that one FX graph holds one aclgraph per input size (2 sizes here).

The compiled function takes a pinned CPU input (H2D inside the graph) and stages a device value
through a pinned temporary (a non_blocking D2H into a pinned block allocated during the capture,
then H2D back):  fn(host, dev) = dev + host + 2*dev  (= host + 3 for dev = 1). Each call gets a
fresh pinned input (value 10, 20, 30, 40 for calls 0..3; sizes N, 2N, N, 2N), which the caller
frees after the call; then host_empty_cache() and re-pinned junk (value 9, both sizes) that is
checked untouched at the next call.

TorchAir's memory-reuse modes (its docs: "aclgraph间内存复用功能"), one after the other in this
process (MODES, comma-separated, default all four):
  default      mode 2 (reuse across the aclgraphs of one FX graph) and mode 3 (user inputs cloned
               into static buffers: debug.aclgraph.clone_input) on, one pool per FX graph
  no_fx_reuse  debug.aclgraph.disable_mempool_reuse_in_same_fx = True
  no_clone     debug.aclgraph.clone_input = False (the caller's input tensors are kept and later
               inputs copied into them)
  custom_pool  mode 1: aclgraph_config.use_custom_pool = torch.npu.graph_pool_handle(), shared by
               two FX graphs (fn, and fn2 = 2*host + 3*dev - dev = 2*host + 2)

Reported per mode: each call's result values, what the call's own input gives ("own") and what
the input captured for that size gives ("captured"; with clone_input a CPU input is read at its
captured address on every replay: later calls' own CPU inputs are not copied in), junk blocks
found changed, the graph pools after each call (plugin), pinned bytes held before the mode and
after its graphs died (torch._dynamo.reset, gc) and one host_empty_cache(), and the simulator's
violation count (replay over freed host memory). Reports {"skip": ...} when this torch_npu wheel
has no TorchAir, and {"skip": ...} for a mode whose option this TorchAir lacks. Env: MODES,
CALLS (4).
"""

import gc
import importlib.util
import os

import torch
import torch_npu
from _lib import simctl
from _lib.scenario import (
    PLUGIN,
    N,
    env_int,
    held_bytes,
    native_pools,
    pinned,
    pools,
    report,
    side_stream,
    torchair_counts_captures,
    values,
)

import torch_npu_pinpool

if importlib.util.find_spec("torch_npu.dynamo.torchair") is None:
    report({"skip": f"torch_npu {torch_npu.__version__} carries no TorchAir"})
    raise SystemExit(0)

import torchair  # noqa: E402  (after torch_npu, which makes `torchair` importable)
from torch._dynamo.utils import counters  # noqa: E402

MODES = os.environ.get("MODES", "default,no_fx_reuse,no_clone,custom_pool").split(",")
CALLS = env_int("CALLS", 4)


def fn(host: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
    staged = (dev * 2).to("cpu", non_blocking=True)  # pinned temporary, D2H in the graph
    return dev + host.to("npu", non_blocking=True) + staged.to("npu", non_blocking=True)


def fn2(host: torch.Tensor, dev: torch.Tensor) -> torch.Tensor:
    staged = (dev * 3).to("cpu", non_blocking=True)
    return host.to("npu", non_blocking=True) * 2 + staged.to("npu", non_blocking=True) - dev


def expect(f, v: float) -> float:
    return v + 3 if f is fn else 2 * v + 2


# mode -> (config section path, option, value); "default" sets nothing
OPTIONS = {
    "default": None,
    "no_fx_reuse": ("debug.aclgraph", "disable_mempool_reuse_in_same_fx", True),
    "no_clone": ("debug.aclgraph", "clone_input", False),
    "custom_pool": ("aclgraph_config", "use_custom_pool", "pool"),
}


def config(mode: str):
    """The CompilerConfig of ``mode``, or a string naming the option this TorchAir lacks."""
    cfg = torchair.CompilerConfig()
    cfg.mode = "reduce-overhead"
    if OPTIONS[mode] is not None:
        path, option, value = OPTIONS[mode]
        section = cfg
        for part in path.split("."):
            section = getattr(section, part, None)
        if section is None or not hasattr(section, option):
            return f"this TorchAir has no config option {path}.{option}"
        if value == "pool":
            value = torch.npu.graph_pool_handle()
        setattr(section, option, value)
    return cfg


def pool_rows() -> list:
    return [
        {k: p[k] for k in ("graphs", "blocks", "bytes_held", "adopted_blocks")}
        for p in pools()
    ]


def run_mode(mode: str) -> dict:
    baseline = held_bytes()
    violations0 = simctl.violations() if simctl.available() else 0
    counters["npugraph_ex"].clear()
    cfg = config(mode)
    if isinstance(cfg, str):
        return {"skip": cfg}
    fns = [fn, fn2] if mode == "custom_pool" else [fn]
    backend = torchair.get_npu_backend(compiler_config=cfg)
    compiled = [torch.compile(f, backend=backend, dynamic=True, fullgraph=True) for f in fns]
    seen, own, captured, per_call_pools, clobbered = [], [], [], [], []
    first_value: dict[int, float] = {}  # input value captured per size
    junk: list[torch.Tensor] = []
    for call in range(CALLS):
        n = N * (1 + call % 2)
        v = float(10 * (call + 1))
        first_value.setdefault(n, v)
        dev = torch.ones(n, device="npu")
        host = pinned(v, n)
        outs = [c(host, dev) for c in compiled]
        torch.npu.synchronize()
        seen.append([values(o) for o in outs])
        own.append([[expect(f, v)] for f in fns])
        captured.append([[expect(f, first_value[n])] for f in fns])
        clobbered += [f"call {call}: junk {values(t)}" for t in junk if values(t) != [9.0]]
        per_call_pools.append(pool_rows())
        del host, outs, dev
        junk = []
        torch_npu_pinpool.host_empty_cache()
        junk = [pinned(9.0, N * k) for k in (1, 2) for _ in range(4)]
    clobbered += [f"end: junk {values(t)}" for t in junk if values(t) != [9.0]]
    junk = []
    aclgraphs = sorted(v for k, v in counters["npugraph_ex"].items() if k.startswith("captured_"))
    if not torchair_counts_captures():
        aclgraphs = None  # not counted by this TorchAir
    held_with_graphs = held_bytes()
    del compiled, backend, cfg
    torch._dynamo.reset()
    gc.collect()
    torch.npu.synchronize()
    torch_npu_pinpool.host_empty_cache()
    out = {
        "seen": seen,
        "own": own,
        "captured": captured,
        "junk_clobbered": clobbered,
        "pools": per_call_pools,
        "aclgraphs_per_fx_graph": aclgraphs,
        "baseline": baseline,
        "held_with_graphs": held_with_graphs,
        "held_after": held_bytes(),
    }
    if simctl.available():
        out["violations"] = simctl.violations() - violations0
    return out


side_stream()
result = {"plugin": PLUGIN, "native_pools": native_pools(), "n": N, "modes": {}}
for m in MODES:
    result["modes"][m] = run_mode(m)
report(result)
