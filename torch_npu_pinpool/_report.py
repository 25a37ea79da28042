"""The audit report (``TORCH_NPU_PINPOOL_REPORT``): the JSON and the text, made from what the
extension recorded (``csrc/audit/audit.h``), and what torch_npu's own allocator does in each case.

``NATIVE`` is the one table of native behaviour: one row per hazard kind and shape, each from a
measurement in docs/problem.md (or the test named there). A release measured later (2.14) is a
new row, or a wider range on an existing one; nothing else changes.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

from ._version import major_minor

ENV = "TORCH_NPU_PINPOOL_REPORT"
INTERVAL_ENV = "TORCH_NPU_PINPOOL_REPORT_INTERVAL_S"  # one JSON line per interval (_report_writer)
SAMPLE_ENV = "TORCH_NPU_PINPOOL_REPORT_SAMPLE"  # compare one copy / replay in N
# Set by `python -m torch_npu_pinpool audit` for the processes it runs: where they note that
# the plugin could not be activated (see _audit_site.py).
AUDIT_DIR_ENV = "TORCH_NPU_PINPOOL_AUDIT_DIR"
# written_while_queued learns each copy's direction from the copy_ kernel wrapper: torch >= 2.10.
COPY_DIRECTION_TORCH = (2, 10)
EXIT_WAIT_S = 5.0  # at exit, how long queued checks may still complete
_quiet = False  # set in the `audit` command's own process


@dataclass(frozen=True)
class Native:
    """What torch_npu's own allocator does for one kind and shape, on which releases."""

    kind: str
    shape: str  # as csrc/audit/audit.cpp names it
    first: tuple[int, int] | None  # releases affected, inclusive; None: every release
    last: tuple[int, int] | None
    measured: str  # where, on which releases
    what: str


NATIVE: tuple[Native, ...] = (
    Native(
        "recycled_by_native",
        "pinned inside the capture",
        (2, 8),
        (2, 10),
        "docs/problem.md, first reproducer (2.10); 2.13 keeps it",
        "the block goes back to the shared cache when its tensor dies: the next pin_memory() "
        "gets it and every replay reads that owner's bytes",
    ),
    Native(
        "recycled_by_native",
        "pinned before the capture, freed inside it",
        (2, 8),
        (2, 14),
        "docs/problem.md, defect 3 (2.10, 2.13, 2.14)",
        "the block goes back to the shared cache: the next pin_memory() gets it and every "
        "replay reads that owner's bytes",
    ),
    Native(
        "recycled_by_native",
        "pinned before the capture, freed after it",
        (2, 8),
        (2, 14),
        "docs/problem.md, a block freed after its capture (2.10, 2.13); 2.14: "
        "test_recycled_by_native_is_what_native_does",
        "the captured copy's event on the block was recorded into the capture, so the block "
        "counts as idle and goes back to the shared cache: the next pin_memory() gets it and "
        "every replay reads that owner's bytes",
    ),
    Native(
        "leaked_by_native",
        "a capture-time block a stream used",
        (2, 11),
        (2, 14),
        "docs/problem.md, defect 1 (2.13, 2.14: 20 captures of a 16 KiB input kept 320 KiB)",
        "the block is never given back, even once every graph of its pool is gone",
    ),
    Native(
        "leaked_by_native",
        "the pool of a capture whose capture_end failed",
        (2, 11),
        (2, 14),
        "docs/problem.md, A capture that fails (2.14: a failed capture's 4 + 8 KiB stayed held, "
        "and a later capture's 4 KiB into the same pool id too; 2.10 keeps nothing; 2.11-2.13 "
        "not measured)",
        "NPUGraph.reset gives a pool back only after a successful capture_end, so the pool id "
        "stays in use for good: every block in it stays pinned until the process exits",
    ),
    Native(
        "released_pool_recapture",
        "a pool id whose graphs were all released",
        (2, 11),
        (2, 14),
        "docs/problem.md, defect 2 (2.13, 2.14)",
        "the capture fails with INTERNAL ASSERT ... use_count > 0 (the released pool is still "
        "listed: it keeps the capture-time blocks a stream used)",
    ),
    Native(
        "pageable_copy_in_capture",
        "a pageable CPU tensor in a captured copy",
        (2, 8),
        (2, 14),
        "docs/usage.md, Copying pageable memory inside a capture (2.10, 2.13); "
        "docs/problem.md (2.14)",
        "the runtime rejects the copy (107000; blocking: 107030) and torch_npu's error names "
        "neither tensor nor fix; after a non_blocking one its task queue runs nothing more",
    ),
    Native(
        "written_while_queued",
        "an H2D copy",
        None,
        None,
        "",
        "the program's own race (plugin or not): the host changed the bytes of a pinned block "
        "after an H2D copy that reads them was enqueued and before it ran, so the device got "
        "the new bytes; wait for an event recorded after the copy before rewriting them",
    ),
    Native(
        "written_while_queued",
        "a replay",
        None,
        None,
        "",
        "the program's own race (plugin or not): the host changed a graph's pinned input after "
        "replay() and before that replay had read it; wait for an event recorded after the "
        "replay before rewriting it",
    ),
)


