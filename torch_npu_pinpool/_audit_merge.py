"""The ``audit`` command's summary: each process's report read back from the files the processes
wrote (a JSON document at exit, or the JSON Lines of ``--interval``: _report_writer.py, Note
[Report lines]), merged into one summary per kind, per site and per process, and the ``--json``
file(s) made from them. Standard library only: the command's own process never imports torch.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any

_PID = re.compile(r"report-(\d+)\.json$")


@dataclass
class Process:
    """What one process left: its last report (totals per kind) and how it ended."""

    pid: int
    argv: str
    hazards: list[dict[str, Any]]
    ended: str  # "exit", "signal SIGTERM", ... or "" (no final report: its last periodic line)
    lines: int = 0  # JSON lines it wrote (0: a JSON document)
    torch_npu: str = ""
    plugin: str = ""
    problems: list[str] = field(default_factory=list)


def _note(workdir: str, what: str, pid: int, default: str) -> str:
    """What a process noted in the command's directory (_audit_site.py, _report_writer.py)."""
    try:
        with open(os.path.join(workdir, f"{what}-{pid}.txt")) as f:
            return f.read().strip()
    except OSError:
        return default


def read(path: str, workdir: str) -> Process:
    """One process's report file: a JSON document, or JSON Lines (the last line counts)."""
    match = _PID.search(path)
    pid = int(match.group(1)) if match else 0
    with open(path) as f:
        content = f.read()
    try:
        doc = json.loads(content)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "seq" not in doc:  # a report written at exit
        return Process(
            pid,
            _note(workdir, "proc", pid, "?"),
            doc["hazards"],
            _note(workdir, "ended", pid, "exit"),
            0,
            doc["torch_npu"],
            doc["plugin"],
        )
    lines, problems = [], []
    for number, text in enumerate(content.splitlines(), start=1):
        try:
            lines.append(json.loads(text))
        except ValueError:  # a line cut short (the process was killed while writing it)
            problems.append(f"line {number} of {path} is not JSON (cut short?)")
    if not lines:
        raise ValueError(f"no report line in {path}")
    last = lines[-1]
    ended = last["reason"] if last.get("final") else ""
    return Process(
        pid,
        " ".join(last.get("argv", [])) or _note(workdir, "proc", pid, "?"),
        last["hazards"],
        ended,
        len(lines),
        last["torch_npu"],
        last["plugin"],
        problems,
    )


def merged(processes: list[Process]) -> list[dict[str, Any]]:
    """Per kind, in the report's order: counts and bytes summed, sites in order of first
    appearance, ``affects`` from a final report, and ``processes``: pid -> count."""
    out: dict[str, dict[str, Any]] = {}
    for p in processes:
        for h in p.hazards:
            m = out.setdefault(
                h["kind"],
                {
                    "kind": h["kind"],
                    "count": 0,
                    "bytes": 0,
                    "affects": "",
                    "sites": [],
                    "processes": {},
                },
            )
            m["count"] += h["count"]
            m["bytes"] += h["bytes"]
            m["affects"] = m["affects"] or h.get("affects", "")
            m["sites"] += [s for s in h["sites"] if s not in m["sites"]]
            if h["count"]:
                m["processes"][str(p.pid)] = h["count"]
    return list(out.values())


def _how(p: Process) -> str:
    if p.ended == "exit":
        return "exited"
    if p.ended:
        return f"ended by {p.ended.split()[-1]}" if p.ended.startswith("signal") else p.ended
    return f"no final report (killed?): its last of {p.lines} periodic line(s)"


def summary(processes: list[Process]) -> list[str]:
    """The lines the command prints: the total, then each kind seen (count, processes, sites),
    then each process (how it ended, what it saw)."""
    kinds = merged(processes)
    seen = ", ".join(f"{k['kind']} x{k['count']}" for k in kinds if k["count"]) or "no hazard"
    lines = [f"{len(processes)} process report(s) above: {seen}"]
    for k in kinds:
        if k["count"]:
            lines.append(
                f"  {k['kind']} x{k['count']} in {len(k['processes'])} process(es), at "
                f"{', '.join(k['sites']) or '(no site)'}"
            )
    for p in processes:
        found = ", ".join(
            f"{h['kind']} x{h['count']} at {', '.join(h['sites']) or '(no site)'}"
            for h in p.hazards
            if h["count"]
        )
        lines.append(f"  process {p.pid} ({p.argv}), {_how(p)}: {found or 'no hazard'}")
        lines += [f"  {problem}" for problem in p.problems]
    return lines


def collect(workdir: str) -> tuple[list[Process], list[str]]:
    """Every process's report in ``workdir`` (``report-PID.json``), and the files unreadable."""
    processes, problems = [], []
    for path in sorted(glob.glob(os.path.join(workdir, "report-*.json"))):
        try:
            processes.append(read(path, workdir))
        except (OSError, ValueError, KeyError, TypeError) as e:
            problems.append(f"unreadable report {path}: {e}")
    return processes, problems


def export(processes: list[Process], workdir: str, target: str) -> None:
    """``--json TARGET``: with ``{pid}``, each process's file as it wrote it; else one merged
    document: ``torch_npu``, ``plugin``, ``hazards`` (merged) and ``processes``."""
    if "{pid}" in target:
        for p in processes:
            source = os.path.join(workdir, f"report-{p.pid}.json")
            shutil.copyfile(source, target.replace("{pid}", str(p.pid)))
        return
    first = processes[0] if processes else Process(0, "", [], "")
    document = {
        "torch_npu": first.torch_npu,
        "plugin": first.plugin,
        "hazards": [{k: v for k, v in h.items() if k != "processes"} for h in merged(processes)],
        "processes": [
            {"pid": p.pid, "argv": p.argv, "ended": p.ended, "hazards": p.hazards}
            for p in processes
        ],
    }
    with open(target, "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
