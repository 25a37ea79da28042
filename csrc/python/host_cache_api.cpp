// The registered host allocator's cache and statistics, for the torch_npu builds whose Python API
// has none (2.8.0.post2, 2.9.0: no torch_npu.npu.host_empty_cache / host_memory_stats; 2.8.0.post5
// and 2.9.1 add them). Each call goes through ATen's host-allocator registry to whatever is
// registered for PrivateUse1 - the plugin's allocator, or torch_npu's own with the plugin off - as
// torch_npu's later builds do (torch_npu/csrc/npu/Module.cpp, THNPModule_npu_hostMemoryStats).
#include <ATen/core/CachingHostAllocator.h>

#include "python/bindings.h"
#include "runtime/version_shim.h"

namespace torch_npu_pinpool {
namespace {

at::HostAllocator& registered() {
  at::HostAllocator* allocator = at::getHostAllocator(at::kPrivateUse1);
  TORCH_CHECK(allocator != nullptr,
              "torch_npu_pinpool: no host allocator is registered for the NPU; import torch_npu "
              "first.");
  return *allocator;
}

py::dict stat_dict(const c10::CachingAllocator::Stat& stat) {
  using namespace py::literals;
  return py::dict("current"_a = stat.current, "peak"_a = stat.peak, "allocated"_a = stat.allocated,
                  "freed"_a = stat.freed);
}

py::dict duration_dict(const c10::CachingAllocator::DurationStat& stat) {
  using namespace py::literals;
  const int64_t avg = stat.count == 0 ? 0 : stat.total / stat.count;
  return py::dict("total"_a = stat.total, "max"_a = stat.max, "min"_a = stat.min,
                  "count"_a = stat.count, "avg"_a = avg);
}

// Nested, with the field names of the running torch's HostStats, as torch_npu's
// _npu_hostMemoryStats() returns it; the Python side flattens it to "name.current" keys.
py::dict host_memory_stats() {
  at::HostStats stats;
  {
    py::gil_scoped_release no_gil;
    stats = registered().get_stats();
  }
  py::dict out;
#if PINPOOL_HOST_STATS_2_10
  out["active_requests"] = stat_dict(stats.active_requests);
  out["active_bytes"] = stat_dict(stats.active_bytes);
  out["allocations"] = stat_dict(stats.allocations);
  out["allocated_bytes"] = stat_dict(stats.allocated_bytes);
#else
  out["allocation"] = stat_dict(stats.allocation);
  out["segment"] = stat_dict(stats.segment);
  out["allocated_bytes"] = stat_dict(stats.allocated_bytes);
  out["reserved_bytes"] = stat_dict(stats.reserved_bytes);
#endif
  out["host_alloc_time"] = duration_dict(stats.host_alloc_time);
  out["host_free_time"] = duration_dict(stats.host_free_time);
  out["num_host_alloc"] = stats.num_host_alloc;
  out["num_host_free"] = stats.num_host_free;
  return out;
}

}  // namespace

void bind_host_cache(py::module_& m) {
  m.def("registered_host_empty_cache", [] { registered().empty_cache(); }, release_gil());
  m.def("registered_host_memory_stats", &host_memory_stats);
  m.def(
      "registered_host_reset_accumulated", [] { registered().reset_accumulated_stats(); },
      release_gil());
  m.def("registered_host_reset_peak", [] { registered().reset_peak_stats(); }, release_gil());
}

}  // namespace torch_npu_pinpool
