// Note [Large blocks].
#include "core/large_blocks.h"

#include <c10/util/llvmMathExtras.h>
#include <unistd.h>

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

constexpr size_t kDefaultLargeBlockMB = 32;
constexpr size_t kDefaultLargeCacheMB = 4096;

// c10's pinned rounding / caching limits, detected (torch 2.13 has them, 2.10 does not).
template <typename C, typename = void>
struct HasPinnedLimits : std::false_type {};
template <typename C>
struct HasPinnedLimits<C, std::void_t<decltype(C::pinned_max_round_threshold()),
                                      decltype(C::pinned_max_cached_size())>> : std::true_type {};

template <typename Config>
void configure_pinned_limits(size_t threshold) {
  if constexpr (HasPinnedLimits<Config>::value) {
    // Both at the threshold; a limit the user set lower stays theirs.
    const size_t mb = threshold >> 20;
    std::string settings;
    if (Config::pinned_max_round_threshold() > threshold) {
      settings += "pinned_max_round_threshold_mb:" + std::to_string(mb);
    }
    if (Config::pinned_max_cached_size() > threshold) {
      settings += std::string(settings.empty() ? "" : ",") +
                  "pinned_max_cached_size_mb:" + std::to_string(mb);
    }
    if (!settings.empty()) {
      // Not setAllocatorSettings: that also hands the string to the device allocator.
      Config::instance().parseArgs(settings);
    }
  }
}

// TORCH_NPU_PINPOOL_<name>, a whole number of MiB >= 0, or `fallback` MiB when unset.
size_t env_mb(const char* name, size_t fallback, const char* zero_means) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') {
    return fallback << 20;
  }
  char* end = nullptr;
  const long long mb = std::strtoll(env, &end, 10);
  TORCH_CHECK(end != nullptr && *end == '\0' && mb >= 0 && mb < (1LL << 40),
              "torch_npu_pinpool: ", name, "=", env, " is not a whole number of MiB >= 0 (0 ",
              zero_means, "). Fix or unset it.");
  return static_cast<size_t>(mb) << 20;
}

}  // namespace

size_t large_block_threshold() {
  static const size_t threshold = []() -> size_t {
    const size_t bytes =
        env_mb("TORCH_NPU_PINPOOL_LARGE_BLOCK_MB", kDefaultLargeBlockMB, "turns large blocks off");
    return bytes == 0 ? 0 : c10::llvm::PowerOf2Ceil(bytes);
  }();
  return threshold;
}

size_t large_cache_limit() {
  static const size_t limit =
      env_mb("TORCH_NPU_PINPOOL_LARGE_CACHE_MB", kDefaultLargeCacheMB, "caches no idle block");
  return limit;
}

size_t round_large(size_t size) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size + page - 1) / page * page;
}

void configure_native_rounding() {
#if PINPOOL_HAS_ALLOCATOR_CONFIG
  if (large_block_threshold() != 0) {
    configure_pinned_limits<c10::CachingAllocator::AcceleratorAllocatorConfig>(
        large_block_threshold());
  }
#endif
}

bool native_rounds_large() {
#if PINPOOL_HAS_ALLOCATOR_CONFIG
  return !HasPinnedLimits<c10::CachingAllocator::AcceleratorAllocatorConfig>::value;
#else
  return true;
#endif
}

// What a block of `size` really pins, for host_memory_stats().
static size_t pinned_bytes(size_t size) {
  static const bool pow2 = native_rounds_large();
  return pow2 ? c10::llvm::PowerOf2Ceil(size) : size;
}

PinBlock* LargeBlocks::take(size_t rounded) {
  // The smallest that holds the request and wastes no more than native's rounding would.
  const size_t most = c10::llvm::PowerOf2Ceil(rounded);
  std::lock_guard<std::mutex> lock(mutex_);
  auto best = cached_.end();
  for (auto it = cached_.begin(); it != cached_.end(); ++it) {
    const size_t size = it->block->size_;
    if (size < rounded || size > most || (best != cached_.end() && best->block->size_ <= size)) {
      continue;
    }
    if (it->fence.done()) {
      best = it;
    }
  }
  if (best == cached_.end()) {
    return nullptr;
  }
  PinBlock* block = best->block;
  cached_.erase(best);
  idle_bytes_ -= block->size_;
  block->set_state(BlockState::kInUse);
  stats_->handed_out(pinned_bytes(block->size_));
  return block;
}

void LargeBlocks::add(PinBlock* block) { stats_->pinned(pinned_bytes(block->size_)); }

void LargeBlocks::put(PinBlock* block) {
  Cached item{block, UseFence(block)};
  std::lock_guard<std::mutex> lock(mutex_);
  stats_->freed(pinned_bytes(block->size_));
  idle_bytes_ += block->size_;
  cached_.push_back(std::move(item));
}

std::vector<PinBlock*> LargeBlocks::take_idle(size_t keep_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PinBlock*> idle;
  for (auto it = cached_.begin(); it != cached_.end() && idle_bytes_ > keep_bytes;) {
    if (!it->fence.done()) {
      ++it;
      continue;
    }
    PinBlock* block = it->block;
    idle.push_back(block);
    idle_bytes_ -= block->size_;
    stats_->given_back(pinned_bytes(block->size_));
    it = cached_.erase(it);
  }
  return idle;
}

}  // namespace torch_npu_pinpool
