// Streams (one worker thread each, in-order, asynchronous), enqueue, synchronization and events.
//
// Sources: hicann/runtime docs/zh/api_ref/06_stream_management.md (streams execute tasks in
// order, asynchronously to the host; aclrtSynchronizeStream blocks until they are done),
// docs/zh/api_ref/07_event_management.md (an event completes when its stream reaches the record;
// aclrtStreamWaitEvent makes later work of a stream wait for it).
#include <algorithm>
#include <chrono>
#include <set>

#include "capture.h"
#include "handoff.h"
#include "state.h"

namespace simcann {
namespace {

struct Streams {
  std::mutex mu;
  std::set<Stream*> live;
  std::map<int, Stream*> defaults;  // device -> default stream
  uint32_t next_id = 1;
  // Note [Destroyed streams], Note [Destroyed events]: destroyed objects, kept on purpose.
  std::vector<Stream*> destroyed_streams;
  std::vector<Event*> destroyed_events;
};

Streams& streams() {
  static Streams* s = new Streams();  // leaked: see config()
  return *s;
}

std::atomic<uint64_t> g_next_event_id{1};

void delay_task() {
  int64_t us = config().task_delay_us.load();
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

void worker_loop(Stream* s) {
  for (;;) {
    QueuedTask t;
    {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait(lock, [s] { return !s->queue.empty() || s->stop; });
      if (s->queue.empty()) return;  // stop requested and drained
      t = std::move(s->queue.front());
      s->queue.pop_front();
    }
    if (t.delay) delay_task();
    run_task_checked(t.name, t.fn, t.ranges, s);
    {
      // Note [Event completion order]: one step for every observer. Lock order s->mu, then
      // e->mu (nothing takes them the other way round).
      std::lock_guard<std::mutex> lock(s->mu);
      s->completed = t.seq;
      if (t.on_completed) t.on_completed();
    }
    s->cv.notify_all();
  }
}

Stream* new_stream(int device, bool is_default) {
  auto* s = new Stream();
  s->device = device;
  s->is_default = is_default;
  {
    Streams& all = streams();
    std::lock_guard<std::mutex> lock(all.mu);
    s->id = all.next_id++;
    all.live.insert(s);
  }
  s->worker = std::thread(worker_loop, s);
  handle_created(s);  // Note [Handles handed over through torch_npu's task queue]
  return s;
}

// Waits until `s` has run everything submitted before the call. timeout_ms < 0: forever.
bool wait_idle(Stream* s, int32_t timeout_ms) {
  std::unique_lock<std::mutex> lock(s->mu);
  uint64_t target = s->submitted;
  auto done = [s, target] { return s->completed >= target; };
  if (timeout_ms < 0) {
    s->cv.wait(lock, done);
    return true;
  }
  return s->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), done);
}

aclError take_sticky(Stream* s) {
  std::lock_guard<std::mutex> lock(s->mu);
  aclError e = s->sticky_error;
  if (e != ACL_SUCCESS) {
    set_error("%s", s->sticky_msg.c_str());
    s->sticky_error = ACL_SUCCESS;
  }
  return e;
}

}  // namespace

void push_task(Stream* s, QueuedTask t) {
  {
    std::lock_guard<std::mutex> lock(s->mu);
    t.seq = ++s->submitted;
    s->queue.push_back(std::move(t));
  }
  s->cv.notify_all();
}

void run_task_checked(const char* name, const Task& fn, const std::vector<CheckedRange>& ranges,
                      Stream* s) {
  log("run %s on stream %u", name, s ? s->id : 0);
  aclError e = ACL_SUCCESS;
  if (ranges.empty()) {
    e = fn();
  } else {
    RangesInUse use(name, ranges);  // Note [Range checks]: held until fn returns
    if (!use.ok()) return;
    e = fn();
  }
  if (e != ACL_SUCCESS && s != nullptr) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->sticky_error == ACL_SUCCESS) {
      s->sticky_error = e;
      s->sticky_msg = std::string("simcann: asynchronous task ") + name + " failed with " +
                      std::to_string(e);
    }
  }
}

