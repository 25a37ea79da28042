// Note [Strided pinned copies in capture] (strided_pinned_copy.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include "runtime/npu_runtime.h"

namespace torch_npu_pinpool {

class PinPoolHostAllocatorImpl;

// Whether the host side, as the copy sees it (a source expanded), is not contiguous.
bool host_side_needs_staging(const at::Tensor& self, const at::Tensor& src);

// Throws before anything is enqueued when it cannot, naming the fix.
void staged_copy_in_capture(PinPoolHostAllocatorImpl& impl, at::Tensor& self, const at::Tensor& src,
                            const Stream& stream);

}  // namespace torch_npu_pinpool
