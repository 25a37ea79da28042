// torch_npu_pinpool._C: private bindings; the graph calls are Note [Graph handles]'s.
#include <torch/extension.h>

#include "copy/pageable_copy_guard.h"
#include "core/pin_pool_allocator.h"
#include "runtime/host_cache_api.h"
#ifndef PINPOOL_AUDIT
#define PINPOOL_AUDIT 1  // setup.py: TORCH_NPU_PINPOOL_AUDIT
#endif
#if PINPOOL_AUDIT
#include "audit/audit.h"
#endif
#ifdef PINPOOL_SANITIZERS  // setup.py: TORCH_NPU_PINPOOL_SANITIZE
#include "testing/sanitizer_selftest.h"
#define PINPOOL_SANITIZER_NAMES PINPOOL_SANITIZERS
#else
#define PINPOOL_SANITIZER_NAMES ""
#endif

namespace torch_npu_pinpool {
namespace {

PinPoolHostAllocatorImpl& impl() {
  auto* allocator = active_allocator();
  TORCH_CHECK(allocator != nullptr, "torch_npu_pinpool is not active; call activate() first.");
  return allocator->impl();
}

py::list pool_stats() {
  using namespace py::literals;
  py::list out;
  for (const auto& p : impl().pool_info()) {
    out.append(py::dict("id"_a = py::make_tuple(p.id.first, p.id.second),
                        "device"_a = static_cast<int>(p.device), "graphs"_a = p.graphs,
                        "capturing"_a = p.capturing, "released"_a = p.released,
                        "blocks"_a = p.blocks, "bytes_held"_a = p.bytes_held,
                        "bytes_in_use"_a = p.bytes_in_use, "adopted_blocks"_a = p.adopted_blocks));
  }
  return out;
}

#if PINPOOL_AUDIT
Audit& audit() {
  Audit* audit = Audit::get();
  TORCH_CHECK(audit != nullptr,
              "torch_npu_pinpool: the report is off; set TORCH_NPU_PINPOOL_REPORT=1 (or a path) "
              "before the process starts.");
  return *audit;
}

// The report's raw data (_report.py formats it).
py::list report_data(double wait_s) {
  using namespace py::literals;
  py::list out;
  std::vector<HazardTally> tallies;
  {
    py::gil_scoped_release no_gil;  // their probes never take the GIL
    tallies = audit().tallies(wait_s);
  }
  for (const auto& tally : tallies) {
    py::dict shapes;
    for (const auto& [shape, count] : tally.shapes) {
      shapes[py::str(shape)] = count;
    }
    out.append(py::dict("kind"_a = hazard_name(tally.kind), "count"_a = tally.count,
                        "bytes"_a = tally.bytes, "sites"_a = tally.sites, "shapes"_a = shapes));
  }
  return out;
}

py::dict report_checks() {
  using namespace py::literals;
  const CheckCounts c = audit().check_counts();
  return py::dict("copies"_a = c.copies, "replays"_a = c.replays, "unchecked"_a = c.unchecked,
                  "pending"_a = c.pending, "skipped"_a = c.skipped);
}

// Note [Bounded audit state]: the size of each part of the audit's record.
py::dict audit_sizes() {
  using namespace py::literals;
  AuditSizes z;
  {
    py::gil_scoped_release no_gil;  // sizes() takes the GIL itself, after the audit's mutex
    z = audit().sizes();
  }
  return py::dict("blocks"_a = z.blocks, "graphs"_a = z.graphs, "sites"_a = z.sites,
                  "code_objects"_a = z.code_objects, "remembered_pools"_a = z.remembered_pools,
                  "in_flight"_a = z.in_flight);
}

// graph_replay, then the replay checked (Note [What written_while_queued sees]).
void audit_replay(uint64_t handle, const py::function& replay) {
  impl().graph_replay(handle);
  Audit& a = audit();
  std::unique_ptr<ReplayCheck> check = a.replay_begin(handle);
  replay();
  if (check != nullptr) {
    py::gil_scoped_release no_gil;  // the probe goes through torch_npu's task queue
    a.replay_end(std::move(check));
  }
}

void def_audit(py::module_& m) {
  // Note [Observer hooks]: the one place that installs them, before prepare().
  m.def("enable_report",
        [](std::vector<std::string> library_dirs, std::string cwd, uint32_t sample) {
          Audit::enable(std::move(library_dirs), std::move(cwd), sample);
          set_allocator_observer(Audit::get());
          set_copy_observer(Audit::get());
        });
  m.def("report_enabled", [] { return Audit::get() != nullptr; });
  py::tuple kinds(kHazardKinds);  // the one list of kinds; _report.py's tables follow it
  for (int k = 0; k < kHazardKinds; ++k) {
    kinds[k] = hazard_name(static_cast<Hazard>(k));
  }
  m.attr("hazard_kinds") = kinds;
  m.def("install_copy_direction_scope", &install_copy_direction_scope);
  m.def("audit_replay", &audit_replay);
  m.def("audit_host_function", [] { audit().note_host_function(); });
  m.def("report_data", &report_data);
  m.def("report_checks", &report_checks);
  m.def("audit_sizes", &audit_sizes);
  m.def("report_close", [] { audit().close(); });
}
#else
void def_audit(py::module_& m) {
  m.def("report_enabled", [] { return false; });
}
#endif

}  // namespace
}  // namespace torch_npu_pinpool

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace pp = torch_npu_pinpool;
  using release_gil = py::call_guard<py::gil_scoped_release>;
  m.attr("built_with_torch") =
      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  m.attr("aten_host_pools") = static_cast<bool>(PINPOOL_HAS_ATEN_HOST_POOLS);
  m.attr("sanitizers") = std::string(PINPOOL_SANITIZER_NAMES);
  m.attr("audit_built") = static_cast<bool>(PINPOOL_AUDIT);  // setup.py: TORCH_NPU_PINPOOL_AUDIT
