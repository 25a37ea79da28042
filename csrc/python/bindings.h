// torch_npu_pinpool._C's bindings by layer: one bind_* a layer, each called once by module.cpp's
// PYBIND11_MODULE; those of the layers with a file of their own are declared here.
#pragma once

// pybind11 alone, not <torch/extension.h> (torch/all.h: some 20 s of parsing in every file that
// includes it): no binding takes or returns a torch type, so none needs torch's type casters.
// Each file includes the headers of its own layer.
#include <pybind11/pybind11.h>

#include "runtime/fork_gate.h"

namespace py = pybind11;

namespace torch_npu_pinpool {

class PinPoolHostAllocatorImpl;  // core/pin_pool_allocator.h

// Calls that may record or wait for events release the GIL (torch_npu's task queue may take
// it); mutex_ holders never take it. A call into the registered allocator is a Pass of Note [Fork
// gate] by itself; one into the implementation is made in one (release_gil_in_pass).
using release_gil = py::call_guard<py::gil_scoped_release>;
using release_gil_in_pass = py::call_guard<py::gil_scoped_release, ForkGate::Pass>;

// The active allocator's implementation; raises until prepare().
PinPoolHostAllocatorImpl& active_impl();

void bind_allocator(py::module_& m);   // allocator.cpp: the allocator, its blocks
void bind_graphs(py::module_& m);      // allocator.cpp: Note [Graph handles], the graph pools
void bind_host_cache(py::module_& m);  // host_cache_api.cpp: the registered allocator's cache
void bind_report(py::module_& m);      // report.cpp: the report, off or compiled out

}  // namespace torch_npu_pinpool
