"""``python -m torch_npu_pinpool audit [--json PATH] [--interval S] -- PROGRAM [ARGS...]``.

Runs PROGRAM with the audit report on (``TORCH_NPU_PINPOOL_REPORT``) and the plugin activated
in every Python process of it that imports torch_npu (``_audit_site.py``, installed as their
``sitecustomize``). Each such process prints its report to stderr when it ends (also by SIGTERM
/ SIGINT: _report_writer.py) and writes it to a file in a temporary directory, every S seconds
too with ``--interval``; the command then merges them (``_audit_merge.py``), prints the summary,
writes ``--json``, removes the directory and exits with PROGRAM's status (128 + N if a signal N
ended it).

Note [The audit command and signals]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The program must see signals as it would without the command: it starts with the command's own
dispositions and signal mask (nothing ignored on its behalf), in the same process group (Ctrl-C
and the terminal reach it directly). The command blocks SIGINT, SIGTERM and SIGCHLD and takes
them with sigtimedwait: a SIGINT / SIGTERM sent to the command itself (kill, a supervisor) is
sent on to the program; one the terminal sent to the whole foreground group (si_code
SI_KERNEL: Ctrl-C) is not, since the program got it already. The command goes on until the
program ended (SIGCHLD), so the summary is printed and the directory removed whatever the
program did with the signal. A signal sent to the whole process group with kill(2) reaches the
program twice (directly and forwarded).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from . import _audit_merge, _report
from ._report import AUDIT_DIR_ENV, ENV, INTERVAL_ENV

# The programs' sitecustomize (never imported here: it would act on this process).
SITECUSTOMIZE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_audit_site.py")

USAGE = "python -m torch_npu_pinpool audit [--json PATH] [--interval S] -- PROGRAM [ARGS...]"
WATCHED = {signal.SIGINT, signal.SIGTERM, signal.SIGCHLD}
SI_KERNEL = 0x80  # siginfo's si_code of a signal the kernel sent (the terminal's Ctrl-C)
POLL_S = 1.0  # SIGCHLD ends each wait; this only bounds it


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
        help="also write the reports as JSON: {pid} in PATH becomes each process's id (one file "
        "per process, as it wrote it); without {pid}, one file with the merged report and each "
        "process's",
    )
    parser.add_argument(
        "--interval",
        metavar="S",
        type=_seconds,
        help="every S seconds, each process appends a JSON line with its report so far "
        "(TORCH_NPU_PINPOOL_REPORT_INTERVAL_S): a process killed with SIGKILL leaves those",
    )
    return parser


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive number of seconds (e.g. 10)")
    return seconds


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(options, program): everything before ``--`` is an option of ours; without ``--``, the
    leading tokens that start with ``-`` (and ``--json``'s value), then the program."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1 :]
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("--json", "--interval") else 1
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


def _environment(workdir: str, interval: float | None) -> dict[str, str]:
    shutil.copyfile(SITECUSTOMIZE, os.path.join(workdir, "sitecustomize.py"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (workdir, env.get("PYTHONPATH")) if p)
    env[ENV] = os.path.join(workdir, "report-{pid}.json")  # _audit_merge.py reads them
    env[AUDIT_DIR_ENV] = workdir
    if interval is not None:
        env[INTERVAL_ENV] = repr(interval)
    return env


def _run(command: list[str], env: dict[str, str], mask: set[signal.Signals]) -> int:
    """PROGRAM's exit status (Note [The audit command and signals]); WATCHED is blocked here,
    ``mask`` is the command's own signal mask, which the program starts with."""
    try:
        proc = subprocess.Popen(
            command, env=env, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        )
    except (FileNotFoundError, PermissionError) as e:
        print(f"torch_npu_pinpool audit: cannot run {command[0]!r}: {e}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    while proc.poll() is None:
        info = signal.sigtimedwait(WATCHED, POLL_S)
        if info is not None and info.si_signo != signal.SIGCHLD and info.si_code != SI_KERNEL:
            proc.send_signal(info.si_signo)
    status = proc.returncode
    return 128 - status if status < 0 else status


def _not_audited(workdir: str) -> list[str]:
    lines = []
    for path in sorted(glob.glob(os.path.join(workdir, "status-*.txt"))):
        with open(path) as f:
            argv, reason = (f.read().splitlines() + ["", ""])[:2]
        pid = os.path.basename(path)[len("status-") : -len(".txt")]
        lines.append(f"process {pid} ({argv}) imported torch_npu but was not audited: {reason}")
    return lines


def _summary(workdir: str, command: list[str], json_target: str | None) -> list[str]:
    processes, problems = _audit_merge.collect(workdir)
    lines = _not_audited(workdir) + problems
    if json_target and processes:
        try:
            _audit_merge.export(processes, workdir, json_target)
            lines.append(f"JSON: {json_target}")
        except OSError as e:
            lines.append(f"could not write the JSON to {json_target}: {e}")
    if not processes:
        if not _not_audited(workdir):
            lines.insert(
                0,
                f"no report: {' '.join(command)} never imported torch_npu in a Python process "
                "(nothing to audit), or it ended without running Python's exit handlers "
                "(os._exit, SIGKILL: use --interval to keep what a process saw until then), or "
                "ran Python with -S / -I (no sitecustomize)",
            )
        return lines
    return _audit_merge.summary(processes) + lines


def main(argv: list[str]) -> int:
    """The ``audit`` command; returns PROGRAM's exit status (2 for a usage error)."""
    args, command = _parse(argv)
    _report.quiet_here()  # this process audits nothing itself
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    workdir = tempfile.mkdtemp(prefix="torch_npu_pinpool-audit-")
    try:
        status = _run(command, _environment(workdir, args.interval), mask)
        for line in _summary(workdir, command, args.json):
            print(f"torch_npu_pinpool audit: {line}", file=sys.stderr)
        return status
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        while signal.sigtimedwait(WATCHED, 0) is not None:
            pass  # what came once the program had ended: it is gone, nothing to send them to
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
