// torch_npu_pinpool._C: private bindings (typed in torch_npu_pinpool/_C.pyi), one layer a file.
#include "python/bindings.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace pp = torch_npu_pinpool;
  pp::bind_allocator(m);
  pp::bind_graphs(m);
  pp::bind_copy(m);
  pp::bind_host_cache(m);
  pp::bind_report(m);
  pp::bind_testing(m);
}
