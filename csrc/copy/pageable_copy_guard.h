// Note [Pageable copy guard] (pageable_copy_guard.cpp).
#pragma once

namespace torch_npu_pinpool {

// Whether it is installed (once): false on torch < 2.10 or without torch_npu's copy_.
bool install_pageable_copy_guard();
// The same wrapper without the refusal, for the copy observer (Note [Copy direction]); false
// without one.
bool install_copy_direction_scope();

}  // namespace torch_npu_pinpool