#ifdef PINPOOL_SANITIZERS
  // Note [Injected sanitizer reports]. Without the GIL: the data race runs two threads.
  m.def("inject_sanitizer_report", &pp::inject_sanitizer_report, release_gil());
#endif
  m.def("prepare", [] { pp::prepare(); });
  m.def("activate", &pp::activate);
  m.def("is_active", &pp::is_registered);
  m.def("install_pageable_copy_guard", &pp::install_pageable_copy_guard);
  m.def("registered_is_ours", [] {
    auto* ours = pp::active_allocator();
    return ours != nullptr && at::getHostAllocator(at::kPrivateUse1) == ours;
  });
  // Calls that may record or wait for events release the GIL (torch_npu's task queue may take
  // it); mutex_ holders never take it.
  m.def(
      "graph_begin", [](pp::MempoolId pool) { return pp::impl().graph_begin(pool); },
      release_gil());
  m.def("graph_capturing", [](uint64_t h) { pp::impl().graph_capturing(h); });
  m.def(
      "graph_begin_failed", [](uint64_t h) { return pp::impl().capture_failed(h, false); },
      release_gil());
  m.def("graph_end", [](uint64_t h, pp::MempoolId pool) { pp::impl().graph_end(h, pool); });
  m.def(
      "graph_end_failed", [](uint64_t h) { return pp::impl().capture_failed(h, true); },
      release_gil());
  m.def("graph_replay", [](uint64_t h) { pp::impl().graph_replay(h); });
  m.def("hooked_reset", &pp::PinPoolHostAllocatorImpl::hooked_reset);  // Note [Releases ...]
  // graph_died keeps the GIL; the pass it asks for records events, without it.
  m.def("graph_died", [](uint64_t h) {
    pp::impl().graph_died(h);
    py::gil_scoped_release no_gil;
    pp::impl().process_pending();
  });
  m.def("process_pending", [] { pp::impl().process_pending(); }, release_gil());
  m.def("pool_stats", &pp::pool_stats);
  // Note [Block states]
  m.def("block_state", [](uintptr_t ptr) -> py::object {
    const char* state = pp::impl().block_state(reinterpret_cast<const void*>(ptr));
    return state == nullptr ? py::object(py::none()) : py::object(py::str(state));
  });
  // For builds without torch_npu.npu.host_empty_cache / host_memory_stats; plugin on or off.
  pp::def_host_cache_api(m);
  // enable_report comes before activate(); an audit-off build has report_enabled only.
  pp::def_audit(m);
}
