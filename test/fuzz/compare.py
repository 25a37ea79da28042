"""The rules: what a plugin run of a program must satisfy against the native run of the same
program (``TORCH_NPU_PINPOOL=0``, its own fresh process). Each rule is a named check; a
failure names the check, the step and both numbers. The standard: never worse than native.

Checks (``CHECKS``):

* ``run_completed`` - the plugin run reported (no crash, no hang); a native run that did not
  report makes the program inconclusive (verdict ``skip``), not a failure.
* ``errors_match`` - a step that raised natively raises with the plugin too, with the same
  exception type (the plugin may refuse what native refuses); a step the plugin refuses and
  native runs is a failure. Both runs stop at their first error, so the checks below compare
  the steps both ran. One exception: a capture of a strided view of a pinned tensor, which
  torch_npu refuses (it stages the view through pageable memory: runtime error 107000) and the
  plugin runs (Note [Strided pinned copies in capture]). There the plugin's run goes on alone,
  and every copy it makes from that step on must deliver the bytes written before it; pins and
  pinned bytes are compared up to the step before (native did not do the step: the plugin's
  staging block has no native counterpart).
* ``bytes_delivered`` - every copy (H2D, alias, thread, DataLoader, replay) delivered the bytes
  last written before it, where native delivered them too.
* ``bytes_where_native_wrong`` - where native itself delivered other bytes (torch_npu <= 2.10
  reusing a captured block, say), the plugin must still deliver the intended ones. A separate
  name, so a report tells "worse than native" from "as wrong as native".
* ``pins`` - runtime pins (aclrtMallocHost* calls) after every step: plugin <= native + the
  number of distinct power-of-two size classes >= 32 MiB the program requested so far (issue
  47: the price of first sizing a large block exactly). Only up to the first step whose outcome
  depends on timing (``timing_free``): an allocation, capture or ``host_empty_cache()`` while a
  copy, replay or reset may still be in flight, or a thread / DataLoader step. There which
  blocks are free depends on when the device finished, which differs between the two processes
  (and from run to run natively), so neither allocator's count bounds the other's. The free
  of a tensor an eager copy used counts as in flight until the next ``sync``: both allocators
  record an event then and reuse the block once it completed (measured on 2.14: after
  ``sync; del t; host_empty_cache()`` each kept the block in 9-10 of 10 runs, and neither
  with 0.2 ms between the free and the call). On torch_npu <= 2.10 (no host pools) the plugin
  may also spend one pin per capture so far: native serves a capture's pinned buffer from its
  eager cache and gives it back to that cache while the graph may still replay it (the
  ``bytes_where_native_wrong`` case); the plugin pins graph memory for the graph.
* ``pinned_bytes`` - pinned bytes live at the runtime (in use + cached idle) after every step:
  plugin <= native, at the steps where no graph of the program is alive in either run.
  Why not while a graph lives: a graph's pinned inputs are the graph's until it dies, and the
  two allocators hold them differently by design - torch_npu <= 2.10 has no graph pools and
  hands a captured block back to its eager cache at once (holding less, and then delivering
  the next owner's bytes to replays, which ``bytes_delivered`` catches), and the plugin keeps a
  dead graph's blocks until its queued replays ran. Graph-held bytes are bounded by what the
  graph captured, not by a cache policy; the cache policy is what this check is about, and it
  applies again from the step the last graph is reset (a replayed graph's reset excepted:
  the plugin gives its blocks back once a fence recorded there completed). Like ``pins``, only
  at timing-free steps; a ``host_empty_cache()`` with nothing in flight makes the bytes
  comparable again (both runs then hold just their live tensors' blocks).
* ``settings`` - c10's allocator settings string (where torch has one) at the program's start,
  after ``activate`` / ``dev_alloc`` steps and at its end: equal.
* ``device_oversize`` - a ``dev_alloc`` step's device oversize allocations (what
  ``max_split_size_mb`` decides): equal.
* ``fork_child`` - a child forked at a ``fork`` step ended (exit 0) where native's did, and
  its allocator calls gave what native's gave. Where native's child hung (torch_npu's own
  mutex, held at the fork by the busy thread: 1 fork in 360 on 2.10), the plugin's is not
  compared.
* ``empty_cache_time`` - time of every ``host_empty_cache()`` step: plugin <= native +
  ``time_bound_ms`` (250 ms: it catches a wait for queued work, not scheduling noise). The time
  is the call's wall time less the time its thread sat runnable on the run queue while other
  processes had the CPUs (``runq_ms``, the kernel's schedstat): on 2 shared cores that alone
  reached ~1 s where freeing ~1 GiB of idle blocks (both runs do) took 0.1-0.3 s. Running,
  sleeping and blocking (a wait for queued work) all still count. Not checked for a sanitized
  build of the plugin (the sanitizer legs, ``TORCH_NPU_PINPOOL_SANITIZE``): its instrumented
  calls against torch_npu's uninstrumented ones time the instrumentation (seed 5 in the ASan
  leg: 1,674 ms against 733; alone 717 against 587), not a wait; the other legs check it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

try:
    from fuzz.program import Program, size_classes
except ImportError:  # run from inside test/fuzz
    from program import Program, size_classes  # type: ignore[no-redef]

CHECKS = (
    "run_completed",
    "errors_match",
    "bytes_delivered",
    "bytes_where_native_wrong",
    "pins",
    "pinned_bytes",
    "settings",
    "device_oversize",
    "fork_child",
    "empty_cache_time",
)
TIME_BOUND_MS = 250.0
MiB = 1 << 20


@dataclass
class Failure:
    check: str
    step: int | None
    message: str

    def __str__(self) -> str:
        where = "" if self.step is None else f" at step {self.step}"
        return f"{self.check}{where}: {self.message}"


def _mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if abs(n) >= MiB else f"{n} B"


def _staged_view_capture(program: Program, i: int) -> bool:
    """Step i captures a strided view of a tensor pinned while the plugin was active (memory it
    owns; one pinned before a late activation it refuses, as native does)."""
    steps = program["steps"]
    step = steps[i]
    if step["op"] != "capture" or step.get("view") != "strided":
        return False
    if program.get("activation") != "late":
        return True
    pinned = next(k for k in range(i) if steps[k].get("id") == step["src"] and
                  steps[k]["op"] == "pin")
    return any(steps[k]["op"] == "activate" for k in range(pinned))


def _op(program: Program, i: int) -> str:
    step = program["steps"][i]
    extra = {k: v for k, v in step.items() if k in ("id", "gid", "nbytes", "how", "hooks", "pool")}
    return f"{step['op']}{extra}" if extra else step["op"]


# Steps that take or give back pinned blocks, and steps that leave device work in flight.
_ALLOCATING = {"pin", "d2h", "capture", "empty_cache", "thread", "dataloader"}
_IN_FLIGHT_AFTER = {"h2d", "alias", "d2h", "capture", "replay", "reset", "thread", "dataloader"}


def timing_free(program: Program) -> list[tuple[bool, bool]]:
    """Per step: (pins comparable, pinned bytes comparable) - see ``pins``."""
    out, in_flight, pins_ok, bytes_ok = [], False, True, True
    copied: set[str] = set()  # tensors an eager copy used: their free records an event
    replayed: set[str] = set()  # graphs replayed: their reset records a fence (the plugin's)
    for step in program["steps"]:
        op = step["op"]
        threaded = op in ("thread", "dataloader") or (op == "fork" and step["busy"])
        if threaded or (op in _ALLOCATING and in_flight):
            pins_ok = bytes_ok = False
        elif op == "empty_cache":
            bytes_ok = True
        elif op == "reset" and step["gid"] in replayed:
            bytes_ok = False
        if op == "sync":
            in_flight = False
        elif op in _IN_FLIGHT_AFTER or (op == "free" and step["id"] in copied):
            in_flight = True
        if op in ("h2d", "alias"):
            copied.add(step["id"])
        elif op == "replay":
            replayed.add(step["gid"])
        out.append((pins_ok, bytes_ok))
    return out


def graph_slack(program: Program, upto: int, host_pools: bool) -> int:
    """Pins the plugin may spend beyond native's for graphs by step ``upto``: on torch_npu
    <= 2.10 (no host pools) one per capture - see ``pins``."""
    steps = program["steps"][: upto + 1]
    return 0 if host_pools else sum(1 for s in steps if s["op"] == "capture")


def compare(
    program: Program,
    plugin: dict[str, Any] | None,
    native: dict[str, Any] | None,
    time_bound_ms: float = TIME_BOUND_MS,
) -> tuple[str, list[Failure]]:
    """(verdict, failures): verdict ``"pass"``, ``"FAIL"`` or ``"skip"`` (native did not run
    to completion: nothing to compare against)."""
    if native is None:
        return "skip", []
    if plugin is None:
        return "FAIL", [Failure("run_completed", None, "the plugin run crashed or hung")]
    fails: list[Failure] = []
    p_steps, n_steps = plugin["steps"], native["steps"]

    # errors_match (both runs stop at their first error)
    common = min(len(p_steps), len(n_steps))
    alone = None  # the step from which the plugin ran without native (a staged view capture)
    for i in range(common):
        pe, ne = p_steps[i].get("err"), n_steps[i].get("err")
        if ne and not pe and _staged_view_capture(program, i):
            alone = i
        elif ne and not pe:
            fails.append(Failure("errors_match", i, f"{_op(program, i)}: native raised "
                                 f"{ne['type']}: {ne['msg']!r}, the plugin did not"))
        elif pe and not ne:
            fails.append(Failure("errors_match", i, f"{_op(program, i)}: the plugin raised "
                                 f"{pe['type']}: {pe['msg']!r}, native did not"))
        elif pe and ne and pe["type"] != ne["type"]:
            fails.append(Failure("errors_match", i, f"{_op(program, i)}: plugin raised "
                                 f"{pe['type']}, native {ne['type']}"))
        if pe or ne:
            common = i + 1
            break
    ran = common  # steps 0..ran-1 ran in both

    # bytes delivered
    n_copies = {(c["step"], c["what"], k): c for k, c in _numbered(native["copies"])}
    for k, c in _numbered(plugin["copies"]):
        if c["step"] >= ran:  # only the plugin ran it: checked after a staged view capture
            if alone is not None and c["got"] != [c["expect"]]:
                fails.append(Failure("bytes_delivered", c["step"], f"{c['what']}: the plugin's "
                                     f"copy delivered {c['got']} (written: {c['expect']}); native"
                                     f" stopped at step {alone}, a staged view capture it refuses"))
            continue
        nc = n_copies.get((c["step"], c["what"], k))
        if c["got"] == [c["expect"]]:
            continue
        if nc is None or nc["got"] == [nc["expect"]]:
            fails.append(Failure("bytes_delivered", c["step"], f"{c['what']}: the plugin's copy"
                                 f" delivered {c['got']}, native {nc and nc['got']} (written: "
                                 f"{c['expect']})"))
        else:
            fails.append(Failure("bytes_where_native_wrong", c["step"], f"{c['what']}: the "
                                 f"plugin delivered {c['got']}, native {nc['got']} (written: "
                                 f"{c['expect']})"))

    # pins, pinned bytes: over the steps both did (not a capture native refused)
    pin_fail = byte_fail = None
    comparable = timing_free(program)
    both = ran if alone is None else alone
    for i in range(both):
        p, n = p_steps[i], n_steps[i]
        pins_ok, bytes_ok = comparable[i]
        host_pools = native.get("host_pools", True)
        slack = size_classes(program, i) + graph_slack(program, i, host_pools)
        if pin_fail is None and pins_ok and p["pins"] > n["pins"] + slack:
            pin_fail = Failure("pins", i, f"after {_op(program, i)}: plugin {p['pins']} pins, "
                               f"native {n['pins']} (+{slack} allowed: size classes >= 32 "
                               f"MiB, captures without host pools)")
        idle = p["graphs"] == 0 and n["graphs"] == 0
        if byte_fail is None and bytes_ok and idle and p["bytes"] > n["bytes"]:
            byte_fail = Failure("pinned_bytes", i, f"after {_op(program, i)}: plugin "
                                f"{_mib(p['bytes'])} pinned, native {_mib(n['bytes'])}")
    if pin_fail is not None:
        p_peak = max(s["pins"] for s in p_steps[:both])
        n_peak = max(s["pins"] for s in n_steps[:both])
        pin_fail.message += f"; at the end {p_peak} against {n_peak}"
        fails.append(pin_fail)
    if byte_fail is not None:
        idle = [i for i in range(both) if p_steps[i]["graphs"] == 0 and n_steps[i]["graphs"] == 0
                and comparable[i][1]]
        p_peak = max(p_steps[i]["bytes"] for i in idle)
        n_peak = max(n_steps[i]["bytes"] for i in idle)
        byte_fail.message += f"; peak {_mib(p_peak)} against {_mib(n_peak)}"
        fails.append(byte_fail)

    # settings, the device allocator's behaviour, and time
    timed = not plugin.get("sanitizers")
    if plugin.get("settings") != native.get("settings"):
        fails.append(Failure("settings", None, f"at the start: plugin "
                             f"{plugin.get('settings')!r}, native {native.get('settings')!r}"))
    for i in range(ran):
        p, n = p_steps[i], n_steps[i]
        if "settings" in n and p.get("settings") != n["settings"]:
            fails.append(Failure("settings", i, f"after {_op(program, i)}: c10 settings plugin "
                                 f"{p.get('settings')!r}, native {n['settings']!r}"))
        if "oversize" in n and p.get("oversize") != n["oversize"]:
            fails.append(Failure("device_oversize", i, f"{_op(program, i)}: device oversize "
                                 f"allocations plugin {p.get('oversize')}, native "
                                 f"{n['oversize']}"))
        child_as_native = (p.get("child"), p.get("child_calls")) == ("ok", n.get("child_calls"))
        if n.get("child") == "ok" and not child_as_native:
            fails.append(Failure("fork_child", i, f"the forked child: plugin {p.get('child')} "
                                 f"{p.get('child_calls')}, native ok {n['child_calls']}"))
        if timed and "ms" in n and "ms" in p and _ms(p) > _ms(n) + time_bound_ms:
            fails.append(Failure("empty_cache_time", i, f"host_empty_cache() took {_ms(p):.1f}"
                                 f" ms, native {_ms(n):.1f} ms (bound +{time_bound_ms:g} ms; "
                                 f"wall {p['ms']:.1f} / {n['ms']:.1f} ms)"))
    if (
        len(p_steps) == len(n_steps)
        and plugin.get("settings_end") != native.get("settings_end")
        and not any(f.check == "settings" for f in fails)
    ):
        fails.append(Failure("settings", None, f"at the end: plugin "
                             f"{plugin.get('settings_end')!r}, native "
                             f"{native.get('settings_end')!r}"))
    return ("FAIL" if fails else "pass"), fails


def _numbered(copies: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Copies with a running number per (step, what): one step may make several alike."""
    seen: dict[tuple[int, str], int] = {}
    out = []
    for c in copies:
        key = (c["step"], c["what"])
        seen[key] = seen.get(key, 0) + 1
        out.append((seen[key], c))
    return out


def _ms(obs: dict[str, Any]) -> float:
    """A ``host_empty_cache()`` step's time: wall less run-queue wait (``empty_cache_time``),
    never below 0 (a schedstat read that lagged a preemption cannot make a run look faster)."""
    return max(0.0, obs["ms"] - obs.get("runq_ms", 0.0))


def first_check(failures: list[Failure]) -> str:
    """The check a shrinker keeps failing: the first in ``CHECKS`` order."""
    names = {f.check for f in failures}
    return next((c for c in CHECKS if c in names), "")
