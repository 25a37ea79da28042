// What the allocator asks of the NPU runtime, in one place: whether a stream is capturing (and
// into which model), and the events that fence host memory (recycled per device, recorded and
// queried with their own device current).
#pragma once

#include <torch_npu/csrc/core/npu/NPUEvent.h>
#include <torch_npu/csrc/core/npu/NPUStream.h>

#include <chrono>
#include <memory>
#include <vector>

namespace torch_npu_pinpool {

using Stream = c10_npu::NPUStream;

// aclmdlRICaptureStatus (acl_mdl.h). Spelled out: 2.9's header is C++ only, and the allocator
// must not depend on which header revision the wheel ships.
enum class CaptureStatus : int { kNone = 0, kActive = 1, kInvalidated = 2 };

struct CaptureInfo {
  CaptureStatus status{CaptureStatus::kNone};
  void* model{nullptr};  // the aclmdlRI the stream captures into; null when kNone
};

// A function of the runtime library torch_npu loaded (libascendcl, with local scope: looked up
// by its handle), or null when this runtime lacks it.
void* acl_symbol(const char* name);
template <typename Fn>
Fn acl_function(const char* name) {
  return reinterpret_cast<Fn>(acl_symbol(name));
}

// The capture status of a stream, read without draining torch_npu's task queue. kNone when the
// runtime lacks aclmdlRICaptureGetInfo.
CaptureInfo capture_info(const Stream& stream);

// Note [Is this stream capturing]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Two questions, each answered here only:
//   * in_capture(s): s is in a capture sequence, ACTIVE or INVALIDATED. Work enqueued on it is
//     recorded into a model (or dropped), never run, so the allocator never records a fence or
//     eager-use event there: it would "complete" without waiting for anything.
//   * captures_into(s, model): s is ACTIVE and its model is `model`. This is the filter that
//     routes a pinned allocation or a captured copy to one graph (torch_npu >= 2.11 builds the
//     same filter for begin_allocate_to_pool).
bool in_capture(const Stream& stream);
bool captures_into(const Stream& stream, void* model);

// An NPUEvent that goes back to a per-device free list when dropped. NPUEvent records go
// through torch_npu's task queue, and NPUEvent::query() says "not ready" while the record
// still sits in that queue: exactly the conservative answer a host allocator needs.
struct EventRecycler {
  void operator()(c10_npu::NPUEvent* event) const;
};
using Event = std::unique_ptr<c10_npu::NPUEvent, EventRecycler>;

// Enqueues fn(arg) on `stream` (aclrtLaunchHostFunc) behind the work torch_npu has queued for
// it (NPUStream::stream() drains torch_npu's task queue first). The host function runs once
// the stream's earlier tasks completed, and later tasks wait for it to return; on a capturing
// stream it is captured, and every replay runs it then. Returns the runtime's error code
// (0: success; -1: the runtime has no aclrtLaunchHostFunc).
int launch_host_func(const Stream& stream, void (*fn)(void*), void* arg);

// Note [Forked children]
// ~~~~~~~~~~~~~~~~~~~~~~
// A process forked from one that runs the NPU runtime cannot use it (torch_npu refuses to
// initialize NPU state in such a child), and inherits the parent's allocator as it was at the
// fork: lists of blocks, graphs, fences, possibly "a capture is underway". No device work of
// the parent runs in the child, and its pinned bytes there are a private copy. So the child
// makes no runtime call: the runtime counts as down (runtime_up() is false, every stream
// "not capturing", every event complete), nothing waits, nothing is fenced, and the
// allocator's graph state is left as it was (leaked with the child), like torch_npu's own
// bad-fork handling. Set by a pthread_atfork child handler (note_forked_child).
void note_forked_child();

// Whether the runtime is still up: false while the process exits (nothing is in flight any
// more) and in a forked child (Note [Forked children]).
bool runtime_up();

// An event recorded on `stream` (NPUEvent::record makes the stream's device current).
Event record_on(const Stream& stream);
// record_on, or null when the runtime refused the record (warned once): the caller keeps the
// stream unfenced and tries again on a later pass, so a failed record never drops work.
Event try_record_on(const Stream& stream);

// Whether the event completed, asked with its device current. A runtime error counts as not
// completed (torch_npu's own NPUEvent::query raises it): the bytes stay held, never reused
// while a copy may still read them; waits are bounded (Deadline), so nothing hangs on it.
bool event_done(Event& event);

// Drops the completed events from the back; true when none is left.
bool events_done(std::vector<Event>& events);

// A moment a wait gives up at: one per host_empty_cache() / pass, however many fences it
// waits for (Note [Replay fences]). no_wait(): already passed, so a wait only asks.
using Deadline = std::chrono::steady_clock::time_point;
inline Deadline no_wait() { return Deadline::min(); }
// now + the fence wait limit (5 s): a wedged runtime must not hang host_empty_cache().
Deadline fence_wait_deadline();

// event_done, polling until the event completed or `deadline` passed (then false).
bool wait_event(Event& event, Deadline deadline);

// Note [Eager-use fences]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A freed block may be handed out again once every eager copy from or into it has run: one
// event per stream that used it (record_event), recorded when its tensor dies - the moment
// ATen's free records them - and never later: a later event also waits for whatever the stream
// ran since, and the bytes stay held meanwhile. A stream that is capturing at that moment
// cannot take the event (it would be captured into the graph, not run, and re-recorded by every
// replay): it stays unfenced until its capture is over, and until then the fence is not done.
class UseFence {
 public:
  UseFence() = default;
  explicit UseFence(std::vector<Stream> streams) : unfenced_(std::move(streams)) { record(); }
  // Records an event on each unfenced stream that no longer captures; true if none is left.
  bool record();
  // Every stream fenced and every event completed.
  bool done() { return record() && events_done(events_); }
  bool empty() const { return events_.empty() && unfenced_.empty(); }

 private:
  std::vector<Event> events_;
  std::vector<Stream> unfenced_;
};

}  // namespace torch_npu_pinpool
