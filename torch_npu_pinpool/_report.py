"""The audit report (``TORCH_NPU_PINPOOL_REPORT``): the JSON and the text, made from what the
extension recorded (``csrc/audit.h``), and what torch_npu's own allocator does in each case.

``NATIVE`` is the one table of native behaviour: one row per hazard kind and shape, each from a
measurement in docs/problem.md (or the test named there). A release measured later (2.14) is a
new row, or a wider range on an existing one; nothing else changes.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

ENV = "TORCH_NPU_PINPOOL_REPORT"
# Set by `python -m torch_npu_pinpool audit` for the processes it runs: where they note that
# the plugin could not be activated (see _audit_site.py).
AUDIT_DIR_ENV = "TORCH_NPU_PINPOOL_AUDIT_DIR"
KINDS = (
    "recycled_by_native",
    "leaked_by_native",
    "released_pool_recapture",
    "pageable_copy_in_capture",
    "written_while_queued",
)
EXIT_WAIT_S = 5.0  # at exit, how long queued checks may still complete
_quiet = False  # set in the `audit` command's own process


@dataclass(frozen=True)
class Native:
    """What torch_npu's own allocator does for one kind and shape, on which releases."""

    kind: str
    shape: str  # as csrc/audit.cpp names it
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
        "README, Copying pageable memory inside a capture (2.10, 2.13); docs/problem.md (2.14)",
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


def library_dirs() -> list[str]:
    """Frames in files under these are not the user's (csrc/audit_sites.cpp, Note [Sites])."""
    import torch
    import torch_npu

    dirs = []
    for module in (torch, torch_npu, sys.modules[__package__]):
        dirs.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    return dirs


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _release(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def affects(kind: str, shapes: dict[str, int], torch_npu_version: str) -> str:
    """What native torch_npu does for the shapes seen (every shape of the kind if none), and
    whether this process's release is one of those it does it on."""
    rows = [r for r in NATIVE if r.kind == kind and (not shapes or r.shape in shapes)]
    running = _version(torch_npu_version)
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
    """How much written_while_queued could compare (csrc/audit.cpp, Note [What
    written_while_queued sees])."""
    c = ext.report_checks()
    return (
        f"compared at completion: {c['copies']} H2D copies and {c['replays']} replays; not "
        f"checked: {c['unchecked']} reads, {c['pending']} still queued"
    )


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# What a kind's sites are, for the text report.
_SITES = {
    "recycled_by_native": "pinned at",
    "leaked_by_native": "pinned at",
    "released_pool_recapture": "captured at",
    "pageable_copy_in_capture": "copied at",
    "written_while_queued": "enqueued / allocated at",
}


def text(report: dict[str, Any], checks: str = "") -> str:
    """The short report printed to stderr; ``checks``: what :func:`checked` says."""
    found = [h for h in report["hazards"] if h["count"]]
    head = (
        f"torch_npu_pinpool report (pid {os.getpid()}, torch_npu {report['torch_npu']}, "
        f"torch_npu_pinpool {report['plugin']}): "
    )
    head += ", ".join(f"{h['kind']} x{h['count']}" for h in found) if found else "no hazard seen"
    lines = [head]
    wrap = textwrap.TextWrapper(width=100, initial_indent="    ", subsequent_indent="    ")
    for h in report["hazards"]:
        if not h["count"]:
            if h["kind"] == "written_while_queued" and checks:
                lines.append(f"  {h['kind']}: none ({checks})")
            continue
        lines.append(f"  {h['kind']}: {h['count']}, {_size(h['bytes'])}")
        if h["sites"]:
            lines.append(f"    {_SITES[h['kind']]} {', '.join(h['sites'])}")
        lines += wrap.wrap(h["affects"])
    return "\n".join(lines)


def json_path(setting: str) -> str:
    return setting.replace("{pid}", str(os.getpid()))


def write_json(report: dict[str, Any], path: str) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


def quiet_here() -> None:
    """No report from this process (the `audit` command itself, which runs the program)."""
    global _quiet
    _quiet = True


def at_exit(ext: Any, setting: str) -> None:
    """Print the report to stderr (and write the JSON) once the program is done."""
    if _quiet:
        return
    try:
        report = data(ext, wait_s=EXIT_WAIT_S)
        ext.report_close()  # the runtime goes down next: no check reads host memory after this
    except Exception as e:  # never turn a clean exit into a traceback
        print(f"torch_npu_pinpool: no report: {e}", file=sys.stderr)
        return
    print(text(report, checked(ext)), file=sys.stderr, flush=True)
    if setting:
        try:
            write_json(report, json_path(setting))
        except OSError as e:
            print(f"torch_npu_pinpool: could not write the report: {e}", file=sys.stderr)


def start(ext: Any, setting: str) -> None:
    """Called once at activation with the report on."""
    atexit.register(at_exit, ext, setting)
