"""Timed repetitions inside a worker: wall and CPU time per iteration of a loop body, by one
or several threads at once. Two clocks: `wall` (elapsed) and `cpu` (CPU time of the thread(s)
running the body, time.thread_time), which a loaded machine inflates far less than wall time.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

Body = Callable[[int], None]  # body(n) runs n iterations


def calibrate(body: Body, rep_seconds: float, lo: int = 10, hi: int = 200000) -> int:
    """Iterations so that body(n) takes about rep_seconds."""
    n = lo
    while True:
        t0 = time.perf_counter()
        body(n)
        dt = time.perf_counter() - t0
        if dt >= rep_seconds / 4 or n >= hi:
            break
        n *= 4
    return max(lo, min(hi, int(rep_seconds / max(dt / n, 1e-9))))


def timed(body: Body, n: int, threads: int = 1) -> tuple[float, float]:
    """(wall, cpu) seconds per iteration of body(n) run by `threads` threads at once: wall =
    elapsed / n (each thread does n), cpu = the threads' CPU time / (threads * n)."""
    if threads == 1:
        c0, t0 = time.thread_time(), time.perf_counter()
        body(n)
        return (time.perf_counter() - t0) / n, (time.thread_time() - c0) / n
    barrier = threading.Barrier(threads + 1)
    errors: list[str] = []
    cpu: list[float] = []

    def run() -> None:
        try:
            barrier.wait()
            c0 = time.thread_time()
            body(n)
            cpu.append(time.thread_time() - c0)
        except Exception as e:  # noqa: BLE001  (re-raised below, in the caller's thread)
            errors.append(repr(e))

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise RuntimeError(errors[0])
    return dt / n, sum(cpu) / (threads * n)


def samples(body: Body, n: int, reps: int, threads: int = 1) -> tuple[list[float], list[float]]:
    """reps timed repetitions -> (wall ns/op list, cpu ns/op list)."""
    wall, cpu = [], []
    for _ in range(reps):
        w, c = timed(body, n, threads)
        wall.append(w * 1e9)
        cpu.append(c * 1e9)
    return wall, cpu


class Clock:
    """Wall and thread-CPU time of one block: `with Clock() as c: ...; c.wall, c.cpu` (s)."""

    def __enter__(self) -> Clock:
        self.c0, self.t0 = time.thread_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu = time.thread_time() - self.c0


@contextlib.contextmanager
def one_intra_op_thread(torch) -> Iterator[None]:
    """Run the block with torch.set_num_threads(1): a parallel CPU op (a host copy of 32 KiB or
    more, as in pin_memory) then runs whole on the calling thread. With the default pool, the
    calling thread does its share and spins at OpenMP's barrier for the rest; on a 2-CPU machine
    that share and that spin change from process to process, and time.thread_time() never sees
    the pool thread's part, so a CPU time measured around the op moves by more than the
    allocator costs. The same in every variant."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
