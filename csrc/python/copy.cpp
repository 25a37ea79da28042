// The copy layer's binding: the pageable copy guard (Note [Pageable copy guard]).
#include "copy/pageable_copy_guard.h"
#include "python/bindings.h"

namespace torch_npu_pinpool {

void bind_copy(py::module_& m) {
  m.def("install_pageable_copy_guard", &install_pageable_copy_guard);
}

}  // namespace torch_npu_pinpool
