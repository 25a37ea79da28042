"""A program's own race: two streams copy to and from one pinned buffer with no event between
them (a D2H into it on one stream, an H2D out of it on the other), ``ROUNDS`` times. On an NPU
both copies run; what the H2D reads is undefined, and that is the program's bug, not the
runtime's or the allocator's. What must hold: no runtime error, the D2H's bytes are in the
buffer once the device is synchronized, and a copy ordered after that moves exact bytes. On the
simulator each stream task takes ``DELAY_US`` (default 500) so the two copies are in flight
together."""

import torch
from _lib import simctl
from _lib.scenario import N, env_int, pinned, report, values

if simctl.available():
    simctl.set_delay_us(env_int("DELAY_US", 500))
writer, reader = torch.npu.Stream(), torch.npu.Stream()
host = pinned(1.0)
filled = torch.full((N,), 2.0, device="npu")
raced = torch.zeros(N, device="npu")
torch.npu.synchronize()
for _ in range(env_int("ROUNDS", 8)):
    with torch.npu.stream(writer):
        host.copy_(filled, non_blocking=True)  # D2H into the buffer
    with torch.npu.stream(reader):
        raced.copy_(host, non_blocking=True)  # H2D out of it, not ordered with the D2H
torch.npu.synchronize()
if simctl.available():
    simctl.set_delay_us(0)
after_race = values(host)
host.fill_(3.0)
ordered = torch.empty(N, device="npu")
ordered.copy_(host, non_blocking=True)
torch.npu.synchronize()
report({"host": after_race, "ordered": values(ordered)})
