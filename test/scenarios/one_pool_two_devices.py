"""One pool handle (``torch.npu.graph_pool_handle()``) captured into on two devices. Device
memory pools are per device, so the handle names one pool on each device; the host side must
keep them apart too: each device's graph owns the pinned block it copies from, and another
thread pinning bait (-9) never gets it while that graph lives.

Each graph is captured by ``capture_begin(pool=..., capture_error_mode="thread_local")`` on a
stream of its own device (passed explicitly), pins a tensor (40 + device), copies it in and
drops it. Then the bait is pinned and every graph is replayed several times.

PINPOOL_SHAPE:
  concurrent   two threads, one per device, both inside their captures at once
  sequential   one thread: the device-0 capture ends, then the device-1 capture begins
  reset_one    as sequential; then device 0's graph is reset (with device 1 current) while
               device 1's graph replays, a churn thread pinning bait meanwhile
  same_device  two threads on device 0, each on its own stream, both inside captures into the
               same pool at once (one pool on one device: the second must be refused)
  unannounced  as reset_one, but both captures begun and ended through torch_npu's C++
               methods, bypassing the plugin's hooks (torch_npu >= 2.11 only: there torch_npu
               calls the pool hooks itself, and its reset() calls release_pool, which names no
               device, with whatever device is current)

Reports per capture the error (or None), per replay round the values read, the plugin's pool
stats while the graphs live, and the pinned bytes held after every graph is reset and the cache
emptied (``held_after``) beside those held before (``baseline``). Needs two devices (reports
{"skip": ...} otherwise). PINPOOL_DELAY_US: the simulator's task delay (keeps replays queued).
"""

import os
import threading

import torch
import torch_npu
from _lib import simctl
from _lib.scenario import PLUGIN, Churn, env_int, held_bytes, pinned, pools, report, values

import torch_npu_pinpool

SHAPE = os.environ.get("PINPOOL_SHAPE", "concurrent")
ROUNDS = 3
if torch.npu.device_count() < 2 and SHAPE != "same_device":
    report({"skip": f"needs 2 devices, found {torch.npu.device_count()}"})
    raise SystemExit(0)
if SHAPE == "unannounced" and tuple(map(int, torch_npu.__version__.split(".")[:2])) < (2, 11):
    report({"skip": "torch_npu <= 2.10 tells the host allocator nothing without the hooks"})
    raise SystemExit(0)
if env_int("PINPOOL_DELAY_US", 0) and simctl.available():  # the delay is the simulator's
    simctl.set_delay_us(env_int("PINPOOL_DELAY_US", 0))

torch_npu_pinpool.host_empty_cache()
baseline = held_bytes()
pool = torch.npu.graph_pool_handle()
devices = [0, 0] if SHAPE == "same_device" else [0, 1]
graphs = [torch.npu.NPUGraph() for _ in devices]
outputs = [torch.zeros(1024, device=f"npu:{d}") for d in devices]
errors = [None, None]
inside = threading.Barrier(2, timeout=60)  # both captures underway at once


def capture(i: int, overlap: bool) -> None:
    """Capture graph i on its device into `pool`; with `overlap`, wait inside the capture until
    the other capture is underway too."""
    device = devices[i]
    torch.npu.set_device(device)
    stream = torch.npu.Stream(device=device)
    began = False
    # unannounced: torch_npu's own methods (the hooks patch the Python subclass only).
    begin = torch_npu._C._NPUGraph.capture_begin if SHAPE == "unannounced" else None
    end = torch_npu._C._NPUGraph.capture_end if SHAPE == "unannounced" else None
    try:
        with torch.npu.stream(stream):
            if begin is not None:
                begin(graphs[i], pool=pool, capture_error_mode="thread_local", report_shape=True)
            else:
                graphs[i].capture_begin(pool=pool, capture_error_mode="thread_local")
            began = True
            t = pinned(40 + i)
            outputs[i].copy_(t, non_blocking=True)
            del t
            if overlap:
                try:
                    inside.wait()
                except threading.BrokenBarrierError:
                    pass  # the other capture failed: this one ends as usual
            (end or type(graphs[i]).capture_end)(graphs[i])
    except Exception as e:  # noqa: BLE001 - reported, the test decides
        errors[i] = (str(e).strip() or repr(e)).splitlines()[0][:400]
        if overlap:
            inside.abort()  # the other thread is not left waiting
        if began:
            try:
                with torch.npu.stream(stream):
                    graphs[i].capture_end()
            except Exception:  # noqa: BLE001 - the capture may already be over
                pass


if SHAPE in ("sequential", "reset_one", "unannounced"):
    capture(0, overlap=False)
    capture(1, overlap=False)
else:
    threads = [threading.Thread(target=capture, args=(i, True)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
torch.npu.set_device(0)
for d in set(devices):
    torch.npu.synchronize(d)

captured = [i for i in range(2) if errors[i] is None]
out = {"errors": errors, "pools": [], "rounds": []}


def pool_rows() -> list:
    """The plugin's pools: device, graphs alive, blocks, whether a capture still runs."""
    return [
        {"device": p["device"], "graphs": p["graphs"], "blocks": p["blocks"],
         "capturing": p["capturing"]}
        for p in pools()
    ]


if PLUGIN:
    out["pools"] = pool_rows()


def replay_round(which: list) -> list:
    for i in which:
        outputs[i].fill_(0.0)
    for i in which:
        graphs[i].replay()
    for d in set(devices):
        torch.npu.synchronize(d)
    return [values(outputs[i]) for i in which]


bait = [pinned(-9.0) for _ in range(8)]  # takes any block given back too early
if SHAPE in ("reset_one", "unannounced") and captured == [0, 1]:
    with Churn(value=-9.0):
        out["rounds"].append(replay_round([0, 1]))
        outputs[1].fill_(0.0)
        graphs[1].replay()  # queued on device 1 while device 0's graph goes
        # With the other device current: the hooks name the graph; without them (unannounced)
        # torch_npu's release_pool names no device, and the current one is not the graph's.
        torch.npu.set_device(1)
        graphs[0].reset()
        torch.npu.set_device(0)
        torch_npu_pinpool.host_empty_cache()
        torch.npu.synchronize(1)
        out["rounds"].append([values(outputs[1])])
        out["rounds"] += [replay_round([1]) for _ in range(ROUNDS)]
    if PLUGIN:
        out["pools_after_reset"] = pool_rows()
    bait += [pinned(-9.0) for _ in range(8)]
    out["rounds"].append(replay_round([1]))
else:
    out["rounds"] = [replay_round(captured) for _ in range(ROUNDS)]
del bait
for g in graphs:
    g.reset()
for d in set(devices):
    torch.npu.synchronize(d)
torch_npu_pinpool.host_empty_cache()
out["baseline"], out["held_after"] = baseline, held_bytes()
out["pools_after"] = len(pool_rows()) if PLUGIN else 0
if simctl.available():
    out["violations"] = simctl.violations()  # replay over memory given back
report(out)
