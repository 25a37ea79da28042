// Completion probes: a host function that runs once the work enqueued so far on a stream has run
// on the device, and holds that stream's later work until it has returned (Note [Completion
// probes] in completion_probe.cpp). The audit report (audit.h) checks the bytes a copy or a
// replay read with them.
#pragma once

#include "runtime/npu_runtime.h"

namespace torch_npu_pinpool {

// Called once per launched probe, on a runtime thread: completed == true once the work before
// it ran, false if the runtime refused the probe (then nothing waited for anything). Must not
// call the runtime, take the GIL or block.
using ProbeFn = void (*)(void* arg, bool completed);

// Whether this runtime can run probes (it has aclrtLaunchHostFunc and the event calls).
bool probes_available();

// Enqueues fn(arg) behind everything enqueued on `stream` so far, in torch_npu's task queue
// order (so behind a copy or replay this thread just enqueued). Returns false (and never calls
// fn) when probes are unavailable. `stream` must not be capturing.
bool launch_probe(const Stream& stream, ProbeFn fn, void* arg);

}  // namespace torch_npu_pinpool
