"""Fuzz programs: what a program is, and ``generate(seed, budget)``, which draws one from a seed.

A program is a JSON-serialisable dict::

    {"seed": 7, "theme": "sizes", "activation": "import" | "late", "alloc_conf": str | None,
     "delay_us": int, "steps": [step, ...]}

A hand-written program (regressions/*.json) may add ``doc`` and ``checks`` (the checks it is
about). ``activation: "late"`` runs the steps before the ``activate`` step with torch_npu's own
allocator and imports the plugin there; ``alloc_conf`` is PYTORCH_NPU_ALLOC_CONF for the whole
process (such programs run alone in their process). ``delay_us`` is the simulator's task delay
(copies stay queued while the host runs on, so fences matter).

Steps (``op`` and its fields; ``id`` names a pinned tensor, ``gid`` a graph; values are bytes
0..255 written into every byte of a tensor; ``runner.py`` says what each does exactly):

    pin(id, nbytes, value)        torch.empty(nbytes, uint8, pin_memory=True).fill_(value)
    fill(id, value)               refill (never while a copy of it may be queued)
    h2d(id)                       non_blocking copy into a device buffer
    alias(id, how, k)             a non_blocking H2D from an alias of the tensor (how: numpy,
                                  dlpack, frombuffer, offset = t[k:]), the alias dropped at once
    d2h(nbytes, value)            non_blocking D2H into a fresh pinned tensor, freed at once
    free(id)                      drop the tensor
    sync                          torch.npu.synchronize(); the copies made since are read back
    empty_cache                   host_empty_cache(), timed
    capture(gid, pool, hooks, nbytes, value, src)
                                  capture a non_blocking H2D of a pinned tensor into a static
                                  device tensor: src "inside" pins it inside the capture and
                                  drops it there, else src is the id of a live eager tensor;
                                  pool "shared" (one graph_pool_handle per program) or
                                  "private"; view "strided" copies src[::2] (a staged copy
                                  of a non-contiguous view); hooks False captures through
                                  torch_npu._C._NPUGraph directly (torch_npu >= 2.11;
                                  skipped on older builds)
    replay(gid), reset(gid)
    thread(count, nbytes, value)  a threading.Thread pins, fills, copies and frees count tensors
    dataloader(batches, nbytes, value)   DataLoader(pin_memory=True) batches copied non_blocking
    fork(busy, nbytes)            os.fork() once queued copies ran; the child pins nbytes,
                                  reads the stats, empties the cache and frees what it
                                  inherited; busy: meanwhile another
                                  thread keeps pinning and emptying the cache (issue 47: a
                                  child forked while a thread is inside an allocator hangs)
    dev_alloc(nbytes)             a device allocation (the device allocator's behaviour: oversize)
    activate                      import torch_npu_pinpool (late activation only)

The generator never writes a tensor while a copy of it may be queued and never replays a reset
graph: what a copy should deliver (the bytes last written before it) is then defined, and a
difference is the allocator's, not the program's.
"""

from __future__ import annotations

import json
import random
from typing import Any

KiB = 1 << 10
MiB = 1 << 20
THRESHOLD = 32 * MiB  # where the plugin's and native's large-block policies start
MAX_BYTES = 256 * MiB
THEMES = ("sizes", "aliases", "graphs", "mixed", "threads", "late")
SHAPES = ("random", "growing", "shrinking", "near_threshold", "three_large", "small_bucket")
GRAPH_SIZES = (4 * KiB, 64 * KiB, 1 * MiB, 3 * MiB)

Program = dict[str, Any]
Step = dict[str, Any]


def size_classes(program: Program, upto: int | None = None) -> int:
    """Distinct power-of-two size classes >= 32 MiB the program's requests used in steps
    ``0..upto`` (all steps when None): the pins the plugin may spend beyond native's (the
    price of first sizing a block exactly, issue 47)."""
    classes = set()
    steps = program["steps"] if upto is None else program["steps"][: upto + 1]
    for step in steps:
        n = step.get("nbytes")
        if n is not None and n >= THRESHOLD:
            classes.add(1 << (n - 1).bit_length())
    return len(classes)


