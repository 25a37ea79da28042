// Captured copies between the NPU and a non-contiguous pinned view (pinned[:, ::2], a
// transpose, a broadcast source): the pageable copy guard routes them here while a capture runs
// on the copy's stream.
//
// Note [Strided pinned copies in capture]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu copies only contiguous host memory to or from the NPU. For any other host side it
// makes a contiguous temporary (Tensor::contiguous() of the view, or empty_like of it) - plain
// pageable memory - and copies that (copy_h2d_baseformat / copy_d2h_baseformat in
// CopyKernelOpApi.cpp). Eager, the copy then runs synchronously; in a
// capture the runtime refuses the async copy of pageable memory (107000) and torch_npu reports
// "The Inner error is reported as above ... kind=1". Had it been taken, the replay would read
// the temporary: the view's bytes at capture time, not at replay time.
//
// So for a non_blocking copy on a stream that a capture the registry knows runs on, the guard
// stages the host side itself, through S, a contiguous pinned block of the graph's pool
// (allocated on the capturing stream):
//   host -> NPU:  [host function: gather the view into S]  [torch_npu's copy S -> NPU]
//   NPU -> host:  [torch_npu's copy NPU -> S]  [host function: scatter S into the view]
// A host function (aclrtLaunchHostFunc) is a stream task: it runs once the stream's earlier
// tasks completed and later tasks wait until it returns (CANN api_ref 12_execution_control.md,
// "aclrtLaunchHostFunc"; dev_guide 03-02_stream_management.md), and a capturing stream captures
// it like any task (hicann/runtime ApiImpl::CallbackLaunchWithEvent takes its capture branch
// when the stream IsCapturing; torch_npu's own NPUGraph tensor printing relies on it). Every
// replay therefore gathers / scatters in stream order, moving the view's bytes as they are at
// replay time - what the captured copy of a contiguous pinned tensor does. The graph owns the
// view's block and S (Note [Graph ownership of blocks]) and the host function's argument
// (CapturedGraph::replay_state) until its replays are over. The price: one host function per
// staged copy on every replay (a strided memcpy on the runtime's callback thread).
//
// Refused, before anything is enqueued, with an error naming the fix (a contiguous pinned
// staging buffer filled before each replay): a capture the registry does not know (begun
// before activation or by raw ACL: no graph to own the argument), and a view with the
// conjugate or negative bit (torch_npu applies those on the side it copies into; resolve them
// first). A destination whose elements overlap is refused as ATen refuses it everywhere.
// Blocking copies are left to torch_npu: a blocking copy cannot be captured, contiguous or not.
#include "copy/strided_pinned_copy.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch_npu/csrc/core/npu/NPUGuard.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/pin_pool_allocator.h"

namespace torch_npu_pinpool {
namespace {

constexpr const char* kStagingFix =
    "Copy from (or into) a contiguous pinned tensor instead: a pinned staging buffer "
    "(`buf = torch.empty(shape, dtype=..., pin_memory=True)`) that you fill before each "
    "replay (`buf.copy_(view)`) and copy from inside the capture (or, for a copy to the host, "
    "copy into inside the capture and read after the replay).";

// A copy between two host tensors of one shape, by raw addresses: the gather or scatter of a
// staged copy. Dimensions of size 1 are dropped and dimensions that are contiguous in both are
// merged, so a row-strided view copies whole rows.
class StridedHostCopy {
 public:
  StridedHostCopy(const at::Tensor& dst, const at::Tensor& src)
      : dst_(static_cast<char*>(dst.data_ptr())),
        src_(static_cast<const char*>(src.const_data_ptr())),
        item_(src.element_size()) {
    for (int64_t d = 0; d < dst.dim(); ++d) {
      if (dst.size(d) == 1) {
        continue;
      }
      const Dim dim{dst.size(d), dst.stride(d) * item_, src.stride(d) * item_};
      if (!dims_.empty() && dims_.back().dst_stride == dim.dst_stride * dim.size &&
          dims_.back().src_stride == dim.src_stride * dim.size) {
        dims_.back() = {dims_.back().size * dim.size, dim.dst_stride, dim.src_stride};
      } else {
        dims_.push_back(dim);
      }
    }
    // The innermost dimension, if contiguous on both sides, is one memcpy.
    if (!dims_.empty() && dims_.back().dst_stride == item_ && dims_.back().src_stride == item_) {
      run_ = dims_.back().size * item_;
      dims_.pop_back();
    } else {
      run_ = item_;
    }
  }

