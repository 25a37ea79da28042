// The allocator's bindings: what the build is, prepare / activate, deferred work, block states.
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
  m.def("process_pending", [] { active_impl().process_pending(); }, release_gil());
  // Note [Block states]
  m.def("block_state", [](uintptr_t ptr) -> py::object {
    const char* state = active_impl().block_state(reinterpret_cast<const void*>(ptr));
    return state == nullptr ? py::object(py::none()) : py::object(py::str(state));
  });
}

}  // namespace torch_npu_pinpool
