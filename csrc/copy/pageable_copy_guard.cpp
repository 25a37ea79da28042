// Note [Pageable copy guard]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A copy between a pageable CPU tensor and the NPU on a capturing stream is refused before
// anything is enqueued (the runtime would reject it and stop torch_npu's task queue). The guard
// replaces torch_npu's aten::copy_ kernel for PrivateUse1 (torch >= 2.10) and forwards to it
// unboxed: one relaxed load eager. Note [Strided pinned copies in capture] stages pinned views.
#include "copy/pageable_copy_guard.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>

#include "copy/copy_observer.h"
#include "copy/strided_pinned_copy.h"
#include "core/pin_pool_allocator.h"

namespace torch_npu_pinpool {

namespace {
std::atomic<CopyObserver*> g_observer{nullptr};  // Note [Observer hooks]
}  // namespace

void set_copy_observer(CopyObserver* observer) {
  g_observer.store(observer, std::memory_order_relaxed);
}

#if PINPOOL_TORCH_AT_LEAST(2, 10)
namespace {

// Leaked, and held here so that LeakSanitizer sees them reachable.
c10::SafeKernelFunction* g_native_copy = nullptr;
torch::Library* g_guard_library = nullptr;

// SafeKernelFunction's private KernelFunction calls unboxed; an explicit instantiation may name
// it ([temp.explicit]: no access check there).
using KernelMember = c10::KernelFunction c10::SafeKernelFunction::*;
KernelMember kernel_member();
template <KernelMember M>
struct KernelMemberOf {
  friend KernelMember kernel_member() { return M; }
};
template struct KernelMemberOf<&c10::SafeKernelFunction::kernel_>;

// Drops the "Overriding a previously registered kernel" warning of our registration.
struct QuietHandler final : c10::WarningHandler {
  void process(const c10::Warning& /*warning*/) override {}
};

// is_pinned() of a neg / conj tensor answers for a resolved copy: ask about the memory.
bool memory_is_pinned(const at::Tensor& host) {
  if (!host.is_neg() && !host.is_conj()) {
    return host.is_pinned();
  }
  at::Tensor plain = host.alias();
  plain._set_neg(false);
  plain._set_conj(false);
  return plain.is_pinned();
}

// True when the copy was done here (staged); throws for a copy that cannot be captured.
bool copy_during_capture(PinPoolHostAllocatorImpl& impl, at::Tensor& self, const at::Tensor& src,
                         bool non_blocking) {
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
    return false;
  }
  // torch_npu copies on the current stream of the NPU side's device.
  const Stream stream = current_stream((to_device ? self : src).device().index());
  if (!stream_capturing(stream)) {
    return false;
  }
  if (pinned) {
    staged_copy_in_capture(impl, self, src, stream);
    return true;
  }
  if (CopyObserver* observer = g_observer.load(std::memory_order_relaxed)) {
    observer->note_pageable_copy(host.nbytes());
  }
  TORCH_CHECK(false, "torch_npu_pinpool: cannot copy ",
              to_device ? "a pageable (not pinned) CPU tensor to the NPU"
                        : "from the NPU into a pageable (not pinned) CPU tensor",
              " while stream ", stream.id(), " is capturing an ACLGraph: the copy's ",
              to_device ? "source" : "destination", " (", host.numel(), " elements, ",
              host.nbytes(), " bytes) is not in pinned memory, and a captured copy can only ",
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
      .call<at::Tensor&, at::Tensor&, const at::Tensor&, bool>(op, keys, self, src, non_blocking);
}

at::Tensor& guarded_copy_(c10::DispatchKeySet keys, at::Tensor& self, const at::Tensor& src,
                          bool non_blocking) {
  auto* allocator = active_allocator();
  if (C10_UNLIKELY(allocator != nullptr && allocator->impl().capture_underway())) {
    if (copy_during_capture(allocator->impl(), self, src, non_blocking)) {
      return self;
    }
  }
  return native_copy_(keys, self, src, non_blocking);
}

// With an observer: the copy runs where it sees it (Note [Copy direction]).
template <bool kRefuse>
at::Tensor& observed_copy_(c10::DispatchKeySet keys, at::Tensor& self, const at::Tensor& src,
                           bool non_blocking) {
  return g_observer.load(std::memory_order_relaxed)->observe_copy(self, src, [&]() -> at::Tensor& {
    if (kRefuse) {
      return guarded_copy_(keys, self, src, non_blocking);
    }
    return native_copy_(keys, self, src, non_blocking);
  });
}

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
    g_guard_library = new torch::Library(torch::Library::IMPL, "aten",
                                         c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    if (g_observer.load(std::memory_order_relaxed) != nullptr) {
      if (refuse) {
        g_guard_library->impl("copy_", TORCH_FN(observed_copy_<true>));
      } else {
        g_guard_library->impl("copy_", TORCH_FN(observed_copy_<false>));
      }
      installed = true;
      return;
    }
    g_guard_library->impl("copy_", TORCH_FN(guarded_copy_));
    installed = true;
  });
  return installed;
}

}  // namespace

bool install_pageable_copy_guard() { return install_copy_kernel(/*refuse=*/true); }

bool install_copy_direction_scope() {
  return g_observer.load(std::memory_order_relaxed) != nullptr &&
         install_copy_kernel(/*refuse=*/false);
}

#else  // torch 2.8 / 2.9: torch_npu's kernel cannot be reached once replaced

bool install_pageable_copy_guard() { return false; }
bool install_copy_direction_scope() { return false; }

#endif

}  // namespace torch_npu_pinpool
