"""Eager non_blocking copies stay as safe as with torch_npu's own allocator, also while
another thread captures a graph. Scenarios (runtime-neutral): test/scenarios/
eager_async_copies.py (on the simulator it adds a 3 ms task delay so copies stay queued),
threads_during_capture.py, eager_copy_freed_in_capture.py, cross_stream_pinned_race.py."""

from __future__ import annotations

import pytest

from ._snippets import ON_OFF, env_for, under_sanitizer

SLOW = pytest.mark.simulator  # the task delay is the simulator's


@ON_OFF
def test_eager_async_copies_never_see_recycled_bytes(scenario, plugin):
    """Cannot fail with the plugin off: native torch_npu is safe here, and that is the bar.
    (An allocator taking memory from aclrtMallocHost itself fails it: torch_npu then never
    calls its record_event.)"""
    r = scenario("eager_async_copies", env=env_for(plugin))
    assert r.result == {"h2d_ok": True, "d2h_ok": True}


def test_other_threads_during_capture(scenario):
    """A second thread pins and copies eagerly on its own stream while the main thread
    captures: its allocations stay in the default pool (the graph pool holds exactly the
    capture's block), its copies are correct, and replay reads the captured bytes. Plugin
    only: the pool accounting is the plugin's; the replay assertion is the native defect
    covered in test_capture_replay.py."""
    o = scenario("threads_during_capture").result
    assert o["errors"] == []
    assert o["worker_ok"] == [True]
    assert o["pool_blocks"] == [1]
    assert o["replay"] == [1.0]


@ON_OFF
@pytest.mark.parametrize(
    "delay", [pytest.param(0, id="delay0"), pytest.param(2000, id="delay2000", marks=SLOW)]
)
def test_eager_copy_queued_when_its_tensor_is_freed_in_a_capture(scenario, plugin, delay):
    """The tensor of a still-queued eager copy is freed inside a capture begun with
    capture_begin() on the copy's stream, while another thread pins and empties the cache: the
    copy delivers the user's bytes, and the capture and replay are unharmed. Native torch_npu
    records the copy's event on the capturing stream (captured, not run) and hands the block
    on: with the copy kept queued (simulator delay) it reads junk or freed memory."""
    o = scenario("eager_copy_freed_in_capture", env=env_for(plugin, PINPOOL_DELAY_US=str(delay)))
    r = o.result
    assert r["replay"] == [1.0] and r["work"] == [50.0], r
    if plugin:
        assert r["eager"] == [1.0], r
        assert r.get("violations", 0) == 0, r
    elif delay and not under_sanitizer():  # the junk thread must win a race (see there)
        assert r["eager"] != [1.0] or r["violations"] > 0, "native kept the queued copy's block"


@ON_OFF
def test_streams_racing_on_a_pinned_buffer_is_the_programs_race(scenario, plugin):
    """Two streams copy to and from one pinned buffer with no event between them: what the H2D
    reads is undefined (the program's race), but the runtime runs both copies without an error,
    the D2H's bytes are in the buffer after synchronize(), and an ordered copy is exact. In the
    ThreadSanitizer leg this is also the check that the simulated runtime's DMA stays out of
    TSan's sight, as a real NPU's does (Note [The device's memory accesses], simcann's
    device_access.h); before that, TSan reported the race in the simulator's memmove."""
    r = scenario("cross_stream_pinned_race", env=env_for(plugin)).result
    assert r == {"host": [2.0], "ordered": [3.0]}, r
