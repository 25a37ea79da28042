// Pageable copy guard: a clear error, before anything is enqueued, for a copy between a
// pageable (not pinned) CPU tensor and the NPU on a stream that is capturing an ACLGraph.
//
// Note [Pageable copy guard]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Without it the copy reaches the runtime: an async copy from / to pageable host memory on a
// capturing stream is rejected with 107000 (sync aclrtMemcpy during capture: 107030) and
// torch_npu reports "The Inner error is reported as above. The process exits for this inner
// error, and the current copy params are srclen=..., kind=1" - and after the non_blocking
// case its task queue runs nothing more (later eager kernels leave their outputs unwritten).
// Upstream CUDA refuses the copy up front ("Cannot copy
// between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned").
//
// torch_npu's copy_ kernel for PrivateUse1 is not exported, so the guard takes the kernel the
// dispatcher computed for aten::copy_ / PrivateUse1 (getComputedKernelForDispatchKey, torch
// >= 2.10), registers itself in its place, and forwards every call to it (unboxed). A CPU <->
// NPU copy_ dispatches to PrivateUse1 whichever side is the NPU, and torch_npu's _to_copy
// (.to(), .npu(), .cpu()) copies through at::_ops::copy_, so all of them pass here. Eager cost:
// one relaxed atomic load (is a capture registered in our allocator?) plus one more call on the
// way to torch_npu's kernel; the checks below run only while a capture is registered. Replays
// do not dispatch at all.
//
// On a refusal nothing was enqueued: the capture stays as it was (the caller's capture_end /
// leaving torch.npu.graph ends it, the graph can be reset) and the allocator's registration
// ends with it as usual.
//
// A pinned host side that torch_npu would copy through a pageable temporary of its own (a
// non-contiguous view) takes the same slow path: strided_pinned_copy.cpp stages it (Note
// [Strided pinned copies in capture]).
#include "copy/pageable_copy_guard.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <optional>

#include "core/pin_pool_allocator.h"
#include "copy/strided_pinned_copy.h"
#if PINPOOL_AUDIT
#include "audit/audit.h"
#endif

