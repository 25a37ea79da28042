"""P11: runtime pin operations (aclrtMallocHost* calls, counted by the simulator) per 1,000 eager
requests, per size band, for sizes in turn, and for sequences that grow or alternate inside one
power-of-two class. Each request pins `torch.empty(n, dtype=uint8, pin_memory=True)`, fills it,
copies it to the device (`non_blocking`), frees it and synchronizes the stream; each band starts
after `host_empty_cache()`. Native caches every size by its power-of-two class; the plugin may
pin once more per class in which two sizes of one band meet (csrc Note [Large blocks]: a block
pinned at its exact size, replaced once by the whole class), never more.
"""

from __future__ import annotations

from harness import simrt, stats

NAME = "P11"
TITLE = "eager pins per 1,000 requests, per size band and two sizes in turn"
TARGET = "plugin <= native (+1 per shared class) in every band"
VARIANTS = ("native", "plugin")
MiB = 1024 * 1024
BANDS = {
    "4 KiB": [4096],
    "1 MiB": [MiB],
    "17 MiB": [17 * MiB],
    "31 MiB": [31 * MiB],
    "32 MiB": [32 * MiB],
    "48 MiB": [48 * MiB],
    "130 MiB": [130 * MiB],
    "17 / 31 MiB in turn": [17 * MiB, 31 * MiB],
    "40 / 100 MiB in turn": [40 * MiB, 100 * MiB],
    "growing 33 .. 63 MiB": [(33 + i) * MiB for i in range(31)],
    "32 MiB - 1 / 32 MiB / + 1 / 33 MiB": [32 * MiB - 1, 32 * MiB, 32 * MiB + 1, 33 * MiB],
    "40 / 64 / 100 MiB in turn": [40 * MiB, 64 * MiB, 100 * MiB],
}
THRESHOLD = 32 * MiB  # TORCH_NPU_PINPOOL_LARGE_BLOCK_MB's default


def shared_classes(sizes: list[int]) -> int:
    """Power-of-two classes above the threshold in which two different sizes of the band meet:
    where the plugin may pin once more than native (Note [Large blocks])."""
    by_class: dict[int, set[int]] = {}
    for n in sizes:
        if n > THRESHOLD:
            by_class.setdefault((n - 1).bit_length(), set()).add(n)
    return sum(1 for ns in by_class.values() if len(ns) > 1)
SETTINGS = {"requests": 100, "reps": 1}
QUICK = {"requests": 20}


def band(torch, sim, sizes: list[int], requests: int, dev) -> float | None:
    stream = torch.npu.current_stream()
    simrt.host_empty_cache()
    before = sim.host_pins()
    for i in range(requests):
        n = sizes[i % len(sizes)]
        t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        t.fill_(i % 250 + 1)
        dev[:n].copy_(t, non_blocking=True)
        del t
        stream.synchronize()
    after = sim.host_pins()
    return None if before is None or after is None else (after - before) * 1000 / requests


def measure(ctx) -> dict:
    import torch

    dev = torch.empty(max(max(s) for s in BANDS.values()), dtype=torch.uint8, device="npu")
    values = {
        k: band(torch, ctx.sim, sizes, ctx.cfg["requests"], dev) for k, sizes in BANDS.items()
    }
    values["requests"] = ctx.cfg["requests"]
    return {"values": values}


def summarize(runs: stats.Runs) -> list[dict]:
    rows = []
    requests = runs.first("values", "requests", "plugin") or SETTINGS["requests"]
    for k, sizes in BANDS.items():
        slack = shared_classes(sizes)
        target = f"plugin <= native + {slack}" if slack else "plugin <= native"
        rows.append(stats.at_most_native_row(runs, k, f"{k}: pins per 1,000 requests", "pins",
                                             slack * 1000 / requests, target, readme=True))
    return rows


def plot(ax, rows: list[dict], runs: stats.Runs) -> None:
    labels = list(BANDS)
    for offset, (variant, color) in enumerate((("native", "tab:red"), ("plugin", "tab:blue"))):
        ys = []
        for k in labels:
            xs = [x for x in runs.values(k, variant) if x is not None]
            ys.append(max(xs) if xs else 0)
        ax.bar(
            [i + 0.4 * offset for i in range(len(labels))],
            ys,
            width=0.4,
            color=color,
            label=variant,
        )
    ax.set_xticks(
        [i + 0.2 for i in range(len(labels))], labels, rotation=45, ha="right", fontsize=6
    )
    ax.set_ylabel("pins per 1,000 requests (most of any trial)", fontsize=8)
    ax.legend(fontsize=7)