def requested() -> str | None:
    """``TORCH_NPU_PINPOOL_REPORT``: None when off (unset, empty, 0/false/off/no), "" for the
    stderr report only, else the JSON path (``{pid}`` in it becomes the process id)."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in ("", "0", "false", "off", "no"):
        return None
    return "" if value.lower() in ("1", "true", "on", "yes") else value


COMPILED_OUT = (
    "torch_npu_pinpool: TORCH_NPU_PINPOOL_REPORT is set, but this build of torch_npu_pinpool has "
    "the audit report compiled out (it was built with TORCH_NPU_PINPOOL_AUDIT=0): no report is "
    "made. To get one, reinstall without that variable: `pip install --force-reinstall "
    "--no-deps <torch_npu_pinpool source>`; or unset TORCH_NPU_PINPOOL_REPORT."
)


def warn_compiled_out() -> None:
    """The report was asked for in a build without it: say so, and run without it."""
    import warnings

    warnings.warn(COMPILED_OUT, RuntimeWarning, stacklevel=3)


def library_dirs() -> list[str]:
    """Frames in files under these are not the user's (csrc/audit/audit_sites.cpp, Note [Sites])."""
    import torch
    import torch_npu

    dirs = []
    for module in (torch, torch_npu, sys.modules[__package__]):
        dirs.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    return dirs


