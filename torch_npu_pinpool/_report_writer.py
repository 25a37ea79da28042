"""When and where a process writes its audit report (``TORCH_NPU_PINPOOL_REPORT``): at exit, on
SIGTERM / SIGINT, every ``TORCH_NPU_PINPOOL_REPORT_INTERVAL_S`` seconds, and on request
(``torch_npu_pinpool.report_now()``, SIGUSR2). ``_report.py`` makes the report's content.

Note [Reports of processes that do not exit normally]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A server ends by a signal, not by returning from main. The final report is written on the exit
path (atexit) and, where the process would die without one, by the plugin's own handler:

* SIGTERM / SIGINT whose disposition is the default (SIG_DFL: the process would die without
  running atexit) get ``_die_like_default``: it writes the final report, restores SIG_DFL and
  sends the signal again, so the process ends exactly as it would have (killed by it). It is
  installed at activation (main thread only: Python sets handlers there) and whenever the
  program later sets SIG_DFL for them: ``signal.signal`` / ``signal.getsignal`` are wrapped so
  that the program never sees the plugin's handler (it reads SIG_DFL) and gets it back on
  SIG_DFL. A signal that lands on another thread is sent on to the main thread, whose waits it
  interrupts (Note [Ending signals reach the main thread], csrc/audit/ending_signals.h).
* A handler of the program's (installed before or after activation) is left alone: it runs as
  it would, and when it ends the process the usual way (``sys.exit(3)``, KeyboardInterrupt from
  Python's default SIGINT handler, a graceful shutdown that returns from main), the exit path
  writes the report and the status is the program's. SIG_IGN stays ignored: nothing ends.
* What still loses the final report: ``os._exit`` (multiprocessing's *fork* workers end so),
  SIGKILL, a crash; and a process whose torch_npu was first imported off the main thread, for
  SIG_DFL signals. With an interval, what the last periodic line wrote stays.

So one design covers handlers installed before and after the plugin: the exit path for the
program's handlers, the plugin's handler only where there is none. A second SIGTERM while the
report is written does not cut it short.

Note [Report lines]
~~~~~~~~~~~~~~~~~~~
Without an interval the JSON at the report path is one document, written at exit (and by
``report_now()``). With ``TORCH_NPU_PINPOOL_REPORT_INTERVAL_S`` it is JSON Lines: each line is
appended (and flushed) by one ``write``: periodic lines (``"reason": "interval"``), requested
ones (``"request"``) and the final one (``"exit"`` or ``"signal SIGTERM"``, ``"final": true``).
Each line has ``pid``, ``argv``, ``seq``, ``time``, ``torch_npu``, ``plugin``, ``hazards`` (the
running totals per kind: count, bytes, sites; the final line adds ``affects``) and ``new`` (the
kinds counted since the previous line: the counts, bytes and sites added). A process killed by
SIGKILL leaves its lines so far.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Callable

from . import _report

ENDING_SIGNALS = (signal.SIGTERM, signal.SIGINT)
REQUEST_SIGNAL = signal.SIGUSR2

_lock = threading.RLock()  # one writer at a time; re-entered by a signal handler on its thread
_writer: _Writer | None = None
_original_signal: Callable[..., Any] = signal.signal
_original_getsignal: Callable[..., Any] = signal.getsignal


class _Writer:
    """One process's report: where it goes, the lines written so far, and the periodic thread."""

    def __init__(self, ext: Any, setting: str, interval: float | None) -> None:
        self.ext = ext
        self.setting = setting
        self.interval = interval
        self.seq = 0
        self.last: dict[str, dict[str, Any]] = {}  # kind -> totals of the previous line
        self.ended = False  # the final report is written (or being written)
        self.writing = False  # the final report is being written
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    # --- lines -----------------------------------------------------------------------------

    def _line(self, report: dict[str, Any], reason: str, final: bool) -> dict[str, Any]:
        totals, new = [], []
        for h in report["hazards"]:
            entry = {k: h[k] for k in ("kind", "count", "bytes", "sites")}
            if final:
                entry["affects"] = h["affects"]
            totals.append(entry)
            before = self.last.get(h["kind"], {"count": 0, "bytes": 0, "sites": []})
            if h["count"] > before["count"]:
                new.append(
                    {
                        "kind": h["kind"],
                        "count": h["count"] - before["count"],
                        "bytes": h["bytes"] - before["bytes"],
                        "sites": [s for s in h["sites"] if s not in before["sites"]],
                    }
                )
            self.last[h["kind"]] = entry
        self.seq += 1
        return {
            "pid": os.getpid(),
            "argv": list(sys.argv),
            "seq": self.seq,
            "time": round(time.time(), 3),
            "reason": reason,
            "final": final,
            "torch_npu": report["torch_npu"],
            "plugin": report["plugin"],
            "new": new,
            "hazards": totals,
        }

    def _write(self, report: dict[str, Any], reason: str, final: bool) -> None:
        if not self.setting:
            return
        path = _report.json_path(self.setting)
        try:
            if self.interval is None:
                _report.write_json(report, path)
                return
            data = json.dumps(self._line(report, reason, final)) + "\n"
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data.encode())
            finally:
                os.close(fd)
        except OSError as e:
            print(f"torch_npu_pinpool: could not write the report to {path}: {e}", file=sys.stderr)

    # --- when -------------------------------------------------------------------------------

    def periodic(self) -> None:
        while not self.stop.wait(self.interval):
            with _lock:
                if self.ended:
                    return
                try:
                    self._write(_report.data(self.ext), "interval", final=False)
                except Exception as e:  # never kill the program's process from this thread
                    print(f"torch_npu_pinpool: no periodic report: {e}", file=sys.stderr)
                    return

    def now(self) -> dict[str, Any]:
        with _lock:
            report = _report.data(self.ext)
            print(_report.text(report, _report.checked(self.ext)), file=sys.stderr, flush=True)
            if not self.ended:
                self._write(report, "request", final=False)
            return report

    def final(self, reason: str) -> None:
        with _lock:
            if self.ended or _report.is_quiet():
                return
            self.ended = self.writing = True
            self.stop.set()
            try:
                self._final(reason)
            finally:
                self.writing = False

    def _final(self, reason: str) -> None:
        try:
            report = _report.data(self.ext, wait_s=_report.EXIT_WAIT_S)
            self.ext.report_close()  # the runtime goes down next: no check reads host memory
        except Exception as e:  # never turn a clean exit into a traceback
            print(f"torch_npu_pinpool: no report: {e}", file=sys.stderr)
            return
        print(_report.text(report, _report.checked(self.ext)), file=sys.stderr, flush=True)
        self._write(report, reason, final=True)
        _note_ending(reason)


