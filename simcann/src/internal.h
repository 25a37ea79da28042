// Internal C++ API of the simulated CANN runtime (simcann).
//
// This is the contract between the runtime core (src/*.cpp) and the compute ops (src/ops/*.cpp).
// Everything is compiled into ONE shared library, so there is one runtime state. Sources include
// the ACL headers shipped inside the installed torch_npu wheel (build.sh adds the include dir),
// so every `extern "C"` definition is checked against the real prototype.
//
// How an op is written (src/ops/fill.cpp, say):
//
//   extern "C" aclnnStatus aclnnInplaceFillScalar(void* ws, uint64_t wsSize,
//                                                  aclOpExecutor* ex, aclrtStream stream) {
//     ... decode the executor (device pointer, nbytes, value) ...
//     return simcann::enqueue(stream, "aclnnInplaceFillScalar",
//                             [=] { fill(ptr, n, v); return ACL_SUCCESS; },
//                             {simcann::MemRange::dev_write(ptr, nbytes)});
//   }
//
// Rules for tasks:
//  * A task runs later on the stream's worker thread, after everything enqueued before it on that
//    stream (and after the optional per-task delay). Do NOT touch the caller's stack from a task:
//    capture by value.
//  * If the stream is capturing, the task is not run: it is recorded into the model and re-run on
//    every replay (aclmdlRIExecuteAsync). So a task must read its inputs (host AND device memory)
//    when it runs, never copy them at enqueue time -- replay must see memory as it is at replay.
//  * Declare every memory range the task reads or writes (MemRange). Before each run the runtime
//    checks that each range still lies inside a live allocation, and the SAME allocation as when
//    the task was enqueued/captured; otherwise it reports `SIMCANN VIOLATION:` and does not run the
//    task if the memory is gone (see Note [Range checks] in state.h).
//  * A task must not allocate or free runtime memory, nor call enqueue/synchronize.
//  * Returning non-zero from a task makes the stream's next synchronize fail with that code (an
//    asynchronous device error), and the message set with set_error is kept for aclGetRecentErrMsg.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "acl/acl.h"

namespace simcann {

using Task = std::function<aclError()>;

// A memory range a task reads or writes. `host` is true for host memory (pinned, registered or,
// eagerly only, pageable), false for device memory.
struct MemRange {
  const void* ptr = nullptr;
  size_t size = 0;
  bool write = false;
  bool host = false;

  static MemRange dev_read(const void* p, size_t n) { return {p, n, false, false}; }
  static MemRange dev_write(const void* p, size_t n) { return {p, n, true, false}; }
  static MemRange host_read(const void* p, size_t n) { return {p, n, false, true}; }
  static MemRange host_write(const void* p, size_t n) { return {p, n, true, true}; }
};

// Enqueue `task` on `stream` (nullptr = the current device's default stream). Returns ACL_SUCCESS,
// or an error if the stream is invalid, or if the stream is capturing and adding the task to the
// capture failed (the capture is then INVALIDATED, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED).
// A task enqueued under an aclnn* name is a kernel: the only kind of task a capture task group may
// hold or a task update may launch (Note [Task groups] in capture.cpp); any other is refused there
// (507009), and on a stream updating a task group a kernel replaces the group's next task.
// `name` is used in traces and violation reports; it must be a string literal / static string.
aclError enqueue(aclrtStream stream, const char* name, Task task);
aclError enqueue(aclrtStream stream, const char* name, Task task, std::vector<MemRange> ranges);

// True if [ptr, ptr+size) lies entirely inside one live device allocation (aclrtMalloc*).
bool is_device_ptr(const void* ptr, size_t size);
// True if [ptr, ptr+size) lies entirely inside one live pinned (aclrtMallocHost*) or registered
// (aclrtHostRegister*) host range.
bool is_pinned_host_ptr(const void* ptr, size_t size);

// Capture status of `stream` (nullptr = default stream): 0 NONE, 1 ACTIVE, 2 INVALIDATED.
int capture_status(aclrtStream stream);

// The message aclGetRecentErrMsg returns next on THIS thread (printf-style). Every simulator error
// path calls this with a message naming the rule, e.g. "simcann: aclnnFoo is not implemented".
void set_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Logging: log() prints "simcann[tid]: ..." to stderr when SIMCANN_TRACE=1; warn() always prints.
bool trace_enabled();
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// The error code generated stubs return for unimplemented aclnn / aclop entry points (after
// set_error names the op). Ops that reject their arguments should use their own aclnn codes.
constexpr aclError kNotImplemented = 561000;  // ACLNN_ERR_INNER

}  // namespace simcann
