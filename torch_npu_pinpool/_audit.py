"""``python -m torch_npu_pinpool audit [--json PATH] -- PROGRAM [ARGS...]``.

Runs PROGRAM with the audit report on (``TORCH_NPU_PINPOOL_REPORT``) and the plugin activated
in every Python process of it that imports torch_npu (``_audit_site.py``, installed as their
``sitecustomize``). Each such process prints its report to stderr when it exits; the command
then says how many reported and which could not be audited, and exits with PROGRAM's status
(128 + N if a signal N ended it).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import _report
from ._report import AUDIT_DIR_ENV, ENV

# The programs' sitecustomize (never imported here: it would act on this process).
SITECUSTOMIZE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_audit_site.py")

USAGE = "python -m torch_npu_pinpool audit [--json PATH] -- PROGRAM [ARGS...]"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torch_npu_pinpool audit",
        usage=USAGE,
        description="Run PROGRAM with torch_npu_pinpool's audit report on: each Python process "
        "of it that imports torch_npu prints, at exit, the hazards the plugin prevented and the "
        "races it saw, with the lines of your code. The exit status is PROGRAM's.",
        epilog="Example: python -m torch_npu_pinpool audit -- python serve.py --port 8000",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write each process's report as JSON to PATH ({pid} in PATH becomes the "
        "process id: use it for programs that start several processes)",
    )
    return parser


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(options, program): everything before ``--`` is an option of ours; without ``--``, the
    leading tokens that start with ``-`` (and ``--json``'s value), then the program."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1 :]
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] == "--json" else 1
    return argv[:i], argv[i:]


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Our options and the program to run; ``--help`` exits 0, a usage error exits 2."""
    parser = _parser()
    options, command = _split(argv)
    args = parser.parse_args(options)
    if not command:
        where = " after `--`" if "--" in argv else ""
        parser.error(f"no program to run{where}: give one, e.g. `-- python serve.py`")
    return args, command


def _environment(workdir: str, report: str) -> dict[str, str]:
    shutil.copyfile(SITECUSTOMIZE, os.path.join(workdir, "sitecustomize.py"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (workdir, env.get("PYTHONPATH")) if p)
    env[ENV] = report
    env[AUDIT_DIR_ENV] = workdir
    return env


def _run(command: list[str], env: dict[str, str]) -> int:
    """PROGRAM's exit status; Ctrl-C goes to it (same process group), not to us."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = subprocess.Popen(command, env=env)
        signal.signal(signal.SIGINT, previous)
        while True:
            try:
                status = proc.wait()
                break
            except KeyboardInterrupt:
                continue
    except FileNotFoundError as e:
        print(f"torch_npu_pinpool audit: cannot run {command[0]!r}: {e}", file=sys.stderr)
        return 127
    finally:
        signal.signal(signal.SIGINT, previous)
    return 128 - status if status < 0 else status


def _summary(report: str, workdir: str, command: list[str], since: float) -> list[str]:
    lines = []
    reports = [
        path
        for path in sorted(glob.glob(report.replace("{pid}", "*")))
        if os.path.getmtime(path) >= since  # not a file an earlier run left there
    ]
    for path in sorted(glob.glob(os.path.join(workdir, "status-*.txt"))):
        with open(path) as f:
            argv, reason = (f.read().splitlines() + ["", ""])[:2]
        pid = os.path.basename(path)[len("status-") : -len(".txt")]
        lines.append(f"process {pid} ({argv}) imported torch_npu but was not audited: {reason}")
    if not reports:
        if not lines:
            lines.append(
                f"no report: {' '.join(command)} never imported torch_npu in a Python process "
                "(nothing to audit), or it ended without running Python's exit handlers "
                "(os._exit, killed by a signal), or ran Python with -S / -I (no sitecustomize)"
            )
        return lines
    found: dict[str, int] = {}
    for path in reports:
        try:
            with open(path) as f:
                for hazard in json.load(f)["hazards"]:
                    found[hazard["kind"]] = found.get(hazard["kind"], 0) + hazard["count"]
        except (OSError, ValueError, KeyError) as e:
            lines.append(f"unreadable report {path}: {e}")
    seen = ", ".join(f"{k} x{n}" for k, n in found.items() if n) or "no hazard"
    lines.insert(0, f"{len(reports)} process report(s) above: {seen}")
    return lines


def main(argv: list[str]) -> int:
    """The ``audit`` command; returns PROGRAM's exit status (2 for a usage error)."""
    args, command = _parse(argv)
    _report.quiet_here()  # this process audits nothing itself
    workdir = tempfile.mkdtemp(prefix="torch_npu_pinpool-audit-")
    try:
        if args.json:
            report = os.path.abspath(args.json)
        else:
            report = os.path.join(workdir, "report-{pid}.json")
        since = time.time() - 1.0  # file times may be coarse
        status = _run(command, _environment(workdir, report))
        for line in _summary(report, workdir, command, since):
            print(f"torch_npu_pinpool audit: {line}", file=sys.stderr)
        if args.json:
            print(f"torch_npu_pinpool audit: JSON: {args.json}", file=sys.stderr)
        return status
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