Stream* to_stream(aclrtStream handle) {
  if (handle != nullptr) {
    handle_used(handle);  // Note [Handles handed over through torch_npu's task queue]
    return static_cast<Stream*>(handle);
  }
  int dev = device_or_default();
  Streams& all = streams();
  {
    std::lock_guard<std::mutex> lock(all.mu);
    auto it = all.defaults.find(dev);
    if (it != all.defaults.end()) return it->second;
  }
  Stream* s = new_stream(dev, true);
  std::lock_guard<std::mutex> lock(all.mu);
  auto it = all.defaults.find(dev);
  if (it != all.defaults.end()) return it->second;  // lost a race: keep the first (s leaks)
  all.defaults[dev] = s;
  return s;
}

bool is_live_stream(Stream* s) {
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  return all.live.count(s) != 0;
}

Event* to_event(aclrtEvent e) {
  handle_used(e);  // Note [Handles handed over through torch_npu's task queue]
  return static_cast<Event*>(e);
}

aclError enqueue(aclrtStream stream, const char* name, Task task) {
  return enqueue(stream, name, std::move(task), {});
}

aclError enqueue(aclrtStream stream, const char* name, Task task, std::vector<MemRange> ranges) {
  Stream* s = to_stream(stream);
  std::vector<CheckedRange> checked;
  checked.reserve(ranges.size());
  for (const MemRange& r : ranges) checked.push_back(resolve_range(r));
  {
    std::lock_guard<std::mutex> lock(capture_mutex());
    // An updating stream takes kernels as updates before anything else (AllocTask, hicann
    // stream.cc): Note [Task groups] in capture.cpp.
    if (s->group_status == GroupStatus::kUpdate) {
      return update_add_task(s, name, std::move(task), std::move(checked));
    }
    if (s->capture) return capture_add_task(s, name, std::move(task), std::move(checked));
  }
  QueuedTask t;
  t.name = name;
  t.fn = std::move(task);
  t.ranges = std::move(checked);
  push_task(s, std::move(t));
  return ACL_SUCCESS;
}

int capture_status(aclrtStream stream) {
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (!s->capture) return ACL_MODEL_RI_CAPTURE_STATUS_NONE;
  return s->capture->invalidated ? ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
                                 : ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
}

aclError sync_stream(Stream* s, int32_t timeout_ms) {
  if (!wait_idle(s, timeout_ms)) {
    set_error("simcann: stream %u: synchronize timed out after %d ms", s->id, timeout_ms);
    return ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
  }
  return take_sticky(s);
}

std::vector<Stream*> device_streams(int device) {
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  std::vector<Stream*> out;
  for (Stream* s : all.live) {
    if (s->device == device) out.push_back(s);
  }
  return out;
}

aclError sync_device(int device, int32_t timeout_ms) {
  {
    std::lock_guard<std::mutex> lock(capture_mutex());
    if (any_active_capture_on_device(device)) {
      set_error("simcann: aclrtSynchronizeDevice while a stream of device %d is capturing: rule "
                "107027",
                device);
      return ACL_ERROR_RT_STREAM_CAPTURED;
    }
  }
  aclError first = ACL_SUCCESS;
  for (Stream* s : device_streams(device)) {
    aclError e = sync_stream(s, timeout_ms);
    if (first == ACL_SUCCESS) first = e;
  }
  return first;
}

// Refuses an operation on a capturing stream (rule 107027). Caller holds no lock.
aclError refuse_if_capturing(Stream* s, const char* api) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (!s->capture) return ACL_SUCCESS;
  set_error("simcann: %s on stream %u, which is capturing: rule 107027 (the capture stays active)",
            api, s->id);
  return ACL_ERROR_RT_STREAM_CAPTURED;
}