def _release(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def affects(kind: str, shapes: dict[str, int], torch_npu_version: str) -> str:
    """What native torch_npu does for the shapes seen (every shape of the kind if none), and
    whether this process's release is one of those it does it on."""
    rows = [r for r in NATIVE if r.kind == kind and (not shapes or r.shape in shapes)]
    running = major_minor(torch_npu_version)
    parts = []
    for row in rows:
        if row.first is None or row.last is None:
            parts.append(f"{row.shape}: {row.what}")
            continue
        span = _release(row.first)
        if row.last != row.first:
            span += f"-{_release(row.last)}"
        hit = (
            "this process's release included"
            if row.first <= running <= row.last
            else (f"not {_release(running)}, this process's release")
        )
        parts.append(
            f"{row.shape}: torch_npu {span} without the plugin ({hit}): {row.what} "
            f"[measured: {row.measured}]"
        )
    return "; ".join(parts)


def data(ext: Any, wait_s: float = 0.0) -> dict[str, Any]:
    """The report as JSON-ready data: ``{"torch_npu", "plugin", "hazards": [...]}``."""
    import torch_npu

    from ._version import __version__

    hazards = []
    for raw in ext.report_data(wait_s):
        text = affects(raw["kind"], raw["shapes"], torch_npu.__version__)
        if raw["kind"] == "written_while_queued":
            text += f" ({checked(ext)})"
        hazards.append(
            {
                "kind": raw["kind"],
                "count": int(raw["count"]),
                "bytes": int(raw["bytes"]),
                "affects": text,
                "sites": list(raw["sites"]),
            }
        )
    return {"torch_npu": torch_npu.__version__, "plugin": __version__, "hazards": hazards}


def checked(ext: Any) -> str:
    """How much written_while_queued could compare (csrc/audit/audit.cpp, Note [What
    written_while_queued sees]); on torch < 2.10 nothing can be (Note [Copy direction])."""
    import torch

    if major_minor(torch.__version__) < COPY_DIRECTION_TORCH:
        return (
            f"not checked on this torch ({torch.__version__}): the check needs torch >= "
            f"{_release(COPY_DIRECTION_TORCH)}"
        )
    c = ext.report_checks()
    out = (
        f"compared at completion: {c['copies']} H2D copies and {c['replays']} replays; not "
        f"checked: {c['unchecked']} reads, {c['pending']} still queued"
    )
    if c.get("skipped"):
        out += f", {c['skipped']} left out by sampling ({SAMPLE_ENV})"
    return out


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


@dataclass(frozen=True)
class Kind:
    """How the text report explains one kind: what its count counts, what happened (and what
    the plugin did about it), and what to change so the program does not need the plugin."""

    unit: str  # singular; the count's label
    units: str  # plural
    sites: str  # what its sites are
    happened: str
    change: str


# Keyed by the extension's kinds, in its order (``_C.hazard_kinds``; checked by start()).
KIND_TEXT: dict[str, Kind] = {
    "recycled_by_native": Kind(
        "pinned block",
        "pinned blocks",
        "pinned at",
        "a pinned tensor that a captured copy uses was freed while its graph could still "
        "replay; the plugin kept the block for the graph",
        "keep a reference to every pinned tensor a captured copy uses for as long as the "
        "graph lives (e.g. a persistent pinned input you refill before each replay)",
    ),
    "leaked_by_native": Kind(
        "pinned block",
        "pinned blocks",
        "pinned at",
        "a block pinned during a capture (used by a stream, or held by the pool of a capture "
        "whose capture_end failed) outlived its graphs; the plugin gave it back",
        "pin the buffers a capture needs before the capture and reuse them across captures, "
        "instead of pinning inside the capture; and fix what makes a capture_end fail (e.g. "
        "join every side stream back before the capture ends)",
    ),
    "released_pool_recapture": Kind(
        "capture",
        "captures",
        "captured at",
        "a capture went into a pool id whose graphs were all released while the pool still "
        "held a capture-time block; the plugin let it capture",
        "capture into a fresh pool (torch.npu.graph_pool_handle()) once the old pool's graphs "
        "are all reset, and do not pin memory inside captures",
    ),
    "pageable_copy_in_capture": Kind(
        "copy",
        "copies",
        "copied at",
        "a captured copy used a pageable (not pinned) CPU tensor; the plugin refused it with "
        "an error naming the tensor's side and the fix",
        "pin the tensor before the capture (t = t.pin_memory()) or allocate it with "
        "pin_memory=True",
    ),
    "written_while_queued": Kind(
        "rewrite",
        "rewrites",
        "enqueued / allocated at",
        "the host changed a pinned buffer while an H2D copy or a graph replay that reads it "
        "was still queued, so the device got the new bytes (a race in the program: no "
        "allocator prevents it)",
        "record an event after the copy or replay and wait for it before rewriting the buffer "
        "(or double-buffer it)",
    ),
}


def _count(kind: str, count: int, size: int) -> str:
    """``3 pinned blocks, 12.0 KiB``: the count with its unit, and the bytes when there are any."""
    k = KIND_TEXT[kind]
    label = f"{count} {k.unit if count == 1 else k.units}"
    return f"{label}, {_size(size)}" if size else label


_WRAP = textwrap.TextWrapper(width=100, initial_indent="    ", subsequent_indent="      ")


def _entry(h: dict[str, Any], checks: str) -> list[str]:
    """The lines of one kind that was seen: count, sites, what happened, what native does and
    what to change (for the program's own race: what happened and how much was checked)."""
    k = KIND_TEXT[h["kind"]]
    lines = [f"  {h['kind']}: {_count(h['kind'], h['count'], h['bytes'])}"]
    if h["sites"]:
        lines.append(f"    {k.sites} {', '.join(h['sites'])}")
    if h["kind"] == "written_while_queued":  # `affects` already says what to change
        lines += _WRAP.wrap(f"what happened: {h['affects'].split(' (compared at')[0]}")
        return lines + (_WRAP.wrap(f"checks: {checks}") if checks else [])
    lines += _WRAP.wrap(f"what happened: {k.happened}")
    lines += _WRAP.wrap(f"native torch_npu: {h['affects']}")
    return lines + _WRAP.wrap(f"to stop depending on the plugin: {k.change}")


def text(report: dict[str, Any], checks: str = "") -> str:
    """The short report printed to stderr; ``checks``: what :func:`checked` says."""
    found = [h for h in report["hazards"] if h["count"]]
    head = (
        f"torch_npu_pinpool report (pid {os.getpid()}, torch_npu {report['torch_npu']}, "
        f"torch_npu_pinpool {report['plugin']}): "
    )
    head += ", ".join(f"{h['kind']} x{h['count']}" for h in found) if found else "no hazard seen"
    lines = [head]
    for h in report["hazards"]:
        if h["count"]:
            lines += _entry(h, checks)
        elif h["kind"] == "written_while_queued" and checks:
            # Never a bare "none": either how much was compared, or that nothing could be.
            seen = f"none seen ({checks})" if checks.startswith("compared") else checks
            lines += textwrap.wrap(f"  {h['kind']}: {seen}", width=100, subsequent_indent="    ")
    return "\n".join(lines)


def json_path(setting: str) -> str:
    return setting.replace("{pid}", str(os.getpid()))


def write_json(report: dict[str, Any], path: str) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


def _positive(name: str, value: str, kind: type) -> Any:
    """``value`` of variable ``name`` as a positive ``kind``; a ValueError naming the fix."""
    try:
        number = kind(value)
    except ValueError:
        number = 0
    if not number > 0 or number != number or number == float("inf"):
        raise ValueError(
            f"torch_npu_pinpool: {name}={value!r} is not a positive "
            f"{'number of seconds' if kind is float else 'whole number'}; set it to e.g. "
            f"{'10' if kind is float else '16'}, or unset it."
        )
    return number


def interval() -> float | None:
    """``TORCH_NPU_PINPOOL_REPORT_INTERVAL_S``: seconds between a process's report lines, or
    None (unset or empty: the report is written at exit only)."""
    value = os.environ.get(INTERVAL_ENV, "").strip()
    return _positive(INTERVAL_ENV, value, float) if value else None


def sample() -> int:
    """``TORCH_NPU_PINPOOL_REPORT_SAMPLE``: compare one H2D copy / replay in N
    (csrc/audit/audit.cpp, Note [Sampled checks]); 1 (every one) when unset."""
    value = os.environ.get(SAMPLE_ENV, "").strip()
    return _positive(SAMPLE_ENV, value, int) if value else 1


def quiet_here() -> None:
    """No report from this process (the `audit` command itself, which runs the program)."""
    global _quiet
    _quiet = True


def is_quiet() -> bool:
    return _quiet


def start(ext: Any, setting: str) -> None:
    """Called once at activation with the report on."""
    kinds = tuple(ext.hazard_kinds)
    if tuple(KIND_TEXT) != kinds or any(row.kind not in kinds for row in NATIVE):
        raise RuntimeError(f"torch_npu_pinpool: _report.py's kinds are not the extension's {kinds}")
    from . import _report_writer

    _report_writer.start(ext, setting, interval())
