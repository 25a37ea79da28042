// The NPU runtime calls the allocator makes, through torch_npu and ACL: capture status, fence
// events (recycled per device), host functions, and whether the runtime is up.
#include "runtime/npu_runtime.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <torch_npu/csrc/core/npu/NPUEvent.h>
#include <torch_npu/csrc/core/npu/NPUFunctions.h>
#include <torch_npu/csrc/core/npu/NPUGuard.h>
#include <torch_npu/csrc/core/npu/NPUStream.h>
#include <torch_npu/csrc/core/npu/sys_ctrl/npu_sys_ctrl.h>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace torch_npu_pinpool {
namespace {

// Leaked: events may be dropped during exit.
struct EventFreeList {
  std::mutex mutex;
  std::vector<std::vector<c10_npu::NPUEvent*>> per_device;
};
EventFreeList& event_free_list() {
  static auto* list = new EventFreeList();
  return *list;
}

Event make_event(c10::DeviceIndex device) {
  auto& list = event_free_list();
  {
    std::lock_guard<std::mutex> lock(list.mutex);
    if (device >= 0 && static_cast<size_t>(device) < list.per_device.size() &&
        !list.per_device[device].empty()) {
      auto* event = list.per_device[device].back();
      list.per_device[device].pop_back();
      return Event(event);
    }
  }
  return Event(new c10_npu::NPUEvent());
}

std::atomic<bool> g_forked_child{false};

c10_npu::NPUStream npu_stream(const Stream& stream) {
  return c10_npu::NPUStream(c10_npu::NPUStream::UNCHECKED, stream);
}

}  // namespace

c10::DeviceIndex current_device() { return c10_npu::current_device(); }

Stream current_stream(c10::DeviceIndex device) { return c10_npu::getCurrentNPUStream(device); }

void note_forked_child() { g_forked_child.store(true); }

bool forked_child() { return g_forked_child.load(std::memory_order_relaxed); }

void EventRecycler::operator()(c10_npu::NPUEvent* event) const {
  const auto device = event->device_index();
  if (device < 0) {  // never recorded
    delete event;
    return;
  }
  auto& list = event_free_list();
  std::lock_guard<std::mutex> lock(list.mutex);
  if (list.per_device.size() <= static_cast<size_t>(device)) {
    list.per_device.resize(device + 1);
  }
  list.per_device[device].push_back(event);
}

void* acl_symbol(const char* name) {
  static void* const lib = dlopen("libascendcl.so", RTLD_NOW | RTLD_NOLOAD);
  return dlsym(lib != nullptr ? lib : RTLD_DEFAULT, name);
}

CaptureInfo capture_info(const Stream& stream) {
  if (g_forked_child.load(std::memory_order_relaxed)) {
    return {};  // Note [Forked children]
  }
  using GetInfoFn = int (*)(void*, int*, void**);
  static const auto get_info = acl_function<GetInfoFn>("aclmdlRICaptureGetInfo");
  int status = 0;
  void* model = nullptr;
  // stream(false): the raw stream, without draining torch_npu's task queue.
  if (get_info == nullptr || get_info(npu_stream(stream).stream(false), &status, &model) != 0) {
    return {};
  }
  return {static_cast<CaptureStatus>(status), model};
}

int launch_host_func(const Stream& stream, void (*fn)(void*), void* arg) {
  using LaunchFn = int (*)(void*, void (*)(void*), void*);
  static const auto launch = acl_function<LaunchFn>("aclrtLaunchHostFunc");
  return launch == nullptr
             ? -1
             : launch(npu_stream(stream).stream(), fn, arg);  // behind the queued work
}

// Note [Is this stream capturing]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ACTIVE or INVALIDATED: work enqueued there is captured (or dropped), never run, so no fence
// or eager-use event is recorded there. ATen's stream_is_capturing hook asks this too.
bool stream_capturing(const Stream& stream) {
  const CaptureStatus status = capture_info(stream).status;
  return status == CaptureStatus::kActive || status == CaptureStatus::kInvalidated;
}

bool captures_into(const Stream& stream, void* model) {
  const CaptureInfo info = capture_info(stream);
  return model != nullptr && info.status == CaptureStatus::kActive && info.model == model;
}

bool runtime_up() {
  return !g_forked_child.load(std::memory_order_relaxed) &&
         c10_npu::NpuSysCtrl::GetInstance().GetInitFlag();
}

Event record_on(const Stream& stream) {
  Event event = make_event(stream.device_index());
  event->record(npu_stream(stream));
  return event;
}

Event try_record_on(const Stream& stream) {
  try {
    return record_on(stream);
  } catch (const std::exception& e) {
    TORCH_WARN_ONCE("torch_npu_pinpool: recording a fence event failed (", e.what(),
                    "); the pinned memory it would fence stays held until a record succeeds.");
    return nullptr;
  }
}

bool event_done(Event& event) {
  if (g_forked_child.load(std::memory_order_relaxed)) {
    return true;  // Note [Forked children]
  }
  try {
    const c10::DeviceIndex device = event->device_index();
    if (device >= 0 && device != c10_npu::current_device()) {
      c10_npu::NPUGuard guard(device);
      return event->query();
    }
    return event->query();
  } catch (const std::exception& e) {
    TORCH_WARN_ONCE("torch_npu_pinpool: an event query failed (", e.what(),
                    "); the pinned memory it fences stays held.");
    return false;
  }
}

bool events_done(std::vector<Event>& events) {
  while (!events.empty() && event_done(events.back())) {
    events.pop_back();
  }
  return events.empty();
}

}  // namespace torch_npu_pinpool