void event_mark_complete(Event* e, uint64_t gen) {
  {
    std::lock_guard<std::mutex> lock(e->mu);
    if (gen > e->completed) {
      e->completed = gen;
      e->complete_time_ms = now_ms();
    }
  }
  e->cv.notify_all();
}

// Rule 107028: a record of `e` was captured by a capture that is still running (eager records
// since do not change that: Note [Events in capture]).
aclError refuse_if_event_captured(Event* e, const char* api) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (e->captured_by && e->captured_by->active) {
    set_error("simcann: %s on an event whose record was captured by a capture still running: rule "
              "107028",
              api);
    return ACL_ERROR_RT_EVENT_CAPTURED;
  }
  return ACL_SUCCESS;
}

// Note [Events in capture]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Sources (hicann/runtime): src/runtime/api/impl/api_error.cc (ApiErrorDecorator::StreamWaitEvent,
// ApiErrorDecorator::EventRecord), src/runtime/api/impl/api_impl.cc (ApiImpl::StreamWaitEvent,
// ApiImpl::EventRecord, ApiImpl::EventCreate / EventCreateEx; api_impl_david.cc has the same wait
// rules), src/runtime/core/src/event/event.cc (Event::Wait, Event::WaitSendCheck,
// Event::UpdateLatestRecord), src/runtime/feature/aclgraph/event_capture.cc (Event::IsCapturing),
// src/runtime/feature/aclgraph/capture_model.cc (CaptureModel::ExitCaptureNotify),
// src/runtime/api/api_c_stream.cc (rtStreamWaitEvent), src/runtime/core/src/common/
// errcode_manage.cc (RT_ERROR_STREAM_CAPTURE_ISOLATION -> 107024 ACL_ERROR_RT_CAPTURE_DEPENDENCY,
// RT_ERROR_FEATURE_NOT_SUPPORT -> 207000, RT_ERROR_INVALID_VALUE -> 107000),
// docs/zh/api_ref/07_event_management.md (an event made without ACL_EVENT_SYNC cannot be waited
// on).
// aclrtCreateEventExWithFlag makes a "new mode" event, aclrtCreateEvent / aclrtCreateEventWithFlag
// an old one (torch_npu uses the Ex call whenever it exists, the old one for ACL_EVENT_EXTERNAL).
// An event is captured (Event::IsCapturing) from a record captured on a capturing stream until
// that capture ends (ExitCaptureNotify): an eager record meanwhile does not change that.
// aclrtStreamWaitEvent(s, e), in the runtime's order:
//  * e has ACL_EVENT_DEVICE_USE_ONLY: 107000; e is an IPC event and s is capturing: 207000.
//  * e has none of ACL_EVENT_SYNC / RT_EVENT_DDSYNC / ACL_EVENT_EXTERNAL / ACL_EVENT_IPC (e.g.
//    only ACL_EVENT_CAPTURE_STREAM_PROGRESS and/or ACL_EVENT_TIME_LINE, IsEventWithoutWaitTask):
//    207000, capturing or not.
//  * e captured by a running capture: the cross-stream rules of capture.cpp.
//  * otherwise, s capturing (ACTIVE or INVALIDATED):
//     - an old-mode event other than ACL_EVENT_EXTERNAL: 207000;
//     - a new-mode event ever recorded outside a capture (HasRecord: set by the record, kept when
//       it completes, however long ago): 107024 -- "the event wait task has no corresponding event
//       record task"; the runtime points to aclrtStreamWaitEventWithFlag(ACL_EVENT_WAIT_EXTERNAL);
//     - a new-mode event never recorded outside a capture (never, or only by captures that have
//       ended): success, nothing captured (WaitSendCheck "wait first, return suc");
//     - an ACL_EVENT_EXTERNAL event: a captured wait (external events are not modelled: no-op).
//    Each refusal returns before any task exists, so the capture stays ACTIVE; no capture mode
//    is consulted.
//  * otherwise (eager): an old-mode event never recorded, without ACL_EVENT_SYNC or
//    ACL_EVENT_EXTERNAL: 107000 ("The event has not been recorded"); any other event never
//    recorded: nothing to wait for.
// aclrtRecordEvent(e, s): ACL_EVENT_DEVICE_USE_ONLY 107000; with s capturing: IPC 207000, an
// ACL_EVENT_EXTERNAL event is recorded into the model (not modelled further), an old-mode event
// 207000, an event that cannot be waited on (above; torch_npu's host-allocator events,
// ACL_EVENT_CAPTURE_STREAM_PROGRESS) success and nothing at all ("The event flag is not supported
// in capture mode": it is not captured and keeps its pre-capture state); else the record is
// captured (capture.cpp).
namespace {

bool without_wait_task(const Event* e) {
  return (e->flags & (kEventSync | kEventDdsync | kEventExternal | kEventIpc)) == 0;
}

// The flag checks of ApiErrorDecorator::StreamWaitEvent / EventRecord. Caller holds
// capture_mutex().
aclError refuse_event_flags(Event* e, Stream* s, const char* api, bool wait) {
  if ((e->flags & kEventDeviceOnly) != 0) {
    set_error("simcann: %s: event flags %#x include ACL_EVENT_DEVICE_USE_ONLY, device-only events "
              "can be used only on the device (rule 107000)",
              api, e->flags);
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  if (e->flags == kEventIpc && s->capture) {
    set_error("simcann: %s: an ACL_EVENT_IPC event on capturing stream %u (rule 207000)", api,
              s->id);
    return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
  }
  if (wait && without_wait_task(e)) {
    set_error("simcann: %s: event flags %#x have no ACL_EVENT_SYNC: the event cannot be waited on "
              "(rule 207000)",
              api, e->flags);
    return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
  }
  return ACL_SUCCESS;
}

}  // namespace

}  // namespace simcann

