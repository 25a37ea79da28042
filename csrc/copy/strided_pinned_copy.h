// Captured copies between the NPU and a non-contiguous pinned view, staged through a contiguous
// pinned block by a captured host function (Note [Strided pinned copies in capture]).
#pragma once

#include <ATen/core/Tensor.h>

#include "runtime/npu_runtime.h"

namespace torch_npu_pinpool {

class PinPoolHostAllocatorImpl;

// Whether torch_npu would move the host side of this CPU <-> NPU copy through a temporary of
// its own (pageable memory): the host side, as the copy sees it (a broadcast source expanded
// to the destination's shape), is not contiguous.
bool host_side_needs_staging(const at::Tensor& self, const at::Tensor& src);

// Copies `src` into `self` (non_blocking; one pinned on the host, one on the NPU) while
// `stream`, the NPU side's current stream, captures: staged, so that every replay moves the
// view's bytes as they are then. Throws before anything is enqueued when it cannot, naming the
// fix.
void staged_copy_in_capture(PinPoolHostAllocatorImpl& impl, at::Tensor& self,
                            const at::Tensor& src, const Stream& stream);

}  // namespace torch_npu_pinpool