def _note_ending(reason: str) -> None:
    """Under the `audit` command: how this process ended, for its summary (a JSON document has
    no place for it)."""
    audit_dir = os.environ.get(_report.AUDIT_DIR_ENV)
    if not audit_dir:
        return
    try:
        with open(os.path.join(audit_dir, f"ended-{os.getpid()}.txt"), "w") as f:
            f.write(reason + "\n")
    except OSError:
        pass


# --- signals: Note [Reports of processes that do not exit normally] ----------------------------


def _die_like_default(signum: int, frame: Any) -> None:
    """SIG_DFL's action (the process ends, killed by ``signum``) once the report is written."""
    writer = _writer
    if writer is not None:
        if writer.writing:
            return  # a second signal while the report is written: the first one ends it
        writer.final(f"signal {signal.Signals(signum).name}")
    sys.stderr.flush()
    _original_signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _on_request(signum: int, frame: Any) -> None:
    if _writer is not None:
        _writer.now()


def _install_die_like_default(signum: int) -> Any:
    """Installs ``_die_like_default`` for ``signum``, reached from any thread (Note [Ending
    signals reach the main thread]); returns the previous handler."""
    previous = _original_signal(signum, _die_like_default)
    if _writer is not None:
        _writer.ext.route_to_main_thread(int(signum))
    return previous


def _signal(signalnum: Any, handler: Any) -> Any:
    """``signal.signal``, except that SIG_DFL for SIGTERM / SIGINT installs the plugin's
    report-then-default handler; the program reads back what it set."""
    if signalnum in ENDING_SIGNALS and handler == signal.SIG_DFL and _writer is not None:
        previous = _install_die_like_default(signalnum)
    else:
        previous = _original_signal(signalnum, handler)
    return signal.SIG_DFL if previous is _die_like_default else previous


def _getsignal(signalnum: Any) -> Any:
    handler = _original_getsignal(signalnum)
    return signal.SIG_DFL if handler is _die_like_default else handler


def _install_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # Python sets handlers on the main thread only: the exit path still reports
    for signum in ENDING_SIGNALS:
        if _original_getsignal(signum) == signal.SIG_DFL:
            _install_die_like_default(signum)
    if _original_getsignal(REQUEST_SIGNAL) == signal.SIG_DFL:  # a program's own stays its own
        _original_signal(REQUEST_SIGNAL, _on_request)
    signal.signal = _signal
    signal.getsignal = _getsignal


def start(ext: Any, setting: str, interval: float | None) -> None:
    """At activation with the report on: the exit path, the signals, the periodic thread."""
    global _writer
    _writer = _Writer(ext, setting, interval)
    atexit.register(_writer.final, "exit")
    _install_handlers()
    if interval is not None:
        _writer.thread = threading.Thread(
            target=_writer.periodic, name="torch_npu_pinpool-report", daemon=True
        )
        _writer.thread.start()


def report_now() -> dict[str, Any]:
    """Print the report so far to stderr and write it (a line with an interval, else the JSON
    document at the report path, which the exit overwrites); returns it."""
    if _writer is None:
        raise RuntimeError(
            "torch_npu_pinpool: the report is off; set TORCH_NPU_PINPOOL_REPORT=1 (or a JSON "
            "path) before the process starts, or run it with "
            "`python -m torch_npu_pinpool audit -- python PROGRAM ARGS`."
        )
    return _writer.now()