  // On the runtime's host-function thread, at every replay.
  static void run(void* self) { static_cast<const StridedHostCopy*>(self)->copy(); }

 private:
  struct Dim {
    int64_t size;
    int64_t dst_stride;  // bytes
    int64_t src_stride;  // bytes
  };

  void copy() const {
    std::vector<int64_t> index(dims_.size(), 0);
    char* dst = dst_;
    const char* src = src_;
    for (;;) {
      std::memcpy(dst, src, run_);
      size_t d = dims_.size();
      for (; d > 0; --d) {  // advance the odometer from the innermost dimension
        const Dim& dim = dims_[d - 1];
        if (++index[d - 1] < dim.size) {
          dst += dim.dst_stride;
          src += dim.src_stride;
          break;
        }
        index[d - 1] = 0;
        dst -= dim.dst_stride * (dim.size - 1);
        src -= dim.src_stride * (dim.size - 1);
      }
      if (d == 0) {
        return;
      }
    }
  }

  char* const dst_;
  const char* const src_;
  const int64_t item_;
  std::vector<Dim> dims_;  // outermost first, without the innermost run
  int64_t run_{0};         // bytes per memcpy
};

std::pair<void*, void*> block_of(const at::Tensor& t) {
  const c10::Storage& storage = t.storage();
  return {const_cast<void*>(storage.data()), storage.data_ptr().get_context()};
}

}  // namespace

bool host_side_needs_staging(const at::Tensor& self, const at::Tensor& src) {
  if (self.is_cpu()) {
    return !self.is_contiguous();  // NPU -> host: the destination
  }
  if (!at::is_expandable_to(src.sizes(), self.sizes())) {
    return false;  // torch_npu raises its own error for that
  }
  return !src.expand(self.sizes()).is_contiguous();
}

void staged_copy_in_capture(PinPoolHostAllocatorImpl& impl, at::Tensor& self,
                            const at::Tensor& src, const Stream& stream) {
  const bool to_device = src.is_cpu();
  const at::Tensor& host = to_device ? src : self;
  TORCH_CHECK(!host.is_conj() && !host.is_neg(),
              "torch_npu_pinpool: cannot capture a copy ", to_device ? "from" : "into",
              " a non-contiguous pinned view with the ", host.is_conj() ? "conjugate" : "negative",
              " bit set (stream ", stream.id(), " is capturing an ACLGraph). ", kStagingFix,
              " Nothing was enqueued: the capture is still underway.");
  if (!to_device) {
    at::assert_no_internal_overlap(self);
  }
  c10_npu::NPUGuard device(stream.device());  // `stream` is current: S comes from the graph's pool
  const at::Tensor view = to_device ? src.expand(self.sizes()) : self;
  at::Tensor staging = at::empty(self.sizes(), host.options().pinned_memory(true));
  auto copy = to_device ? std::make_shared<StridedHostCopy>(staging, view)
                        : std::make_shared<StridedHostCopy>(view, staging);
  TORCH_CHECK(impl.keep_for_replays(stream, {block_of(view), block_of(staging)}, copy),
              "torch_npu_pinpool: cannot capture a copy ", to_device ? "from" : "into",
              " a non-contiguous pinned view on stream ", stream.id(),
              ": its capture was begun before torch_npu_pinpool was activated (or not through "
              "NPUGraph), so no graph can own the gather that every replay must run. ",
              kStagingFix, " Nothing was enqueued: the capture is still underway.");
  if (to_device) {
    const int rc = launch_host_func(stream, &StridedHostCopy::run, copy.get());
    TORCH_CHECK(rc == 0, "torch_npu_pinpool: aclrtLaunchHostFunc failed (", rc,
                ") while capturing the gather of a non-contiguous pinned view. ", kStagingFix);
    self.copy_(staging, /*non_blocking=*/true);
  } else {
    staging.copy_(src, /*non_blocking=*/true);
    const int rc = launch_host_func(stream, &StridedHostCopy::run, copy.get());
    TORCH_CHECK(rc == 0, "torch_npu_pinpool: aclrtLaunchHostFunc failed (", rc,
                ") while capturing the scatter into a non-contiguous pinned view. ", kStagingFix);
  }
}

}  // namespace torch_npu_pinpool
