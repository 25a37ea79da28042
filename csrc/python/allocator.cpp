// The allocator's bindings: what the build is, prepare / activate, deferred work, block states,
// and the graph calls of Note [Graph handles] (only _hooks.py and __init__.py make them) with the
// graph pools' stats. One file for both layers: each call is one of PinPoolHostAllocatorImpl's,
// and core/pin_pool_allocator.h is the costliest header a binding file parses.
#include "core/pin_pool_allocator.h"
#include "python/bindings.h"

namespace torch_npu_pinpool {

PinPoolHostAllocatorImpl& active_impl() {
  auto* allocator = active_allocator();
  TORCH_CHECK(allocator != nullptr, "torch_npu_pinpool is not active; call activate() first.");
  return allocator->impl();
}

void bind_allocator(py::module_& m) {
  m.attr("built_with_torch") =
      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  m.attr("aten_host_pools") = static_cast<bool>(PINPOOL_HAS_ATEN_HOST_POOLS);
  m.def("prepare", [] { prepare(); });
  m.def("activate", &activate);
  m.def("is_active", &is_registered);
  m.def("registered_is_ours", [] {
    auto* ours = active_allocator();
    return ours != nullptr && at::getHostAllocator(at::kPrivateUse1) == ours;
  });
  m.def("process_pending", [] { active_impl().process_pending(); }, release_gil_in_pass());
  // Note [Block states]
  m.def("block_state", [](uintptr_t ptr) -> py::object {
    const char* state = active_impl().block_state(reinterpret_cast<const void*>(ptr));
    return state == nullptr ? py::object(py::none()) : py::object(py::str(state));
  });
}

// The graph layer.
namespace {

py::list pool_stats() {
  using namespace py::literals;
  py::list out;
  for (const auto& p : active_impl().pool_info()) {
    out.append(py::dict("id"_a = py::make_tuple(p.id.first, p.id.second),
                        "device"_a = static_cast<int>(p.device), "graphs"_a = p.graphs,
                        "capturing"_a = p.capturing, "released"_a = p.released,
                        "blocks"_a = p.blocks, "bytes_held"_a = p.bytes_held,
                        "bytes_in_use"_a = p.bytes_in_use, "adopted_blocks"_a = p.adopted_blocks));
  }
  return out;
}

}  // namespace

void bind_graphs(py::module_& m) {
  m.def(
      "graph_begin", [](MempoolId pool) { return active_impl().graph_begin(pool); },
      release_gil_in_pass());
  m.def("graph_capturing", [](uint64_t h) { active_impl().graph_capturing(h); });
  m.def(
      "graph_begin_failed", [](uint64_t h) { return active_impl().capture_failed(h, false); },
      release_gil_in_pass());
  m.def("graph_end", [](uint64_t h, MempoolId pool) { active_impl().graph_end(h, pool); });
  m.def(
      "graph_end_failed", [](uint64_t h) { return active_impl().capture_failed(h, true); },
      release_gil_in_pass());
  m.def("graph_replay", [](uint64_t h) { active_impl().graph_replay(h); });
  m.def("hooked_reset", &PinPoolHostAllocatorImpl::hooked_reset);  // Note [Releases ...]
  // graph_died keeps the GIL; the pass it asks for records events, without it.
  m.def("graph_died", [](uint64_t h) {
    active_impl().graph_died(h);
    py::gil_scoped_release no_gil;
    ForkGate::Pass pass;
    active_impl().process_pending();
  });
  m.def("pool_stats", &pool_stats);
}

}  // namespace torch_npu_pinpool
