// torch_npu_pinpool._C's bindings by layer: one bind_* per file of csrc/python/, each called
// once by module.cpp's PYBIND11_MODULE.
#pragma once

#include <torch/extension.h>

#include "core/pin_pool_allocator.h"

namespace torch_npu_pinpool {

// Calls that may record or wait for events release the GIL (torch_npu's task queue may take
// it); mutex_ holders never take it.
using release_gil = py::call_guard<py::gil_scoped_release>;

// The active allocator's implementation; raises until prepare().
PinPoolHostAllocatorImpl& active_impl();

void bind_allocator(py::module_& m);   // allocator.cpp: the allocator, its blocks
void bind_graphs(py::module_& m);      // graphs.cpp: Note [Graph handles], the graph pools
void bind_copy(py::module_& m);        // copy.cpp: Note [Pageable copy guard]
void bind_host_cache(py::module_& m);  // host_cache_api.cpp: the registered allocator's cache
void bind_report(py::module_& m);      // report.cpp: the report, off or compiled out
void bind_testing(py::module_& m);     // testing.cpp: sanitized builds' injected defects

}  // namespace torch_npu_pinpool
