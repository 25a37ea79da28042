// Completion probes (see completion_probe.h): the runtime calls, the probe streams and events.
//
// Note [Completion probes]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// The audit compares the bytes a queued H2D copy or replay read with those at its enqueue, so it
// needs the host bytes *at the moment the device finished the work* - not whenever the plugin
// next looks: a program that waits for the copy (an event recorded after it, a synchronize)
// and then rewrites the buffer is right, and must not be reported. So a probe is a host
// function on the device's timeline, right behind the work, that the program's own waits
// cannot overtake:
//
//     stream S:  ... copy/replay | record(after_work) | wait(after_probe) | the program's next work
//     side P_S:                    wait(after_work) -> host fn -> record(after_probe)
//
// aclrtLaunchHostFunc runs its function once the stream reached it, on a thread the runtime
// registers for that stream, and holds that stream's later tasks until it returned (hicann/
// runtime docs/zh/api_ref/aclrtLaunchHostFunc.md); CANN's own asynchronous dump does exactly
// this with a side stream and two events (hicann/runtime, adump's SetupAsyncDump). The host
// function runs on a side stream, never on S: the same doc forbids mixing it with
// aclrtLaunchCallback / aclrtSubscribeReport on one stream, which is what torch_npu's
// `_launch_host_func` uses (vllm-ascend subscribes its compute streams). One side stream per
// user stream, so probes never order two user streams against each other.
//
// Order: torch_npu's task queue (TASK_QUEUE_ENABLE, on by default) may still hold the copy when
// the plugin hears of it (record_event runs on the thread that called copy_, the queue thread
// issues the copy later), and a replay was issued before its hook returns. So the five calls
// above are issued *through the same queue*, as one custom task on S (OpCommand::RunOpApi): the
// queue thread issues them right after the work, in order. Without the task queue RunOpApi runs
// them inline, right after the work too.
//
// Events: each probe takes a pair from a per-device free list (ACL_EVENT_SYNC, the flag that
// allows waits). A pair goes back only when a *later* probe on the same S has run: by then S
// has passed its wait on after_probe and P_S its wait on after_work, so re-recording either
// cannot change what a pending wait waits for (waits take the record current when issued).
#include "audit/completion_probe.h"

#include <acl/acl.h>
#include <c10/util/Exception.h>
#include <torch_npu/csrc/core/npu/NPUGuard.h>
#include <torch_npu/csrc/framework/OpCommand.h>

