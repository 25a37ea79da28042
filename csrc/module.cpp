// Python bindings: torch_npu_pinpool._C. Private API; the package wraps it. The graph calls
// are the ones of Note [Graph handles] (capture_registry.cpp), one each; _hooks.py calls them.
#include <torch/extension.h>

#include "copy/pageable_copy_guard.h"
#include "core/pin_pool_allocator.h"
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

using PoolId = std::tuple<uint64_t, uint64_t>;

MempoolId to_id(const PoolId& id) { return {std::get<0>(id), std::get<1>(id)}; }

PinPoolHostAllocatorImpl& impl() {
  auto* allocator = active_allocator();
  TORCH_CHECK(allocator != nullptr, "torch_npu_pinpool is not active; call activate() first.");
  return allocator->impl();
}

py::list pool_stats() {
  py::list out;
  for (const auto& info : impl().pool_info()) {
    py::dict d;
    d["id"] = py::make_tuple(info.id.first, info.id.second);
    d["device"] = static_cast<int>(info.device);
    d["graphs"] = info.graphs;
    d["capturing"] = info.capturing;
    d["released"] = info.released;
    d["blocks"] = info.blocks;
    d["bytes_held"] = info.bytes_held;
    d["bytes_in_use"] = info.bytes_in_use;
    d["adopted_blocks"] = info.adopted_blocks;
    out.append(d);
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

// The report's raw data (torch_npu_pinpool/_report.py adds `affects` and formats it).
py::list report_data(double wait_s) {
  py::list out;
  std::vector<HazardTally> tallies;
  {
    py::gil_scoped_release no_gil;  // waiting for checks: their probes never take the GIL
    tallies = audit().tallies(wait_s);
  }
  for (const auto& tally : tallies) {
    py::dict d;
    d["kind"] = hazard_name(tally.kind);
    d["count"] = tally.count;
    d["bytes"] = tally.bytes;
    d["sites"] = tally.sites;
    py::dict shapes;
    for (const auto& [shape, count] : tally.shapes) {
      shapes[py::str(shape)] = count;
    }
    d["shapes"] = shapes;
    out.append(d);
  }
  return out;
}

py::dict report_checks() {
  const CheckCounts counts = audit().check_counts();
  py::dict d;
  d["copies"] = counts.copies;
  d["replays"] = counts.replays;
  d["unchecked"] = counts.unchecked;
  d["pending"] = counts.pending;
  return d;
}

// NPUGraph.replay with the report on: Note [Graph handles]'s graph_replay, then the replay
// checked for written_while_queued (Note [What written_while_queued sees]).
void audit_replay(uint64_t handle, const py::function& replay) {
  impl().graph_replay(handle);
  Audit& a = audit();
  std::unique_ptr<ReplayCheck> check = a.replay_begin(handle);
  replay();
  py::gil_scoped_release no_gil;  // the probe goes through torch_npu's task queue
  a.replay_end(std::move(check));
}

void def_audit(py::module_& m) {
  m.def("enable_report", [](std::vector<std::string> library_dirs, std::string cwd) {
    Audit::enable(std::move(library_dirs), std::move(cwd));
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
  // Note [Graph handles]. Calls that may record or wait for events release the GIL (event
  // records go through torch_npu's task queue); graph_replay is on every replay and keeps it
  // (mutex_ holders never take the GIL).
  m.def("graph_begin", [](const pp::PoolId& pool) { return pp::impl().graph_begin(pp::to_id(pool)); },
        release_gil());
  m.def("graph_capturing", [](uint64_t h) { pp::impl().graph_capturing(h); });
  m.def("graph_begin_failed", [](uint64_t h) { return pp::impl().graph_begin_failed(h); },
        release_gil());
  m.def("graph_end", [](uint64_t h, const pp::PoolId& pool) {
    pp::impl().graph_end(h, pp::to_id(pool));
  });
  m.def("graph_end_failed", [](uint64_t h) { return pp::impl().graph_end_failed(h); },
        release_gil());
  m.def("graph_replay", [](uint64_t h) { pp::impl().graph_replay(h); });
  // graph_died, on every reset, keeps the GIL: it takes mutex_ and may free a released pool's
  // blocks to native, and neither path ever takes the GIL. The pass it may ask for records
  // events through torch_npu's task queue, so that runs without the GIL.
  m.def("graph_died", [](uint64_t h) {
    if (pp::impl().graph_died(h)) {
      py::gil_scoped_release no_gil;
      pp::impl().process_pending();
    }
  });
  m.def("process_pending", [] { pp::impl().process_pending(); }, release_gil());
  m.def("pool_stats", &pp::pool_stats);
  // Note [Block states]: the state of the block of ours at an address, or None.
  m.def("block_state", [](uintptr_t ptr) -> py::object {
    const char* state = pp::impl().block_state(reinterpret_cast<const void*>(ptr));
    return state == nullptr ? py::object(py::none()) : py::object(py::str(state));
  });
  // The audit report (audit.h); enable_report must come before activate(). A build without the
  // audit (TORCH_NPU_PINPOOL_AUDIT=0) has report_enabled only.
  pp::def_audit(m);
}
