// CopyObserver: all the copy_ kernel wrapper (pageable_copy_guard.cpp) tells an observer, as
// AllocatorObserver is all the allocator tells one (Note [Observer hooks],
// core/allocator_observer.h).
#pragma once

#include <c10/util/FunctionRef.h>

#include <cstddef>

namespace at {
class Tensor;
}

namespace torch_npu_pinpool {

class CopyObserver {
 public:
  virtual ~CopyObserver() = default;
  // Runs `copy`, the kernel behind self.copy_(src), where the observer sees it (Note [Copy
  // direction]); returns what `copy` returns.
  virtual at::Tensor& observe_copy(at::Tensor& self, const at::Tensor& src,
                                   c10::function_ref<at::Tensor&()> copy) = 0;
  // A pageable copy refused during capture, before the refusal raises. Takes the GIL.
  virtual void note_pageable_copy(size_t bytes) = 0;
};

// Note [Observer hooks]: the observer of the wrapper installed from now on, and of its
// refusals; null: none.
void set_copy_observer(CopyObserver* observer);

}  // namespace torch_npu_pinpool
