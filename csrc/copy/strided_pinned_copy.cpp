// Note [Strided pinned copies in capture]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu copies a non-contiguous host side through a pageable temporary, which a capture
// rejects. So a non_blocking one is staged through S, a pinned block of the graph's pool, by a
// captured host function that gathers the view into S (or scatters S into it) on every replay.
// The graph keeps the view's block, S and the function's argument (replay_state). Refused:
// a capture the registry does not know, a view of memory not ours, and a neg / conj view.
#include "copy/strided_pinned_copy.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>

#include "core/pin_pool_allocator.h"

namespace torch_npu_pinpool {
namespace {

constexpr const char* kStagingFix =
    "Copy from (or into) a contiguous pinned tensor instead: a pinned staging buffer "
    "(`buf = torch.empty(shape, dtype=..., pin_memory=True)`) that you fill before each "
    "replay (`buf.copy_(view)`) and copy from inside the capture (or, for a copy to the host, "
    "copy into inside the capture and read after the replay).";

// The gather or scatter between two host tensors of one shape; dimensions of size 1 dropped,
// dimensions contiguous in both merged.
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
    if (!dims_.empty() && dims_.back().dst_stride == item_ && dims_.back().src_stride == item_) {
      run_ = dims_.back().size * item_;
      dims_.pop_back();
    } else {
      run_ = item_;
    }
  }

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
      for (; d > 0; --d) {  // the odometer, innermost first
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
    return !self.is_contiguous();
  }
  if (!at::is_expandable_to(src.sizes(), self.sizes())) {
    return false;  // torch_npu raises its own error
  }
  return !src.expand(self.sizes()).is_contiguous();
}

void staged_copy_in_capture(PinPoolHostAllocatorImpl& impl, at::Tensor& self, const at::Tensor& src,
                            const Stream& stream) {
  const bool to_device = src.is_cpu();
  const at::Tensor& host = to_device ? src : self;
  TORCH_CHECK(!host.is_conj() && !host.is_neg(), "torch_npu_pinpool: cannot capture a copy ",
              to_device ? "from" : "into", " a non-contiguous pinned view with the ",
              host.is_conj() ? "conjugate" : "negative", " bit set (stream ", stream.id(),
              " is capturing an ACLGraph). ", kStagingFix,
              " Nothing was enqueued: the capture is still underway.");
  if (!to_device) {
    at::assert_no_internal_overlap(self);
  }
  const at::Tensor view = to_device ? src.expand(self.sizes()) : self;
  TORCH_CHECK(impl.owns(host.const_data_ptr()), "torch_npu_pinpool: cannot capture a copy ",
              to_device ? "from" : "into",
              " a non-contiguous view of pinned memory that torch_npu_pinpool did not allocate "
              "(pinned before it was activated, or by another allocator): no graph could keep "
              "that memory alive for the ",
              to_device ? "gather" : "scatter",
              " every replay runs (torch_npu alone refuses this capture too). Pin the tensor "
              "after torch_npu_pinpool is active, or: ",
              kStagingFix, " Nothing was enqueued: the capture is still underway.");
  c10::DeviceGuard device(stream.device());  // `stream` is current: S comes from the graph's pool
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
