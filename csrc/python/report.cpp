// The report's bindings (TORCH_NPU_PINPOOL_REPORT, csrc/audit/), and the one place that installs
// the observers (Note [Observer hooks]). enable_report comes before activate(); a build without
// the audit sources (setup.py: TORCH_NPU_PINPOOL_AUDIT=0) has audit_built and report_enabled only.
#include <pybind11/stl.h>  // enable_report's and report_data's vectors

#include "copy/pageable_copy_guard.h"
#include "core/pin_pool_allocator.h"
#include "python/bindings.h"
#ifndef PINPOOL_AUDIT
#define PINPOOL_AUDIT 1  // setup.py: TORCH_NPU_PINPOOL_AUDIT
#endif
#if PINPOOL_AUDIT
#include "audit/audit.h"
#include "audit/ending_signals.h"
#endif

namespace torch_npu_pinpool {

#if PINPOOL_AUDIT
namespace {

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

// Note [Audited replay]: the Python hook calls begin, the graph's own replay, graph_replay (Note
// [Shared fences]), then end with what begin returned (Note [What written_while_queued sees]).
// begin returns None when there is nothing to compare or track - a graph with no pinned block, or
// a replay left out by sampling of a graph that writes none - so such a replay costs no end call
// and no object; else a capsule owning the ReplayCheck, which end launches (a capsule dropped
// without end - the replay raised - undoes begin).
py::object audit_replay_begin(uint64_t handle) {
  std::unique_ptr<ReplayCheck> check = audit().replay_begin(handle);
  if (check == nullptr) {
    return py::none();
  }
  return py::capsule(check.release(), "torch_npu_pinpool.ReplayCheck", [](PyObject* capsule) {
    delete static_cast<ReplayCheck*>(
        PyCapsule_GetPointer(capsule, "torch_npu_pinpool.ReplayCheck"));
  });
}

void audit_replay_end(const py::capsule& capsule) {
  auto* begun = capsule.get_pointer<ReplayCheck>();
  void* check = begun->release();  // the capsule keeps an empty ReplayCheck
  TORCH_CHECK(check != nullptr, "torch_npu_pinpool: audit_replay_end was given a spent check");
  auto replay = std::make_unique<ReplayCheck>(check, begun->stream());
  py::gil_scoped_release no_gil;  // the probe goes through torch_npu's task queue
  audit().replay_end(std::move(replay));
}

// Note [Observer hooks]: the one place that installs the observers, before prepare().
void enable_report(std::vector<std::string> library_dirs, std::string cwd, uint32_t sample) {
  Audit::enable(std::move(library_dirs), std::move(cwd), sample);
  set_allocator_observer(Audit::get());
  set_copy_observer(Audit::get());
}

}  // namespace

void bind_report(py::module_& m) {
  m.attr("audit_built") = true;
  m.def("enable_report", &enable_report);
  m.def("report_enabled", [] { return Audit::get() != nullptr; });
  py::tuple kinds(kHazardKinds);  // the one list of kinds; _report.py's tables follow it
  for (int k = 0; k < kHazardKinds; ++k) {
    kinds[k] = hazard_name(static_cast<Hazard>(k));
  }
  m.attr("hazard_kinds") = kinds;
  m.def("install_copy_direction_scope", &install_copy_direction_scope);
  m.def("audit_replay_begin", &audit_replay_begin);
  m.def("audit_replay_end", &audit_replay_end);
  m.def("audit_host_function", [] { audit().note_host_function(); });
  m.def("report_data", &report_data);
  m.def("report_checks", &report_checks);
  m.def("audit_sizes", &audit_sizes);
  m.def("report_close", [] { audit().close(); });
  m.def("route_to_main_thread", &route_to_main_thread);  // Note [Ending signals reach ...]
}
#else
void bind_report(py::module_& m) {
  m.attr("audit_built") = false;
  m.def("report_enabled", [] { return false; });
}
#endif

}  // namespace torch_npu_pinpool
