// Python bindings: torch_npu_pinpool._C. Private API; the package wraps it.
#include <torch/extension.h>

#include "pageable_copy_guard.h"
#include "pin_pool_allocator.h"

namespace torch_npu_pinpool {
namespace {

using PoolId = std::tuple<uint64_t, uint64_t>;
constexpr int kCaptureActive = 1;  // aclmdlRICaptureStatus::ACTIVE

MempoolId to_id(const PoolId& id) { return {std::get<0>(id), std::get<1>(id)}; }

PinPoolHostAllocatorImpl& impl() {
  auto* allocator = active_allocator();
  TORCH_CHECK(allocator != nullptr, "torch_npu_pinpool is not active; call activate() first.");
  return allocator->impl();
}

// Capture status and model of the current stream, without draining the task queue.
std::tuple<int, uintptr_t> current_capture_info() {
  auto [status, model] = capture_info(c10_npu::getCurrentNPUStream());
  return {status, reinterpret_cast<uintptr_t>(model)};
}

// Note [Backport capture registration]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu <= 2.10 tells the host allocator nothing about graphs, so the Python hooks
// register each capture: begin_capture() *before* the original capture_begin (a pool that
// is already being captured into fails here, before the runtime capture starts), then
// set_capture_model() once the runtime reports the capture's model. The filter is the one
// torch_npu >= 2.11 builds - the stream is capturing, into this capture's model - and
// matches nothing until the model is known (nothing runs in between).
struct BackportCapture {
  std::shared_ptr<std::atomic<void*>> model;
  c10_npu::NPUStream stream;
};
std::mutex g_backport_mutex;
std::unordered_map<uint64_t, BackportCapture>& backport_captures() {
  static auto* captures = new std::unordered_map<uint64_t, BackportCapture>();
  return *captures;
}

uint64_t begin_capture(const PoolId& pool) {
  auto model = std::make_shared<std::atomic<void*>>(nullptr);
  CaptureFilter filter = [model](c10::Stream s) {
    void* expected = model->load(std::memory_order_relaxed);
    if (expected == nullptr) {
      return false;
    }
    auto [status, m] = capture_info(c10_npu::NPUStream(c10_npu::NPUStream::UNCHECKED, s));
    return status == kCaptureActive && m == expected;
  };
  const auto stream = c10_npu::getCurrentNPUStream();
  const uint64_t token = impl().begin_capture(to_id(pool), std::move(filter));
  std::lock_guard<std::mutex> lock(g_backport_mutex);
  backport_captures().emplace(token, BackportCapture{std::move(model), stream});
  return token;
}

// After the original capture_begin returned: the current stream is the capture stream.
void* capture_model_of_current_stream() {
  auto [status, model] = capture_info(c10_npu::getCurrentNPUStream());
  TORCH_CHECK(status == kCaptureActive && model != nullptr,
              "torch_npu_pinpool: capture_begin returned but the current stream is not "
              "capturing.");
  return model;
}

void set_capture_model(uint64_t token) {
  void* model = capture_model_of_current_stream();
  std::lock_guard<std::mutex> lock(g_backport_mutex);
  backport_captures().at(token).model->store(model);
}

// Note [Capture that ended without telling the allocator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu 2.11's NPUGraph::capture_end checks aclmdlRICaptureEnd's result *before* it calls
// end_allocate_to_pool (2.12 on call it first), so when the runtime fails the end (107038,
// 107025, 507903: the stream is out of the capture either way) the registration that
// begin_allocate_to_pool made stays behind: a pool marked capturing forever, its use never
// released. On >= 2.11 the Python hooks therefore watch each registration begun inside
// capture_begin (watch_capture: the capture stream and model, as the backport path records
// them) and, when capture_end raises, abort those whose runtime capture is over. A capture
// still active (capture_end called on the wrong stream) keeps its registration for a retry.
void watch_capture(uint64_t token) {
  auto model = std::make_shared<std::atomic<void*>>(capture_model_of_current_stream());
  std::lock_guard<std::mutex> lock(g_backport_mutex);
  backport_captures().emplace(token,
                              BackportCapture{std::move(model), c10_npu::getCurrentNPUStream()});
}

// Whether the runtime still captures into this capture's model on its stream.
bool capture_active(uint64_t token) {
  BackportCapture capture{nullptr, c10_npu::getCurrentNPUStream()};
  {
    std::lock_guard<std::mutex> lock(g_backport_mutex);
    auto it = backport_captures().find(token);
    if (it == backport_captures().end()) {
      return false;
    }
    capture = it->second;
  }
  auto [status, model] = capture_info(capture.stream);
  return status == kCaptureActive && model == capture.model->load();
}

void forget_capture(uint64_t token) {
  std::lock_guard<std::mutex> lock(g_backport_mutex);
  backport_captures().erase(token);
}

py::list pool_stats() {
  py::list out;
  for (const auto& info : impl().pool_info()) {
    py::dict d;
    d["id"] = py::make_tuple(info.id.first, info.id.second);
    d["graphs"] = info.graphs;
    d["capturing"] = info.capturing;
    d["retiring"] = info.retiring;
    d["blocks"] = info.blocks;
    d["bytes_held"] = info.bytes_held;
    d["bytes_in_use"] = info.bytes_in_use;
    d["adopted_blocks"] = info.adopted_blocks;
    out.append(d);
  }
  return out;
}

}  // namespace
}  // namespace torch_npu_pinpool

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace pp = torch_npu_pinpool;
  m.attr("built_with_torch") =
      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  m.attr("aten_host_pools") = static_cast<bool>(PINPOOL_HAS_ATEN_HOST_POOLS);
  m.def("activate", &pp::activate);
  m.def("is_active", [] { return pp::active_allocator() != nullptr; });
  m.def("install_pageable_copy_guard", &pp::install_pageable_copy_guard);
  m.def("registered_is_ours", [] {
    auto* ours = pp::active_allocator();
    return ours != nullptr && at::getHostAllocator(at::kPrivateUse1) == ours;
  });
  m.def("current_capture_info", &pp::current_capture_info);
  m.def("seq", [] { return pp::impl().seq(); });
  m.def("begin_capture", &pp::begin_capture, py::call_guard<py::gil_scoped_release>());
  m.def("set_capture_model", &pp::set_capture_model);
  m.def("capture_active", &pp::capture_active);
  m.def("watch_capture", &pp::watch_capture);
  m.def("forget_capture", &pp::forget_capture);
  m.def("captures_since", [](uint64_t seq) { return pp::impl().captures_since(seq); });
  m.def(
      "end_capture",
      [](uint64_t token, const pp::PoolId& bind) {
        pp::forget_capture(token);
        pp::impl().end_capture_token(token, pp::to_id(bind));
      },
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "abort_capture",
      [](uint64_t token) {
        pp::forget_capture(token);
        pp::impl().abort_capture(token);
      },
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "abort_captures_since", [](uint64_t seq) { return pp::impl().abort_captures_since(seq); },
      py::call_guard<py::gil_scoped_release>());
  m.def("ended_since", [](uint64_t seq) {
    py::list out;
    for (auto id : pp::impl().ended_since(seq)) out.append(py::make_tuple(id.first, id.second));
    return out;
  });
  m.def(
      "release_pool", [](const pp::PoolId& id) { pp::impl().release_pool(pp::to_id(id)); },
      py::call_guard<py::gil_scoped_release>());
  // On every replay: cheap, keeps the GIL (mutex_ holders never take it).
  m.def("note_replay", [](const pp::PoolId& id) { pp::impl().note_replay(pp::to_id(id)); });
  m.def(
      "process_pending", [] { pp::impl().process_pending(); },
      py::call_guard<py::gil_scoped_release>());
  m.def("pool_stats", &pp::pool_stats);
}
