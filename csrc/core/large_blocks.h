// LargeBlocks: eager pinned blocks at or above TORCH_NPU_PINPOOL_LARGE_BLOCK_MB, pinned at their
// size rounded to the page, cached and reused (issue #14, issue #33).
//
// Note [Large blocks]
// ~~~~~~~~~~~~~~~~~~~
// Every caching host allocator of this lineage rounds a request up to a power of two, so a
// 20.4 GiB request pins 32 GiB. Requests of at least large_block_threshold() bytes (a power of
// two) skip that; every smaller request goes to ATen's Base as it would natively:
//   * size: round_large(size) = size rounded up to the page size.
//   * bytes: still from torch_npu's own host allocator (Note [Backing store]), so torch_npu's
//     copy kernels find the pointer (ptr_exist) and send record_event to the registry: eager
//     non_blocking copies stay protected. torch_npu rounds and caches by c10's
//     pinned_max_round_threshold_mb / pinned_max_cached_size_mb where c10 has them (2.13 on;
//     not 2.11); configure_native_rounding() sets both to the threshold at activation (a limit
//     the user set lower stays). torch_npu then pins a large block at its exact size and never
//     caches it (a bucket of unrounded blocks is the heap overflow of PyTorch PR 192722), while
//     ATen's Base - which reads the same two settings - rounds and caches every request it gets
//     (all below the threshold, so at most the threshold once rounded) exactly as with c10's
//     defaults. No other reader of the settings is affected. On torch <= 2.12 without them
//     torch_npu still pins a power of two (native_rounds_large()).
//   * reuse: a freed block is cached here with the fence of its eager uses (recorded on free,
//     never a synchronization: Note [Eager-use fences]); take() hands it, once that fence is
//     done, to a request it holds with no more to spare than native's rounding would waste
//     (size <= PowerOf2Ceil(request)): a request native would serve from its cached block is
//     served from ours.
//   * giving back: idle blocks stay cached until host_empty_cache(), until a pin fails (then
//     all go back and the pin is tried again), or, oldest first, while more than
//     large_cache_limit() bytes are idle when a new one is pinned.
//   * capture: a large block a captured operation uses is adopted by the capture's pool like
//     any default-pool block (Note [Graph ownership of blocks]); its free waits for its graphs.
#pragma once

#include "core/pin_pool_allocator.h"

#include <cstddef>
#include <mutex>
#include <vector>

#include <torch_npu/csrc/core/npu/NPUStream.h>

namespace torch_npu_pinpool {

// Requests of at least this many bytes are large blocks (0: feature off).
// TORCH_NPU_PINPOOL_LARGE_BLOCK_MB rounded up to a power of two, read once; default 32 MiB.
size_t large_block_threshold();
// Idle large blocks kept at most: TORCH_NPU_PINPOOL_LARGE_CACHE_MB, read once; default 4 GiB.
size_t large_cache_limit();
// `size` rounded up to the page size.
size_t round_large(size_t size);
// Sets c10's pinned_max_round_threshold_mb / pinned_max_cached_size_mb to the threshold when
// torch has them and the user did not set them lower (else native_rounds_large()).
void configure_native_rounding();
// Whether torch_npu still rounds a large block to a power of two (torch without the threshold).
bool native_rounds_large();

class LargeBlocks {
 public:
  explicit LargeBlocks(OwnBlockStats* stats) : stats_(stats) {}

  // A cached block that holds `rounded` bytes whose eager uses completed, or null; kInUse.
  PinBlock* take(size_t rounded);
  // A new block, just pinned (large_, ptr_ and size_ set; kInUse): counted.
  void add(PinBlock* block);
  // A freed block (kFree), with the fence of its eager uses (Note [Eager-use fences]): neither
  // reused nor given back before the fence is done.
  void put(PinBlock* block);
  // Removes and returns cached blocks whose events completed, oldest first, until at most
  // `keep_bytes` stay idle (0: every such block).
  std::vector<PinBlock*> take_idle(size_t keep_bytes);

 private:
  struct Cached {
    PinBlock* block;
    UseFence fence;  // its eager uses (Note [Eager-use fences])
  };

  std::mutex mutex_;
  std::vector<Cached> cached_;  // oldest first; few: large blocks are rare
  size_t idle_bytes_{0};        // sum of the cached blocks' sizes
  OwnBlockStats* const stats_;  // the allocator's (Note [Stats of our own blocks])
};

}  // namespace torch_npu_pinpool
