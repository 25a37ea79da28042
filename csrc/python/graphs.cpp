// The graph layer's bindings: the graph calls of Note [Graph handles] (only _hooks.py and
// __init__.py make them) and the graph pools' stats.
#include "python/bindings.h"

namespace torch_npu_pinpool {
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
      "graph_begin", [](MempoolId pool) { return active_impl().graph_begin(pool); }, release_gil());
  m.def("graph_capturing", [](uint64_t h) { active_impl().graph_capturing(h); });
  m.def(
      "graph_begin_failed", [](uint64_t h) { return active_impl().capture_failed(h, false); },
      release_gil());
  m.def("graph_end", [](uint64_t h, MempoolId pool) { active_impl().graph_end(h, pool); });
  m.def(
      "graph_end_failed", [](uint64_t h) { return active_impl().capture_failed(h, true); },
      release_gil());
  m.def("graph_replay", [](uint64_t h) { active_impl().graph_replay(h); });
  m.def("hooked_reset", &PinPoolHostAllocatorImpl::hooked_reset);  // Note [Releases ...]
  // graph_died keeps the GIL; the pass it asks for records events, without it.
  m.def("graph_died", [](uint64_t h) {
    active_impl().graph_died(h);
    py::gil_scoped_release no_gil;
    active_impl().process_pending();
  });
  m.def("pool_stats", &pool_stats);
}

}  // namespace torch_npu_pinpool
