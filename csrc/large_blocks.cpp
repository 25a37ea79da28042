// LargeBlocks: exact-size (page-rounded) eager pinned blocks. See Note [Large blocks].
#include "large_blocks.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>

#if __has_include(<c10/core/AllocatorConfig.h>)
#include <c10/core/AllocatorConfig.h>
#define PINPOOL_HAS_ALLOCATOR_CONFIG 1
#else
#define PINPOOL_HAS_ALLOCATOR_CONFIG 0
#endif

namespace torch_npu_pinpool {
namespace {

// Default threshold (MiB). Below it the power-of-two waste is small in absolute terms and the
// lock-free bucket path of ATen's allocator is what eager code wants (P7 sizes stay there);
// above it one request can waste tens of MiB (P6: a 24 MiB request pins 32 MiB natively).
constexpr size_t kDefaultLargeBlockMB = 32;
// A cached block is reused for a request it holds with at most 1/8 of it to spare.
constexpr size_t kMaxSlackShift = 3;

// Whether c10's allocator config has the pinned rounding / caching limits (PyTorch PR 171662:
// torch 2.13 has them, 2.10 does not). Detected, not assumed from the version number.
template <typename C, typename = void>
struct HasPinnedLimits : std::false_type {};
template <typename C>
struct HasPinnedLimits<C, std::void_t<decltype(C::pinned_max_round_threshold()),
                                      decltype(C::pinned_max_cached_size())>>
    : std::true_type {};

template <typename Config>
bool configure_pinned_limits(size_t threshold) {
  if constexpr (HasPinnedLimits<Config>::value) {
    // Strictly below the threshold: torch_npu must not round or cache a request of exactly
    // `threshold` bytes either. In MiB, as the setting is spelled.
    const size_t mb = (threshold >> 20) > 0 ? (threshold >> 20) - 1 : 0;
    std::string settings;
    if (Config::pinned_max_round_threshold() > (mb << 20)) {
      settings += "pinned_max_round_threshold_mb:" + std::to_string(mb);
    }
    if (Config::pinned_max_cached_size() > (mb << 20)) {
      settings += std::string(settings.empty() ? "" : ",") +
                  "pinned_max_cached_size_mb:" + std::to_string(mb);
    }
    if (!settings.empty()) {
      // Only the host keys, and not through setAllocatorSettings: that also hands the string
      // to the device allocator's config parser.
      Config::instance().parseArgs(settings);
    }
    return true;
  } else {
    return false;
  }
}

}  // namespace

size_t large_block_threshold() {
  static const size_t threshold = []() -> size_t {
    const char* env = std::getenv("TORCH_NPU_PINPOOL_LARGE_BLOCK_MB");
    if (env == nullptr || *env == '\0') {
      return kDefaultLargeBlockMB << 20;
    }
    char* end = nullptr;
    const long long mb = std::strtoll(env, &end, 10);
    TORCH_CHECK(end != nullptr && *end == '\0' && mb >= 0,
                "torch_npu_pinpool: TORCH_NPU_PINPOOL_LARGE_BLOCK_MB=", env,
                " is not a whole number of MiB >= 0 (0 turns large blocks off). Fix or unset it.");
    return static_cast<size_t>(mb) << 20;
  }();
  return threshold;
}

size_t round_large(size_t size) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size + page - 1) / page * page;
}

bool configure_native_rounding() {
#if PINPOOL_HAS_ALLOCATOR_CONFIG
  const size_t threshold = large_block_threshold();
  if (threshold == 0) {
    return true;
  }
  return configure_pinned_limits<c10::CachingAllocator::AcceleratorAllocatorConfig>(threshold);
#else
  return false;
#endif
}

bool native_rounds_large() {
#if PINPOOL_HAS_ALLOCATOR_CONFIG
  return !HasPinnedLimits<c10::CachingAllocator::AcceleratorAllocatorConfig>::value;
#else
  return true;
#endif
}

// The bytes a block of `size` really pins: torch_npu's backing store still rounds to a power of
// two where it cannot be told not to, and host_memory_stats() says what is pinned.
static int64_t pinned_bytes(size_t size) {
  static const bool pow2 = native_rounds_large();
  return static_cast<int64_t>(pow2 ? c10::llvm::PowerOf2Ceil(size) : size);
}

PinBlock* LargeBlocks::take(size_t rounded) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto best = cached_.end();
  for (auto it = cached_.begin(); it != cached_.end(); ++it) {
    const size_t size = it->block->size_;
    // Only a block that holds the request (PyTorch PR 192722), without much to spare.
    if (size < rounded || size - rounded > (rounded >> kMaxSlackShift)) {
      continue;
    }
    if (best != cached_.end() && best->block->size_ <= size) {
      continue;
    }
    if (!it->fence.done()) {
      continue;  // a non_blocking copy from it may still be queued
    }
    best = it;
  }
  if (best == cached_.end()) {
    return nullptr;
  }
  PinBlock* block = best->block;
  cached_.erase(best);
  block->allocated_ = true;
  active_blocks_ += 1;
  active_bytes_ += pinned_bytes(block->size_);
  return block;
}

PinBlock* LargeBlocks::add(size_t rounded, void* ptr) {
  auto* block = new PinBlock(rounded, ptr);
  block->large_ = true;
  block->allocated_ = true;
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_ += 1;
  bytes_ += pinned_bytes(rounded);
  active_blocks_ += 1;
  active_bytes_ += pinned_bytes(rounded);
  return block;
}

void LargeBlocks::put(PinBlock* block) {
  Cached item{block, take_use_fence(block)};
  std::lock_guard<std::mutex> lock(mutex_);
  block->allocated_ = false;
  active_blocks_ -= 1;
  active_bytes_ -= pinned_bytes(block->size_);
  cached_.push_back(std::move(item));
}

std::vector<PinBlock*> LargeBlocks::take_idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PinBlock*> idle;
  std::vector<Cached> keep;
  for (auto& item : cached_) {
    if (item.fence.done()) {
      idle.push_back(item.block);
      blocks_ -= 1;
      bytes_ -= pinned_bytes(item.block->size_);
    } else {
      keep.push_back(std::move(item));
    }
  }
  cached_.swap(keep);
  return idle;
}

LargeBlocks::Stats LargeBlocks::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return {blocks_, bytes_, active_blocks_, active_bytes_};
}

}  // namespace torch_npu_pinpool