def uses_graphs(program: Program) -> bool:
    return any(s["op"] == "capture" for s in program["steps"])


def needs_own_process(program: Program) -> bool:
    """Late activation and PYTORCH_NPU_ALLOC_CONF are per process."""
    return program.get("activation", "import") != "import" or bool(program.get("alloc_conf"))


def dumps(program: Program) -> str:
    return json.dumps(program, indent=1)


def random_size(rng: random.Random, large: float = 0.2) -> int:
    """4 KiB - 256 MiB, log-uniform; ``large`` of the draws are >= 32 MiB."""
    if rng.random() < large:
        lo, hi = THRESHOLD, MAX_BYTES
    else:
        lo, hi = 4 * KiB, THRESHOLD
    n = int(2 ** rng.uniform(lo.bit_length() - 1, (hi.bit_length() - 1)))
    if rng.random() < 0.5:
        n = (n + 4095) // 4096 * 4096  # page multiples are common
    return max(4 * KiB, min(MAX_BYTES, n))


def size_sequence(rng: random.Random, shape: str, count: int) -> list[int]:
    """``count`` request sizes of one shape (see the module docstring of issue 47's cases)."""
    if shape == "random":
        return [random_size(rng) for _ in range(count)]
    if shape in ("growing", "shrinking"):
        # inside one power-of-two bucket: (2^k, 2^(k+1)], e.g. 33, 34, ..., 63 MiB
        top = rng.choice((64 * MiB, 64 * MiB, 128 * MiB, 256 * MiB))
        lo, hi = top // 2 + MiB, top - MiB
        step = max(MiB, (hi - lo) // max(1, count - 1) // MiB * MiB)
        sizes = list(range(lo, hi + 1, step))[:count]
        return sizes if shape == "growing" else sizes[::-1]
    if shape == "near_threshold":
        base = [THRESHOLD - 1, THRESHOLD, THRESHOLD + 1, THRESHOLD + MiB]
        if rng.random() < 0.3:
            rng.shuffle(base)
        return [base[i % 4] for i in range(count)]
    if shape == "three_large":
        base = [40 * MiB, 64 * MiB, 100 * MiB]
        return [base[i % 3] for i in range(count)]
    if shape == "small_bucket":
        top = rng.choice((64 * KiB, 1 * MiB, 16 * MiB))
        sizes = [top // 2 + (i + 1) * (top // 2) // (count + 1) for i in range(count)]
        return sizes if rng.random() < 0.5 else sizes[::-1]
    raise ValueError(f"unknown shape {shape!r}")


class _Gen:
    """Tracks the program's state so every step it adds is valid (see the module docstring)."""

    def __init__(self, rng: random.Random, budget: int) -> None:
        self.rng = rng
        self.budget = budget
        self.steps: list[Step] = []
        self.live: dict[str, int] = {}  # id -> nbytes
        self.queued: set[str] = set()  # ids with a copy possibly queued (since the last sync)
        self.graphs: dict[str, bool] = {}  # gid -> alive
        self.eager_in_graph: set[str] = set()  # ids a live graph reads (never refilled)
        self.next_id = 0
        self.next_gid = 0
        self.value = 0

    def full(self) -> bool:
        return len(self.steps) >= self.budget

    def add(self, step: Step) -> None:
        if not self.full():
            self.steps.append(step)

    def new_value(self) -> int:
        self.value = self.value % 250 + 1
        return self.value

    def pin(self, nbytes: int) -> str:
        tid = f"t{self.next_id}"
        if self.full():
            return tid
        self.next_id += 1
        self.add({"op": "pin", "id": tid, "nbytes": nbytes, "value": self.new_value()})
        self.live[tid] = nbytes
        return tid

    def fill(self, tid: str) -> None:
        if tid in self.queued or tid in self.eager_in_graph:
            self.sync()
        if tid in self.eager_in_graph:
            return  # a live graph reads it: its bytes are the graph's input
        self.add({"op": "fill", "id": tid, "value": self.new_value()})

    def h2d(self, tid: str) -> None:
        if self.full() or tid not in self.live:
            return
        self.add({"op": "h2d", "id": tid})
        self.queued.add(tid)

    def alias(self, tid: str) -> None:
        if self.full() or tid not in self.live:
            return
        how = self.rng.choice(("numpy", "dlpack", "frombuffer", "offset"))
        k = self.rng.choice((1, 4096, self.live[tid] // 2)) if how == "offset" else 0
        k = min(k, self.live[tid] - 1)
        self.add({"op": "alias", "id": tid, "how": how, "k": k})
        self.queued.add(tid)

    def free(self, tid: str) -> None:
        if self.full():
            return
        self.add({"op": "free", "id": tid})
        self.live.pop(tid, None)
        self.queued.discard(tid)

    def sync(self) -> None:
        if self.full():
            return
        self.add({"op": "sync"})
        self.queued.clear()

    def empty_cache(self) -> None:
        self.add({"op": "empty_cache"})

    def d2h(self, nbytes: int | None = None) -> None:
        n = nbytes or min(random_size(self.rng, large=0.05), 8 * MiB)
        self.add({"op": "d2h", "nbytes": n, "value": self.new_value()})

    def request(self, nbytes: int, sync_p: float = 0.3) -> None:
        """One eager request: pin, copy non_blocking, free (P11's loop)."""
        tid = self.pin(nbytes)
        self.h2d(tid)
        self.free(tid)
        if self.rng.random() < sync_p:
            self.sync()

    def capture(self, pool: str | None = None, hooks: bool | None = None) -> str:
        gid = f"g{self.next_gid}"
        self.next_gid += 1
        if self.full():
            return gid
        src = "inside"
        eager = [t for t in self.live if self.live[t] <= 4 * MiB]
        if eager and self.rng.random() < 0.25:
            src = self.rng.choice(eager)
        nbytes = self.live[src] if src != "inside" else self.rng.choice(GRAPH_SIZES)
        view = "strided" if src != "inside" and self.rng.random() < 0.3 else "whole"
        self.add(
            {
                "view": view,
                "op": "capture",
                "gid": gid,
                "pool": pool or self.rng.choice(("shared", "shared", "private")),
                "hooks": hooks if hooks is not None else self.rng.random() < 0.6,
                "nbytes": nbytes,
                "value": self.new_value(),
                "src": src,
            }
        )
        self.graphs[gid] = True
        if src != "inside":
            self.eager_in_graph.add(src)
        return gid

    def alive_graphs(self) -> list[str]:
        return [g for g, alive in self.graphs.items() if alive]

    def reset(self, gid: str) -> None:
        if self.full():
            return
        self.add({"op": "reset", "gid": gid})
        self.graphs[gid] = False
        if not self.alive_graphs():
            self.eager_in_graph.clear()

    def replay(self, gid: str) -> None:
        self.add({"op": "replay", "gid": gid})

    def random_step(self) -> None:
        """Any valid step, weighted towards pins and copies."""
        rng = self.rng
        r = rng.random()
        ids = list(self.live)
        if r < 0.25 or not ids:
            if len(self.live) > 6:
                self.free(rng.choice(ids))
            else:
                tid = self.pin(random_size(rng, large=0.15))
                if rng.random() < 0.7:
                    self.h2d(tid)
        elif r < 0.38:
            self.h2d(rng.choice(ids))
        elif r < 0.48:
            self.free(rng.choice(ids))
        elif r < 0.55:
            self.fill(rng.choice(ids))
        elif r < 0.62:
            self.alias(rng.choice(ids))
        elif r < 0.68:
            self.d2h()
        elif r < 0.76:
            self.sync()
        elif r < 0.82:
            self.empty_cache()
        elif r < 0.88:
            self.request(random_size(rng, large=0.3))
        elif r < 0.92:
            self.thread()
        else:
            self.graph_step()

    def graph_step(self) -> None:
        rng = self.rng
        alive = self.alive_graphs()
        r = rng.random()
        if not alive or (r < 0.3 and len(alive) < 4):
            self.capture()
        elif r < 0.7:
            self.replay(rng.choice(alive))
        else:
            self.reset(rng.choice(alive))

    def thread(self) -> None:
        self.add(
            {
                "op": "thread",
                "count": self.rng.randint(1, 4),
                "nbytes": random_size(self.rng, large=0.1),
                "value": self.new_value(),
            }
        )

    def fork(self) -> None:
        busy = self.rng.random() < 0.7
        self.add({"op": "fork", "busy": busy, "nbytes": random_size(self.rng, large=0.05)})

    def finish(self) -> list[Step]:
        """Free what is live, reset what lives, sync: the program ends clean."""
        steps = self.steps
        for tid in list(self.live):
            steps.append({"op": "free", "id": tid})
        for gid in self.alive_graphs():
            steps.append({"op": "reset", "gid": gid})
        steps.append({"op": "sync"})
        steps.append({"op": "empty_cache"})
        return steps


def _theme_sizes(g: _Gen) -> None:
    shape = g.rng.choice(SHAPES)
    per = g.rng.choice((3, 3, 4))  # steps per request (pin, h2d, free) + maybe a sync
    sizes = size_sequence(g.rng, shape, max(2, g.budget // per))
    d2h_p = g.rng.choice((0.0, 0.0, 0.15))
    ec_p = g.rng.choice((0.0, 0.05, 0.15))
    for n in sizes:
        if g.full():
            break
        g.request(n, sync_p=g.rng.choice((0.0, 0.3, 1.0)) if per == 4 else 0.0)
        if g.rng.random() < d2h_p:
            g.d2h(n if n <= 8 * MiB else None)
        if g.rng.random() < ec_p:
            g.empty_cache()


def _theme_aliases(g: _Gen) -> None:
    while not g.full():
        n = random_size(g.rng, large=0.15)
        tid = g.pin(n)
        for _ in range(g.rng.randint(1, 2)):
            g.alias(tid)
        if g.rng.random() < 0.5:
            g.h2d(tid)
        g.free(tid)
        r = g.rng.random()
        if r < 0.3:
            g.empty_cache()
        if r < 0.6:
            g.request(n, sync_p=0.0)  # a new owner of the same size, written at once
        if g.rng.random() < 0.4:
            g.sync()


def _theme_graphs(g: _Gen) -> None:
    rng = g.rng
    # issue 47's shape first, sometimes: a hookless and a hooked graph sharing a pool
    if rng.random() < 0.4:
        a = g.capture(pool="shared", hooks=False)
        b = g.capture(pool="shared", hooks=True)
        if rng.random() < 0.5:
            a, b = b, a
        g.reset(b)
        if rng.random() < 0.5:
            g.empty_cache()
        if rng.random() < 0.7:
            # the survivor's block, if given back, goes to the next pin of its size
            survivor = next(s for s in g.steps if s.get("gid") == a and s["op"] == "capture")
            for _ in range(rng.randint(1, 3)):
                g.pin(survivor["nbytes"])
            g.replay(a)
            g.sync()
    while not g.full():
        r = rng.random()
        if r < 0.45:
            g.graph_step()
        elif r < 0.75:
            # eager pins of a graph's size: what a block given back too early goes to
            tid = g.pin(rng.choice(GRAPH_SIZES))
            if rng.random() < 0.5:
                g.h2d(tid)
            if rng.random() < 0.5:
                g.free(tid)
        elif r < 0.85:
            g.sync()
        elif r < 0.92:
            g.empty_cache()
        else:
            g.random_step()


def _theme_threads(g: _Gen) -> None:
    while not g.full():
        r = g.rng.random()
        if r < 0.35:
            g.thread()
        elif r < 0.55:
            g.add(
                {
                    "op": "dataloader",
                    "batches": g.rng.randint(1, 4),
                    "nbytes": random_size(g.rng, large=0.05),
                    "value": g.new_value(),
                }
            )
        elif r < 0.65:
            g.fork()
        else:
            g.random_step()


def _theme_mixed(g: _Gen) -> None:
    while not g.full():
        g.random_step()


def _theme_late(g: _Gen, program: Program) -> None:
    program["activation"] = "late"
    if g.rng.random() < 0.8:
        program["alloc_conf"] = g.rng.choice(
            (
                "max_split_size_mb:64,garbage_collection_threshold:0.6",
                "max_split_size_mb:128",
                "expandable_segments:False,garbage_collection_threshold:0.8",
            )
        )
    g.add({"op": "dev_alloc", "nbytes": g.rng.choice((MiB, 16 * MiB))})
    if g.rng.random() < 0.5:
        g.request(g.rng.choice((4 * KiB, MiB)), sync_p=0.0)
    g.add({"op": "activate"})
    g.add({"op": "dev_alloc", "nbytes": 256 * MiB})
    while not g.full():
        g.random_step()
    g.add({"op": "dev_alloc", "nbytes": 256 * MiB})


def generate(seed: int, budget: int = 24) -> Program:
    """The program of ``seed``: at most ``budget`` steps plus the clean-up steps at its end."""
    rng = random.Random(seed)
    theme = THEMES[seed % len(THEMES)] if rng.random() < 0.85 else rng.choice(THEMES)
    program: Program = {
        "seed": seed,
        "theme": theme,
        "activation": "import",
        "alloc_conf": None,
        "delay_us": rng.choice((0, 0, 50, 500)),
        "steps": [],
    }
    g = _Gen(rng, budget)
    if theme == "late":
        _theme_late(g, program)
    else:
        {
            "sizes": _theme_sizes,
            "aliases": _theme_aliases,
            "graphs": _theme_graphs,
            "mixed": _theme_mixed,
            "threads": _theme_threads,
        }[theme](g)
    program["steps"] = g.finish()
    return program


def validate(program: Program) -> bool:
    """Whether every step refers only to live tensors / graphs and no tensor is refilled while
    a copy of it may be queued (the shrinker keeps only valid candidates)."""
    live: set[str] = set()
    queued: set[str] = set()
    graphs: dict[str, bool] = {}
    graph_inputs: set[str] = set()
    activated = program.get("activation", "import") == "import"
    for step in program["steps"]:
        op = step["op"]
        if op == "pin":
            if step["id"] in live:
                return False
            live.add(step["id"])
        elif op in ("fill", "h2d", "alias", "free"):
            if step["id"] not in live:
                return False
            if op == "fill" and (step["id"] in queued or step["id"] in graph_inputs):
                return False
            if op in ("h2d", "alias"):
                queued.add(step["id"])
            if op == "free":
                live.discard(step["id"])
                queued.discard(step["id"])
        elif op == "sync":
            queued.clear()
        elif op == "capture":
            if step["gid"] in graphs or (step["src"] != "inside" and step["src"] not in live):
                return False
            graphs[step["gid"]] = True
            if step["src"] != "inside":
                graph_inputs.add(step["src"])
        elif op in ("replay", "reset"):
            if not graphs.get(step["gid"]):
                return False
            if op == "reset":
                graphs[step["gid"]] = False
                if not any(graphs.values()):
                    graph_inputs.clear()
        elif op == "activate":
            if activated:
                return False
            activated = True
    return activated


def _size(n: int) -> str:
    if n % MiB == 0:
        return f"{n // MiB} MiB"
    if n % KiB == 0:
        return f"{n // KiB} KiB"
    return f"{n} B"


def describe(step: Step) -> str:
    """One readable line for a step (``--show``, reproducers)."""
    op = step["op"]
    if op == "pin":
        return f"{step['id']} = pin({_size(step['nbytes'])}, value={step['value']})"
    if op == "capture":
        src = "a tensor pinned inside" if step["src"] == "inside" else step["src"]
        if step.get("view") == "strided":
            src += "[::2] (a staged view copy)"
        return (
            f"{step['gid']} = capture(H2D of {_size(step['nbytes'])} from {src}, value="
            f"{step['value']}, pool={step['pool']}, hooks={'yes' if step['hooks'] else 'no'})"
        )
    args = []
    for key, value in step.items():
        if key == "op":
            continue
        args.append(_size(value) if key == "nbytes" else f"{key}={value}" if key != "id" and
                    key != "gid" else str(value))
    return f"{op}({', '.join(args)})"


def show(program: Program) -> str:
    """The program as numbered lines, with its header."""
    head = {k: v for k, v in program.items() if k != "steps"}
    lines = [json.dumps(head)]
    lines += [f"{i:3d}  {describe(s)}" for i, s in enumerate(program["steps"])]
    return "\n".join(lines)
