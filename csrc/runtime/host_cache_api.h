// Bindings for the registered host allocator's cache and statistics (host_cache_api.cpp).
#pragma once

#include <torch/extension.h>

namespace torch_npu_pinpool {

// registered_host_empty_cache / _memory_stats / _reset_accumulated / _reset_peak.
void def_host_cache_api(py::module_& m);

}  // namespace torch_npu_pinpool
