// Note [Large blocks], Note [Exact backing store].
#include "core/large_blocks.h"

#include <c10/util/llvmMathExtras.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#if PINPOOL_HAS_PINNED_LIMITS
#include <c10/core/AllocatorConfig.h>

#include "core/private_field.h"
#endif

namespace torch_npu_pinpool {
namespace {

constexpr size_t kDefaultLargeBlockMB = 32;
constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

// TORCH_NPU_PINPOOL_<name>, a whole number of MiB >= 0, or `fallback` when unset.
size_t env_mb(const char* name, size_t fallback, const char* zero_means) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') {
    return fallback;
  }
  char* end = nullptr;
  const long long mb = std::strtoll(env, &end, 10);
  TORCH_CHECK(end != nullptr && *end == '\0' && mb >= 0 && mb < (1LL << 40),
              "torch_npu_pinpool: ", name, "=", env, " is not a whole number of MiB >= 0 (0 ",
              zero_means, "). Fix or unset it.");
  return static_cast<size_t>(mb) << 20;
}

// Note [Exact backing store]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Pinned bytes come from torch_npu's allocator (Note [Backing store]), which rounds a request up
// to a power of two and caches it when freed unless it exceeds c10's pinned_max_round_threshold
// and pinned_max_cached_size (torch >= 2.13; before, it always rounds: no large path there, so
// every request goes through ATen's Base as natively). The large path needs both at the
// threshold. Where the user left them at their defaults (unlimited), these two fields alone are
// set, in place: never through parseArgs, which resets every setting it is not given (the device
// allocator's included) and replaces the settings string. Where the user set either, the large
// path stays off and Base follows the user's limits exactly as torch_npu does. A setting parsed
// later (torch_npu's device allocator start, a user's _set_allocator_settings) that restores the
// defaults is met by the next large request setting them again.
#if PINPOOL_HAS_PINNED_LIMITS
using Config = c10::CachingAllocator::AcceleratorAllocatorConfig;

// The two private fields (Note [Private fields]): c10 has no setter that leaves the others.
struct RoundThreshold {
  using type = size_t Config::*;
  friend type field(RoundThreshold);
};
struct CachedSize {
  using type = size_t Config::*;
  friend type field(CachedSize);
};
template struct PrivateField<RoundThreshold, &Config::pinned_max_round_threshold_>;
template struct PrivateField<CachedSize, &Config::pinned_max_cached_size_>;

// The user's value: neither the default nor ours.
bool users(size_t value, size_t ours) { return value != kNoLimit && value != ours; }

bool exact_backing_store(size_t threshold) {
  Config& config = Config::instance();
  size_t& round = config.*field(RoundThreshold{});
  size_t& cached = config.*field(CachedSize{});
  if (users(round, threshold) || users(cached, threshold)) {
    return false;
  }
  if (round != threshold || cached != threshold) {
    static std::mutex mutex;  // two first large requests at once
    std::lock_guard<std::mutex> lock(mutex);
    round = threshold;
    cached = threshold;
  }
  return true;
}
#else
bool exact_backing_store(size_t) { return false; }
#endif

}  // namespace

size_t large_block_threshold() {
  static const size_t threshold = []() -> size_t {
    const size_t bytes = env_mb("TORCH_NPU_PINPOOL_LARGE_BLOCK_MB", kDefaultLargeBlockMB << 20,
                                "turns large blocks off");
    return bytes == 0 ? kNoLimit : c10::llvm::PowerOf2Ceil(bytes);
  }();
  return threshold;
}

bool pins_exact_now() {
  return large_block_threshold() != kNoLimit && exact_backing_store(large_block_threshold());
}

size_t large_cache_limit() {
  static const size_t limit =
      env_mb("TORCH_NPU_PINPOOL_LARGE_CACHE_MB", kNoLimit, "caches no idle block");
  return limit;
}

size_t round_large(size_t size) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size + page - 1) / page * page;
}

LargeBlocks::Take LargeBlocks::take(size_t rounded) {
  const unsigned c = c10::llvm::Log2_64_Ceil(rounded);
  const size_t full = size_t{1} << c;
  std::lock_guard<std::mutex> lock(mutex_);
  SizeClass& cls = classes_[c];
  auto in_class = [&](PinBlock* b) { return c10::llvm::Log2_64_Ceil(b->size_) == c; };
  PinBlock* fit = nullptr;    // the smallest idle block that holds `rounded`
  PinBlock* small = nullptr;  // an idle block of the class too small for it
  for (PinBlock* block : idle_) {
    if (!in_class(block)) {
      continue;
    }
    if (block->size_ < rounded) {
      small = block;
    } else if (fit == nullptr || block->size_ < fit->size_) {
      fit = block;
    }
  }
  PinBlock* chosen = fit != nullptr ? fit : small;
  if (chosen != nullptr) {
    idle_.erase(std::find(idle_.begin(), idle_.end(), chosen));
    idle_bytes_ -= chosen->size_;
  }
  if (fit != nullptr) {
    fit->set_state(BlockState::kInUse);
    stats_->handed_out(fit->size_);
    return {fit, 0, nullptr};
  }
  if (small != nullptr) {  // native hits: replace it by a block of the whole class
    uncount_locked(small);
    cls.full = true;
    return {nullptr, full, small};
  }
  return {nullptr, cls.blocks == 0 && !cls.full ? rounded : full, nullptr};
}

void LargeBlocks::add(PinBlock* block) {
  const unsigned c = c10::llvm::Log2_64_Ceil(block->size_);
  std::lock_guard<std::mutex> lock(mutex_);
  SizeClass& cls = classes_[c];
  cls.blocks++;
  if (block->size_ < (size_t{1} << c)) {
    TORCH_INTERNAL_ASSERT(!cls.exact, "a second exact-size large block in one class");
    cls.exact = true;
  }
  stats_->pinned(block->size_);
}

void LargeBlocks::put(PinBlock* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_->freed(block->size_);
  idle_bytes_ += block->size_;
  idle_.push_back(block);
}

void LargeBlocks::forget(PinBlock* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_->freed(block->size_);
  uncount_locked(block);
}

void LargeBlocks::uncount_locked(PinBlock* block) {
  const unsigned c = c10::llvm::Log2_64_Ceil(block->size_);
  SizeClass& cls = classes_[c];
  cls.blocks--;
  if (block->size_ < (size_t{1} << c)) {
    cls.exact = false;
  }
  stats_->given_back(block->size_);
}

std::vector<PinBlock*> LargeBlocks::take_idle(size_t keep_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PinBlock*> idle;
  auto it = idle_.begin();
  for (; it != idle_.end() && idle_bytes_ > keep_bytes; ++it) {
    idle.push_back(*it);
    idle_bytes_ -= (*it)->size_;
    uncount_locked(*it);
  }
  idle_.erase(idle_.begin(), it);
  return idle;
}

}  // namespace torch_npu_pinpool
