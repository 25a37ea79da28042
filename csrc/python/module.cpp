// torch_npu_pinpool._C: private bindings (typed in torch_npu_pinpool/_C.pyi), a bind_* a layer.
// The PYBIND11_MODULE, and the two layers of one call each: the copy guard and the sanitizer
// self-test. The other layers' are in the files bindings.h names (each file compiled costs some
// 5 s of pybind11 alone).
#include "copy/pageable_copy_guard.h"
#include "python/bindings.h"
#ifdef PINPOOL_SANITIZERS  // setup.py: TORCH_NPU_PINPOOL_SANITIZE
#include "testing/sanitizer_selftest.h"
#define PINPOOL_SANITIZER_NAMES PINPOOL_SANITIZERS
#else
#define PINPOOL_SANITIZER_NAMES ""
#endif

namespace torch_npu_pinpool {
namespace {

// The copy layer: Note [Pageable copy guard].
void bind_copy(py::module_& m) {
  m.def("install_pageable_copy_guard", &install_pageable_copy_guard);
}

// The testing layer: which sanitizers the build has, and in a sanitized build its injected
// defects.
void bind_testing(py::module_& m) {
  m.attr("sanitizers") = std::string(PINPOOL_SANITIZER_NAMES);
#ifdef PINPOOL_SANITIZERS
  // Note [Injected sanitizer reports]. Without the GIL: the data race runs two threads.
  m.def("inject_sanitizer_report", &inject_sanitizer_report, release_gil());
#endif
}

}  // namespace
}  // namespace torch_npu_pinpool

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace pp = torch_npu_pinpool;
  pp::bind_allocator(m);
  pp::bind_graphs(m);
  pp::bind_copy(m);
  pp::bind_host_cache(m);
  pp::bind_report(m);
  pp::bind_testing(m);
}
