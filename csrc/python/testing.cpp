// The testing layer's bindings: which sanitizers the build has, and in a sanitized build
// (setup.py: TORCH_NPU_PINPOOL_SANITIZE) its injected defects.
#include "python/bindings.h"
#ifdef PINPOOL_SANITIZERS
#include "testing/sanitizer_selftest.h"
#define PINPOOL_SANITIZER_NAMES PINPOOL_SANITIZERS
#else
#define PINPOOL_SANITIZER_NAMES ""
#endif

namespace torch_npu_pinpool {

void bind_testing(py::module_& m) {
  m.attr("sanitizers") = std::string(PINPOOL_SANITIZER_NAMES);
#ifdef PINPOOL_SANITIZERS
  // Note [Injected sanitizer reports]. Without the GIL: the data race runs two threads.
  m.def("inject_sanitizer_report", &inject_sanitizer_report, release_gil());
#endif
}

}  // namespace torch_npu_pinpool