#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace torch_npu_pinpool {
namespace {

// The ACL calls, looked up in the libascendcl torch_npu loaded (local scope: by handle).
struct Acl {
  aclError (*create_stream)(aclrtStream*) = nullptr;
  aclError (*create_event)(aclrtEvent*, uint32_t) = nullptr;
  aclError (*record)(aclrtEvent, aclrtStream) = nullptr;
  aclError (*wait)(aclrtStream, aclrtEvent) = nullptr;
  aclError (*launch)(aclrtStream, void (*)(void*), void*) = nullptr;
  bool ok = false;
};

const Acl& acl() {
  static const Acl api = [] {
    Acl a;
    a.create_stream = acl_function<decltype(a.create_stream)>("aclrtCreateStream");
    a.create_event = acl_function<decltype(a.create_event)>("aclrtCreateEventExWithFlag");
    a.record = acl_function<decltype(a.record)>("aclrtRecordEvent");
    a.wait = acl_function<decltype(a.wait)>("aclrtStreamWaitEvent");
    a.launch = acl_function<decltype(a.launch)>("aclrtLaunchHostFunc");
    a.ok = a.create_stream && a.create_event && a.record && a.wait && a.launch;
    return a;
  }();
  return api;
}

struct EventPair {
  aclrtEvent after_work{nullptr};   // recorded on S behind the work; P_S waits for it
  aclrtEvent after_probe{nullptr};  // recorded on P_S behind the host function; S waits for it
};

struct Probe {
  ProbeFn fn;
  void* arg;
  aclrtStream stream;  // S
  aclrtStream side;    // P_S
  c10::DeviceIndex device;
  EventPair events;
};

// Probe streams and event pairs. Leaked: host functions may run while the process exits.
struct ProbeState {
  std::mutex mutex;
  std::map<aclrtStream, aclrtStream> side;          // S -> P_S
  std::vector<std::vector<EventPair>> free_events;  // per device
  std::map<aclrtStream, EventPair> last_finished;   // S -> the pair of its last finished probe
};

ProbeState& state() {
  static auto* s = new ProbeState();
  return *s;
}

void warn_failed(const char* call, aclError error) {
  TORCH_WARN_ONCE("torch_npu_pinpool: the audit's completion probe could not run (", call,
                  " returned ", error, "); written_while_queued may miss races.");
}

// Called with `device` current and ProbeState::mutex held.
aclrtStream side_stream_locked(aclrtStream stream) {
  ProbeState& s = state();
  auto it = s.side.find(stream);
  if (it != s.side.end()) {
    return it->second;
  }
  aclrtStream side = nullptr;
  const aclError error = acl().create_stream(&side);
  TORCH_CHECK(error == ACL_SUCCESS && side != nullptr,
              "torch_npu_pinpool: aclrtCreateStream failed (", error,
              ") making the audit's probe stream; unset TORCH_NPU_PINPOOL_REPORT to run without "
              "the report.");
  s.side.emplace(stream, side);
  return side;
}

// Called with `device` current and ProbeState::mutex held.
EventPair take_events_locked(c10::DeviceIndex device) {
  ProbeState& s = state();
  if (static_cast<size_t>(device) < s.free_events.size() && !s.free_events[device].empty()) {
    EventPair pair = s.free_events[device].back();
    s.free_events[device].pop_back();
    return pair;
  }
  EventPair pair;
  for (aclrtEvent* event : {&pair.after_work, &pair.after_probe}) {
    const aclError error = acl().create_event(event, ACL_EVENT_SYNC);
    TORCH_CHECK(error == ACL_SUCCESS, "torch_npu_pinpool: aclrtCreateEventExWithFlag failed (",
                error,
                ") making the audit's probe events; unset TORCH_NPU_PINPOOL_REPORT to run "
                "without the report.");
  }
  return pair;
}

// The host function (a runtime thread): the probe's callback, then its events' bookkeeping.
void run_probe(void* arg) {
  auto* probe = static_cast<Probe*>(arg);
  probe->fn(probe->arg, /*completed=*/true);
  ProbeState& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto [it, first] = s.last_finished.emplace(probe->stream, probe->events);
    if (!first) {  // the previous probe on S is over: S passed its wait, P_S its own
      if (s.free_events.size() <= static_cast<size_t>(probe->device)) {
        s.free_events.resize(probe->device + 1);
      }
      s.free_events[probe->device].push_back(it->second);
      it->second = probe->events;
    }
  }
  delete probe;
}

// The queue thread (or, without the task queue, the caller), right behind the work on S.
void issue(Probe* probe) {
  const Acl& a = acl();
  aclError error = a.record(probe->events.after_work, probe->stream);
  if (error == ACL_SUCCESS) {
    error = a.wait(probe->side, probe->events.after_work);
  }
  if (error != ACL_SUCCESS) {
    warn_failed("recording the probe's first event", error);
    probe->fn(probe->arg, /*completed=*/false);
    delete probe;  // its events are dropped: a wait may still refer to them
    return;
  }
  // Once launched the probe may be gone at any moment (run_probe): keep what is needed after.
  const EventPair events = probe->events;
  const aclrtStream side = probe->side;
  const aclrtStream stream = probe->stream;
  error = a.launch(side, &run_probe, probe);
  if (error != ACL_SUCCESS) {
    warn_failed("aclrtLaunchHostFunc", error);
    probe->fn(probe->arg, /*completed=*/false);
    delete probe;
    return;
  }
  error = a.record(events.after_probe, side);
  if (error == ACL_SUCCESS) {
    error = a.wait(stream, events.after_probe);
  }
  if (error != ACL_SUCCESS) {
    warn_failed("holding the stream for the probe", error);
  }
}

}  // namespace

bool probes_available() { return acl().ok; }

bool launch_probe(const Stream& stream, ProbeFn fn, void* arg) {
  if (!probes_available() || !runtime_up()) {
    return false;
  }
  const c10::DeviceIndex device = stream.device_index();
  c10_npu::NPUGuard device_guard(device);
  const c10_npu::NPUStream npu_stream(c10_npu::NPUStream::UNCHECKED, stream);
  auto probe =
      std::make_unique<Probe>(Probe{fn, arg, npu_stream.stream(false), nullptr, device, {}});
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    probe->side = side_stream_locked(probe->stream);
    probe->events = take_events_locked(device);
  }
  // RunOpApi enqueues on the current stream: make it S for this call.
  c10_npu::NPUStreamGuard stream_guard(npu_stream);
  Probe* raw = probe.release();
  at_npu::native::OpCommand::RunOpApi("torch_npu_pinpool::completion_probe", [raw]() {
    issue(raw);
    return 0;
  });
  return true;
}

}  // namespace torch_npu_pinpool