using namespace simcann;

extern "C" {

// ---- streams ----
ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream* stream) {
  SIMCANN_API();
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  *stream = new_stream(device_or_default(), false);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t,
                                                         uint32_t) {
  SIMCANN_API();
  return aclrtCreateStream(stream);
}

ACL_FUNC_VISIBILITY aclError aclrtCreateStreamV2(aclrtStream* stream,
                                                 const aclrtStreamConfigHandle*) {
  SIMCANN_API();
  return aclrtCreateStream(stream);
}

// Note [Destroyed streams]: the Stream object is kept (only its worker ends) so that a stale
// handle in an event or a model never points to freed memory. Kept means held: it goes on
// destroyed_streams, where LeakSanitizer (ci/lib/sanitize.sh) sees it as memory still in use,
// not as a leak.
static aclError destroy_stream(aclrtStream stream, const char* api) {
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream* s = to_stream(stream);
  aclError e = refuse_if_capturing(s, api);
  if (e != ACL_SUCCESS) return e;
  if (!is_live_stream(s)) return ACL_ERROR_RT_INVALID_HANDLE;
  wait_idle(s, -1);
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->stop = true;
  }
  s->cv.notify_all();
  if (s->worker.joinable()) s->worker.join();
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  all.live.erase(s);
  all.destroyed_streams.push_back(s);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream) {
  SIMCANN_API();
  return destroy_stream(stream, "aclrtDestroyStream");
}

ACL_FUNC_VISIBILITY aclError aclrtDestroyStreamForce(aclrtStream stream) {
  SIMCANN_API();
  return destroy_stream(stream, "aclrtDestroyStreamForce");
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream) {
  SIMCANN_API();
  Stream* s = to_stream(stream);
  aclError e = refuse_if_capturing(s, "aclrtSynchronizeStream");
  return e != ACL_SUCCESS ? e : sync_stream(s, -1);
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream,
                                                               int32_t timeout) {
  SIMCANN_API();
  Stream* s = to_stream(stream);
  aclError e = refuse_if_capturing(s, "aclrtSynchronizeStreamWithTimeout");
  return e != ACL_SUCCESS ? e : sync_stream(s, timeout);
}