namespace torch_npu_pinpool {

#if PINPOOL_TORCH_AT_LEAST(2, 10)
namespace {

// torch_npu's kernel, taken before ours replaced it, and our registration; both leaked (called
// until exit), and both held here so that they stay reachable: a leak nobody points to is one
// LeakSanitizer reports (ci/lib/sanitize.sh).
c10::SafeKernelFunction* g_native_copy = nullptr;
torch::Library* g_guard_library = nullptr;

// SafeKernelFunction only offers a boxed call, which costs an eager copy more than the guard
// may (bench/: P8). Its KernelFunction member calls torch_npu's kernel unboxed,
// as the dispatcher itself would. The member is private; an explicit template instantiation
// may name it (C++ [temp.explicit]: access checking does not apply there), which is how we
// read it - the same object, no layout assumption.
using KernelMember = c10::KernelFunction c10::SafeKernelFunction::*;
KernelMember kernel_member();
template <KernelMember M>
struct KernelMemberOf {
  friend KernelMember kernel_member() { return M; }
};
template struct KernelMemberOf<&c10::SafeKernelFunction::kernel_>;

// Drops the "Overriding a previously registered kernel" warning of our own registration: the
// override is the point, and the user cannot act on it.
struct QuietHandler final : c10::WarningHandler {
  void process(const c10::Warning& /*warning*/) override {}
};

// is_pinned() of a tensor with the negative or conjugate bit goes through ATen's fallback for
// those bits, which answers for a resolved copy (pageable): ask about the memory itself.
bool memory_is_pinned(const at::Tensor& host) {
  if (!host.is_neg() && !host.is_conj()) {
    return host.is_pinned();
  }
  at::Tensor plain = host.alias();
  plain._set_neg(false);
  plain._set_conj(false);
  return plain.is_pinned();
}

// The slow path, while a capture is registered: true when the copy was done here (staged),
// false when torch_npu's kernel is to run it; throws for a copy that cannot be captured.
bool copy_during_capture(PinPoolHostAllocatorImpl& impl, at::Tensor& self,
                         const at::Tensor& src, bool non_blocking) {
  const bool to_device = src.is_cpu() && !self.is_cpu();
  const bool to_host = self.is_cpu() && !src.is_cpu();
  if (!to_device && !to_host) {
    return false;
  }
  const at::Tensor& host = to_device ? src : self;
  if (host.numel() == 0) {
    return false;
  }
  const bool pinned = memory_is_pinned(host);
  if (pinned && !(non_blocking && host_side_needs_staging(self, src))) {
    return false;  // what torch_npu captures as it is
  }
  // torch_npu copies on the current stream of the NPU side's device.
  const Stream stream = c10_npu::getCurrentNPUStream((to_device ? self : src).device().index());
  if (!in_capture(stream)) {  // Note [Is this stream capturing]
    return false;  // this stream is not the one capturing: an ordinary copy
  }
  if (pinned) {
    staged_copy_in_capture(impl, self, src, stream);
    return true;
  }
#if PINPOOL_AUDIT
  if (Audit* audit = Audit::get()) {
    audit->note_pageable_copy(host.nbytes());  // pageable_copy_in_capture
  }
#endif
  TORCH_CHECK(false, "torch_npu_pinpool: cannot copy ",
              to_device ? "a pageable (not pinned) CPU tensor to the NPU"
                        : "from the NPU into a pageable (not pinned) CPU tensor",
              " while stream ", stream.id(),
              " is capturing an ACLGraph: the copy's ", to_device ? "source" : "destination",
              " (", host.numel(), " elements, ", host.nbytes(),
              " bytes) is not in pinned memory, and a captured copy can only ",
              to_device ? "read" : "write",
              " pinned host memory (the runtime rejects it, error 107000). Pin it before the "
              "capture - `t = t.pin_memory()` - or allocate it with `pin_memory=True`, and "
              "use that tensor in the captured copy. Nothing was enqueued: the capture is "
              "still underway; ending it (leaving `torch.npu.graph`) gives a graph you can "
              "reset() or drop.");
}

at::Tensor& native_copy_(c10::DispatchKeySet keys, at::Tensor& self, const at::Tensor& src,
                        bool non_blocking) {
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  return ((*g_native_copy).*kernel_member())
      .call<at::Tensor&, at::Tensor&, const at::Tensor&, bool>(op, keys, self, src,
                                                               non_blocking);
}

at::Tensor& guarded_copy_(c10::DispatchKeySet keys, at::Tensor& self, const at::Tensor& src,
                          bool non_blocking) {
  auto* allocator = active_allocator();
  if (C10_UNLIKELY(allocator != nullptr && allocator->impl().capture_underway())) {
    if (copy_during_capture(allocator->impl(), self, src, non_blocking)) {
      return self;  // staged: Note [Strided pinned copies in capture]
    }
  }
  return native_copy_(keys, self, src, non_blocking);
}

#if PINPOOL_AUDIT
// With the audit report on (chosen at installation, so the kernel above is unchanged when it is
// off): the copy's direction for record_event (Note [Copy direction]).
template <bool kRefuse>
at::Tensor& audited_copy_(c10::DispatchKeySet keys, at::Tensor& self, const at::Tensor& src,
                          bool non_blocking) {
  CopyScope scope(self, src);
  if (kRefuse) {
    return guarded_copy_(keys, self, src, non_blocking);
  }
  return native_copy_(keys, self, src, non_blocking);
}
#endif

bool install_copy_kernel(bool refuse) {
  static std::once_flag once;
  static bool installed = false;
  std::call_once(once, [refuse] {
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
    if (!op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      return;  // torch_npu registered no copy_: nothing to guard
    }
    g_native_copy = new c10::SafeKernelFunction(
        op.getComputedKernelForDispatchKey(c10::DispatchKey::PrivateUse1));
    QuietHandler quiet;
    c10::WarningUtils::WarningHandlerGuard guard(&quiet);
    // Leaked: deregistering at exit would race copies still in flight on other threads.
    g_guard_library = new torch::Library(torch::Library::IMPL, "aten",
                                         c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
#if PINPOOL_AUDIT
    if (Audit::get() != nullptr) {
      if (refuse) {
        g_guard_library->impl("copy_", TORCH_FN(audited_copy_<true>));
      } else {
        g_guard_library->impl("copy_", TORCH_FN(audited_copy_<false>));
      }
      installed = true;
      return;
    }
#endif
    g_guard_library->impl("copy_", TORCH_FN(guarded_copy_));  // refuse: only with the report off
    installed = true;
  });
  return installed;
}

}  // namespace

bool install_pageable_copy_guard() { return install_copy_kernel(/*refuse=*/true); }

bool install_copy_direction_scope() {
#if PINPOOL_AUDIT
  return Audit::get() != nullptr && install_copy_kernel(/*refuse=*/false);
#else
  return false;
#endif
}

#else  // torch 2.8 / 2.9: no way to reach torch_npu's copy_ kernel once replaced.

bool install_pageable_copy_guard() { return false; }
bool install_copy_direction_scope() { return false; }

#endif

}  // namespace torch_npu_pinpool
