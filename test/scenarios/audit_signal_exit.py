"""A program that ends by a signal, for `python -m torch_npu_pinpool audit -- python
audit_signal_exit.py HANDLER` (or run with TORCH_NPU_PINPOOL_REPORT set). It imports torch and
torch_npu only, makes one checked copy from pinned memory, prints `ready PID SIGINT-HANDLER`
and waits (bounded) for a signal to end it.

HANDLER:
  none    no handler of its own: SIGTERM's default action, Python's KeyboardInterrupt on SIGINT
  before  a SIGTERM handler that calls sys.exit(3), installed before torch_npu is imported
  after   the same, installed after (the audit activates the plugin at that import)
Exits 9 if no signal came.
"""

import os
import signal
import sys
import threading


def _exit_3(signum, frame):
    sys.exit(3)


HANDLER = sys.argv[1]
if HANDLER == "before":
    signal.signal(signal.SIGTERM, _exit_3)

import torch  # noqa: E402
import torch_npu  # noqa: E402, F401

if HANDLER == "after":
    signal.signal(signal.SIGTERM, _exit_3)
torch.npu.set_device(0)
host = torch.ones(1024).pin_memory()
dev = torch.zeros(1024, device="npu")
dev.copy_(host, non_blocking=True)
torch.npu.synchronize()
print(
    f"ready {os.getpid()} {getattr(signal.getsignal(signal.SIGINT), '__name__', '?')}", flush=True
)
threading.Event().wait(120)  # a signal's handler runs during this wait
print("no signal came", flush=True)
sys.exit(9)