ACL_FUNC_VISIBILITY aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  SIMCANN_API();
  Stream* s = to_stream(stream);
  aclError e = refuse_if_capturing(s, "aclrtStreamQuery");
  if (e != ACL_SUCCESS) return e;
  std::lock_guard<std::mutex> lock(s->mu);
  if (status) {
    *status = s->completed >= s->submitted ? ACL_STREAM_STATUS_COMPLETE
                                           : ACL_STREAM_STATUS_NOT_READY;
  }
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtStreamGetId(aclrtStream stream, int32_t* streamId) {
  SIMCANN_API();
  if (streamId) *streamId = static_cast<int32_t>(to_stream(stream)->id);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtCtxGetCurrentDefaultStream(aclrtStream* stream) {
  SIMCANN_API();
  if (stream) *stream = to_stream(nullptr);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice() {
  SIMCANN_API();
  return sync_device(device_or_default(), -1);
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout) {
  SIMCANN_API();
  return sync_device(device_or_default(), timeout);
}

// Host functions run on the stream's worker thread, in order (the report-thread machinery of
// aclrtSubscribeReport/aclrtProcessReport is not modelled; aclrtProcessReport just waits).
ACL_FUNC_VISIBILITY aclError aclrtLaunchCallback(aclrtCallback fn, void* userData,
                                                 aclrtCallbackBlockType, aclrtStream stream) {
  SIMCANN_API();
  if (fn == nullptr) return ACL_ERROR_INVALID_PARAM;
  return enqueue(stream, "aclrtLaunchCallback", [fn, userData] {
    fn(userData);
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtLaunchHostFunc(aclrtStream stream, HostFunc fn,
                                                 void* args) {
  SIMCANN_API();
  if (fn == nullptr) return ACL_ERROR_INVALID_PARAM;
  return enqueue(stream, "aclrtLaunchHostFunc", [fn, args] {
    fn(args);
    return ACL_SUCCESS;
  });
}

ACL_FUNC_VISIBILITY aclError aclrtProcessReport(int32_t timeout) {
  int32_t ms = timeout < 0 || timeout > 100 ? 100 : timeout;
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ACL_ERROR_RT_REPORT_TIMEOUT;
}

// ---- events ----
static aclError create_event(aclrtEvent* event, uint32_t flags, bool new_mode) {
  if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
  auto* e = new Event();
  e->id = g_next_event_id++;
  e->flags = flags;
  e->new_mode = new_mode;
  handle_created(e);  // Note [Handles handed over through torch_npu's task queue]
  *event = e;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent* event) {
  SIMCANN_API();
  return create_event(event, kEventDefault, false);
}

ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  SIMCANN_API();
  return create_event(event, flag, false);
}

ACL_FUNC_VISIBILITY aclError aclrtCreateEventExWithFlag(aclrtEvent* event, uint32_t flag) {
  SIMCANN_API();
  return create_event(event, flag, true);
}

// Note [Destroyed events]: like streams, Event objects are never freed: a queued record task
// may still reference one. A destroyed one is held on destroyed_events (before, nothing pointed
// to it: LeakSanitizer reported every destroyed event as leaked, e.g. test/consumers/
// test_make_graphed_callables.py, whose autograd streams record and drop events).
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event) {
  SIMCANN_API();
  if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  all.destroyed_events.push_back(to_event(event));
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  SIMCANN_API();
  Event* e = to_event(event);
  if (e == nullptr) return ACL_ERROR_INVALID_PARAM;
  Config& cfg = config();
  const int64_t n = ++cfg.n_record_event;
  if (cfg.fail_record_event_at.load() > 0 && n == cfg.fail_record_event_at.load()) {
    // Fault injection: the runtime refuses the record before anything changed (the event keeps
    // its last record), as a runtime internal error (507000) leaves it.
    set_error("simcann: aclrtRecordEvent: injected failure (simcann_set_fault record_event)");
    return ACL_ERROR_RT_INTERNAL_ERROR;
  }
  Stream* s = to_stream(stream);
  {
    // Note [Events in capture]
    std::lock_guard<std::mutex> lock(capture_mutex());
    aclError err = refuse_event_flags(e, s, "aclrtRecordEvent", /*wait=*/false);
    if (err != ACL_SUCCESS) return err;
    err = refuse_if_updating(s, "aclrtRecordEvent");
    if (err != ACL_SUCCESS) return err;
    if (s->capture) {
      if (e->flags != kEventExternal && !e->new_mode) {
        set_error("simcann: aclrtRecordEvent on capturing stream %u: an event made by "
                  "aclrtCreateEvent / aclrtCreateEventWithFlag cannot be captured, only one made "
                  "by aclrtCreateEventExWithFlag (rule 207000; the capture stays active)",
                  s->id);
        return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
      }
      if (e->flags != kEventExternal && without_wait_task(e)) {
        log("aclrtRecordEvent on capturing stream %u: event flags %#x cannot be waited on: "
            "nothing recorded",
            s->id, e->flags);
        return ACL_SUCCESS;
      }
      return capture_record_event(s, e);
    }
    e->has_record = true;  // e stays captured if a running capture recorded it
  }
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    gen = ++e->recorded;
  }
  // Note [Event completion order]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // An event completes when the stream has executed everything before its record (CANN
  // aclrtRecordEvent / aclrtQueryEventStatus), and a stream that has executed a record has
  // completed that event. Both views must change in one step: a host thread woken by the event
  // may query the stream at once (with nothing queued after the record, aclrtStreamQuery must
  // say COMPLETE), and a thread returning from aclrtSynchronizeStream may query the event
  // (it must be complete). So the worker marks the event while it counts the record task as
  // done, under the stream's lock.
  QueuedTask t;
  t.name = "aclrtRecordEvent";
  t.fn = [] { return ACL_SUCCESS; };
  t.on_completed = [e, gen] { event_mark_complete(e, gen); };
  t.delay = false;
  push_task(s, std::move(t));
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
  SIMCANN_API();
  if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  return refuse_if_updating(s, "aclrtResetEvent");
}

ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  SIMCANN_API();
  Event* e = to_event(event);
  if (e == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream* s = to_stream(stream);
  {
    // Note [Events in capture]
    std::lock_guard<std::mutex> lock(capture_mutex());
    aclError err = refuse_event_flags(e, s, "aclrtStreamWaitEvent", /*wait=*/true);
    if (err != ACL_SUCCESS) return err;
    err = refuse_if_updating(s, "aclrtStreamWaitEvent");
    if (err != ACL_SUCCESS) return err;
    if ((e->captured_by && e->captured_by->active) || s->capture) {
      return capture_wait_event(s, e);
    }
    if (!e->new_mode && !e->has_record && (e->flags & (kEventSync | kEventExternal)) == 0) {
      set_error("simcann: aclrtStreamWaitEvent: the event (made by aclrtCreateEvent / "
                "aclrtCreateEventWithFlag, flags %#x) has not been recorded (rule 107000)",
                e->flags);
      return ACL_ERROR_RT_PARAM_INVALID;
    }
  }
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    target = e->recorded;
    if (e->completed >= target) return ACL_SUCCESS;  // nothing pending
  }
  QueuedTask t;
  t.name = "aclrtStreamWaitEvent";
  t.fn = [e, target] {
    std::unique_lock<std::mutex> lock(e->mu);
    e->cv.wait(lock, [e, target] { return e->completed >= target; });
    return ACL_SUCCESS;
  };
  t.delay = false;
  push_task(s, std::move(t));
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEventWithTimeout(aclrtStream stream,
                                                             aclrtEvent event, int32_t) {
  SIMCANN_API();
  return aclrtStreamWaitEvent(stream, event);
}

static bool event_done(Event* e) {
  std::lock_guard<std::mutex> lock(e->mu);
  return e->completed >= e->recorded;  // never recorded: complete
}

ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event,
                                                   aclrtEventRecordedStatus* status) {
  SIMCANN_API();
  Event* e = to_event(event);
  if (e == nullptr || status == nullptr) return ACL_ERROR_INVALID_PARAM;
  aclError err = refuse_if_event_captured(e, "aclrtQueryEventStatus");
  if (err != ACL_SUCCESS) return err;
  *status = event_done(e) ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                          : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status) {
  SIMCANN_API();
  Event* e = to_event(event);
  if (e == nullptr || status == nullptr) return ACL_ERROR_INVALID_PARAM;
  aclError err = refuse_if_event_captured(e, "aclrtQueryEvent");
  if (err != ACL_SUCCESS) return err;
  *status = event_done(e) ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtQueryEventWaitStatus(aclrtEvent event,
                                                       aclrtEventWaitStatus* status) {
  SIMCANN_API();
  Event* e = to_event(event);
  if (e == nullptr || status == nullptr) return ACL_ERROR_INVALID_PARAM;
  aclError err = refuse_if_event_captured(e, "aclrtQueryEventWaitStatus");
  if (err != ACL_SUCCESS) return err;
  *status = event_done(e) ? ACL_EVENT_WAIT_STATUS_COMPLETE : ACL_EVENT_WAIT_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

static aclError sync_event(aclrtEvent event, int32_t timeout_ms, const char* api) {
  Event* e = to_event(event);
  if (e == nullptr) return ACL_ERROR_INVALID_PARAM;
  aclError err = refuse_if_event_captured(e, api);
  if (err != ACL_SUCCESS) return err;
  std::unique_lock<std::mutex> lock(e->mu);
  uint64_t target = e->recorded;
  auto done = [e, target] { return e->completed >= target; };
  if (timeout_ms < 0) {
    e->cv.wait(lock, done);
  } else if (!e->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
    return ACL_ERROR_RT_EVENT_SYNC_TIMEOUT;
  }
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event) {
  SIMCANN_API();
  return sync_event(event, -1, "aclrtSynchronizeEvent");
}

ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout) {
  SIMCANN_API();
  return sync_event(event, timeout, "aclrtSynchronizeEventWithTimeout");
}

ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent,
                                                   aclrtEvent endEvent) {
  SIMCANN_API();
  Event* a = to_event(startEvent);
  Event* b = to_event(endEvent);
  if (ms == nullptr || a == nullptr || b == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> la(a->mu);
  std::lock_guard<std::mutex> lb(b->mu);
  *ms = static_cast<float>(b->complete_time_ms - a->complete_time_ms);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t* timestamp) {
  SIMCANN_API();
  Event* e = to_event(event);
  if (e == nullptr || timestamp == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lock(e->mu);
  *timestamp = static_cast<uint64_t>(e->complete_time_ms * 1000.0);
  return ACL_SUCCESS;
}

// ---- stream memory operations ----
// hicann docs/zh/api_ref/11-09_stream_memory_operation.md: aclrtValueWrite writes a 64-bit value,
// aclrtValueWait blocks its stream until the value satisfies `flag` (GEQ 0, EQ 1, AND 2, NOR 3);
// both are stream tasks, so they are captured and replayed like any other. The address must be
// 8-byte aligned for a write (ApiErrorDecorator::WriteValue, api_error_standard_soc.cc: 107000).
// torch_npu's torch.npu.ExternalEvent is built on them (record = write 1; wait = wait, then write
// 0), and NPUGraph's auto-dispatch capture uses one to order each replay after a task update.
// A wait nothing ever satisfies blocks its stream forever, as on hardware; after
// kValueWaitWarnS seconds the simulator says so on stderr.
namespace {
std::mutex g_value_mu;
std::condition_variable g_value_cv;  // a value write happened (waits also poll every ms)
constexpr int kValueWaitWarnS = 5;

bool value_satisfies(uint64_t cur, uint64_t value, uint32_t flag) {
  switch (flag) {
    case 0:
      return static_cast<int64_t>(cur - value) >= 0;
    case 1:
      return cur == value;
    case 2:
      return (cur & value) != 0;
    default:
      return ~(cur | value) != 0;
  }
}
}  // namespace

ACL_FUNC_VISIBILITY aclError aclrtValueWrite(void* devAddr, uint64_t value, uint32_t flag,
                                             aclrtStream stream) {
  SIMCANN_API();
  log("aclrtValueWrite(%p, %llu, %u, stream %p)", devAddr, static_cast<unsigned long long>(value),
      flag, stream);
  if (devAddr == nullptr) {
    set_error("simcann: aclrtValueWrite: null address (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  if (reinterpret_cast<uintptr_t>(devAddr) % 8 != 0) {
    set_error("simcann: aclrtValueWrite: address %p is not 8-byte aligned (rule 107000)", devAddr);
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  auto* p = static_cast<uint64_t*>(devAddr);
  return enqueue(
      stream, "aclrtValueWrite",
      [p, value] {
        {
          std::lock_guard<std::mutex> lock(g_value_mu);
          __atomic_store_n(p, value, __ATOMIC_SEQ_CST);
        }
        g_value_cv.notify_all();
        return ACL_SUCCESS;
      },
      {MemRange::dev_write(devAddr, sizeof(uint64_t))});
}

ACL_FUNC_VISIBILITY aclError aclrtValueWait(void* devAddr, uint64_t value, uint32_t flag,
                                            aclrtStream stream) {
  SIMCANN_API();
  log("aclrtValueWait(%p, %llu, %u, stream %p)", devAddr, static_cast<unsigned long long>(value),
      flag, stream);
  if (devAddr == nullptr) {
    set_error("simcann: aclrtValueWait: null address (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  if (flag > 3) {
    set_error("simcann: aclrtValueWait: flag %u is none of GEQ/EQ/AND/NOR (rule 107000)", flag);
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  auto* p = static_cast<const uint64_t*>(devAddr);
  // No declared ranges: the task checks its word itself at each look and does not keep it in use
  // while it blocks (a free of the word on another thread must not wait for it; Note [Range
  // checks]).
  std::vector<CheckedRange> word{resolve_range(MemRange::dev_read(devAddr, sizeof(uint64_t)))};
  return enqueue(stream, "aclrtValueWait", [p, value, flag, word] {
    double start = now_ms();
    bool warned = false;
    for (;;) {
      {
        RangesInUse use("aclrtValueWait", word);
        if (!use.ok()) return ACL_SUCCESS;  // reported; not run
        if (value_satisfies(__atomic_load_n(p, __ATOMIC_SEQ_CST), value, flag)) {
          return ACL_SUCCESS;
        }
      }
      std::unique_lock<std::mutex> lock(g_value_mu);
      g_value_cv.wait_for(lock, std::chrono::milliseconds(1));
      if (!warned && now_ms() - start > kValueWaitWarnS * 1000.0) {
        warned = true;
        warn("simcann: aclrtValueWait(%p, %llu, flag %u) has blocked its stream for %d s: nothing "
             "has written a satisfying value (hardware waits forever too)",
             static_cast<const void*>(p), static_cast<unsigned long long>(value), flag,
             kValueWaitWarnS);
      }
    }
  });
}

ACL_FUNC_VISIBILITY aclError aclrtGetEventId(aclrtEvent event, uint32_t* eventId) {
  SIMCANN_API();
  Event* e = to_event(event);
  if (e == nullptr || eventId == nullptr) return ACL_ERROR_INVALID_PARAM;
  *eventId = static_cast<uint32_t>(e->id);
  return ACL_SUCCESS;
}

}  // extern "C"
