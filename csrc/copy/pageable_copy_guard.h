// The pageable copy guard (see Note [Pageable copy guard] in pageable_copy_guard.cpp).
#pragma once

namespace torch_npu_pinpool {

// Puts the guard in front of torch_npu's aten::copy_ kernel for PrivateUse1 (once). Returns
// whether it is installed: false on torch < 2.10 or when torch_npu registered no copy_.
bool install_pageable_copy_guard();

// With the audit report on and the guard off: the same wrapper without the refusal, so the
// audit learns each copy's direction (Note [Copy direction], audit.h). Same return value.
bool install_copy_direction_scope();

}  // namespace torch_npu_pinpool
