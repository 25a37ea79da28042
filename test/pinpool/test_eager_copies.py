"""Eager non_blocking copies stay as safe as with torch_npu's own allocator (issue #33: never
worse than native on the eager path): the bytes that arrive when the source is freed while its
copy is queued, also from an alias (numpy, dlpack, frombuffer) and in a capture, when the tensor
is freed inside another capture, and when two streams race on one buffer. Scenarios
(runtime-neutral): test/scenarios/eager_async_copies.py (on the simulator it adds a 3 ms task
delay so copies stay queued), eager_copy_freed_in_capture.py, cross_stream_pinned_race.py,
eager_alias_copy.py."""

from __future__ import annotations

import pytest

from ._snippets import ON_OFF, env_for, under_sanitizer

MiB = 1 << 20
SLOW = pytest.mark.simulator  # the task delay is the simulator's


@ON_OFF
def test_eager_async_copies_never_see_recycled_bytes(scenario, plugin):
    """Cannot fail with the plugin off: native torch_npu is safe here, and that is the bar.
    (An allocator taking memory from aclrtMallocHost itself fails it: torch_npu then never
    calls its record_event.)"""
    r = scenario("eager_async_copies", env=env_for(plugin))
    assert r.result == {"h2d_ok": True, "d2h_ok": True}


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


@pytest.mark.simulator
@ON_OFF
@pytest.mark.parametrize(
    "how,size",
    [("numpy", 48 * MiB), ("dlpack", 48 * MiB), ("frombuffer", 48 * MiB), ("numpy", 4096)],
    ids=["numpy-48MiB", "dlpack-48MiB", "frombuffer-48MiB", "numpy-4KiB"],
)
def test_copy_from_alias_reads_its_bytes(scenario, plugin, how, size):
    """The source is freed while its copy is queued and the next pinned tensor of that size is
    written at once: the device gets the source's bytes, not the next owner's."""
    env = env_for(plugin, ALIAS=how, ALIAS_BYTES=size, ALIAS_DELAY_US=300_000)
    assert scenario("eager_alias_copy", env=env).result["values"] == [1]


@pytest.mark.parametrize(
    "how,size",
    [("numpy", 48 * MiB), ("dlpack", 48 * MiB), ("numpy", 4096)],
    ids=["numpy-48MiB", "dlpack-48MiB", "numpy-4KiB"],
)
def test_captured_copy_from_alias_reads_its_bytes(scenario, how, size):
    """Inside a capture the alias's block belongs to the graph: a replay after the next owner
    wrote still reads the source's bytes. (Natively the block goes back to the free list when
    the alias dies in the capture, and the replay reads the next owner's bytes.)"""
    env = env_for(True, ALIAS=how, ALIAS_BYTES=size, ALIAS_IN_CAPTURE=1)
    assert scenario("eager_alias_copy", env=env).result["values"] == [1]
