"""A program with no SIGTERM handler of its own whose SIGTERM reaches a thread other than the
main one, as the kernel may deliver a process-directed signal to any thread that does not block
it: here a thread sends it to itself (``signal.pthread_kill``) while the main thread waits
(bounded, WAIT_S, default 120 s). Natively SIG_DFL ends the process at once. Run with
TORCH_NPU_PINPOOL_REPORT set: the report is written, then the process ends by SIGTERM as
natively (Note [Ending signals reach the main thread]). Exits 9 if nothing ended it.
"""

import signal
import sys
import threading
import time

from _lib.scenario import N, env_int, pinned, torch

dev = torch.zeros(N, device="npu")
dev.copy_(pinned(1.0), non_blocking=True)
torch.npu.synchronize()


def _to_itself() -> None:
    time.sleep(0.2)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)


threading.Thread(target=_to_itself, name="signalled").start()
threading.Event().wait(env_int("WAIT_S", 120))
print("no signal ended it", flush=True)
sys.exit(9)
