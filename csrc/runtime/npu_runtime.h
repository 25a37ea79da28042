// What the allocator asks of the NPU runtime: capture status, and fence events. torch_npu's
// headers stay in the .cpp (NPUStream.h includes every NPU operator's declaration; only the
// completion probe includes one too): elsewhere an NPU stream is a c10::Stream.
#pragma once

#include <c10/core/Stream.h>

#include <memory>
#include <vector>

namespace c10_npu {
struct NPUEvent;
}  // namespace c10_npu

namespace torch_npu_pinpool {

// An NPU stream (torch_npu's NPUStream is a c10::Stream of device type PrivateUse1).
using Stream = c10::Stream;

c10::DeviceIndex current_device();
// torch_npu's current stream on `device` (-1: the current device).
Stream current_stream(c10::DeviceIndex device = -1);

// aclmdlRICaptureStatus, spelled out: 2.9's acl header is C++ only.
enum class CaptureStatus : int { kNone = 0, kActive = 1, kInvalidated = 2 };

struct CaptureInfo {
  CaptureStatus status{CaptureStatus::kNone};
  void* model{nullptr};  // the aclmdlRI the stream captures into
};

// A libascendcl function, or null when this runtime lacks it.
void* acl_symbol(const char* name);
template <typename Fn>
Fn acl_function(const char* name) {
  return reinterpret_cast<Fn>(acl_symbol(name));
}

// Read without draining torch_npu's task queue; kNone without aclmdlRICaptureGetInfo.
CaptureInfo capture_info(const Stream& stream);
// Note [Is this stream capturing]: the one place the plugin asks.
bool stream_capturing(const Stream& stream);
// The filter routing an allocation or captured copy to the graph of `model`: ACTIVE into it.
bool captures_into(const Stream& stream, void* model);

// NPUEvents recycled per device. query() says "not ready" while the record sits in torch_npu's
// task queue: the conservative answer a host allocator needs.
struct EventRecycler {
  void operator()(c10_npu::NPUEvent* event) const;
};
using Event = std::unique_ptr<c10_npu::NPUEvent, EventRecycler>;

// fn(arg) as a task of `stream` behind torch_npu's queued work (captured on a capturing
// stream). The runtime's error code; -1 without aclrtLaunchHostFunc.
int launch_host_func(const Stream& stream, void (*fn)(void*), void* arg);

// Note [Forked children]
// ~~~~~~~~~~~~~~~~~~~~~~
// A forked child cannot use the runtime and runs none of the parent's device work. After
// note_forked_child (a pthread_atfork handler) the runtime counts as down: no stream captures,
// every event is complete, and the inherited graph state is left (leaked) as it was. The
// allocator's locks are taken around fork() (lock_for_fork), so that no thread the child lacks
// holds one. The runtime's own locks are another matter: a runtime or torch_npu thread (the task
// queue, the release thread, a stream's worker) may hold one at the fork, and the child's first
// call that takes it never returns. So the child gives no block back to torch_npu or the runtime
// (take_raw leaks it, host_empty_cache() releases nothing): it then calls the runtime only where
// torch_npu's own allocator would too, to pin a block neither cache holds.
void note_forked_child();
bool forked_child();

// False while the process exits and in a forked child.
bool runtime_up();

Event record_on(const Stream& stream);  // with the stream's device current
// Null when the runtime refused the record (warned once): the caller retries later.
Event try_record_on(const Stream& stream);

// Asked with the event's device current; a runtime error counts as not completed.
bool event_done(Event& event);
// Drops the completed events from the back; true when none is left.
bool events_done(std::vector<Event>& events);

}  // namespace torch_npu_pinpool
