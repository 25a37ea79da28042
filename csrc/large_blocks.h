// LargeBlocks: eager pinned blocks at or above TORCH_NPU_PINPOOL_LARGE_BLOCK_MB, pinned at their
// size rounded to the page, cached by exact size (issue #14).
//
// Note [Large blocks]
// ~~~~~~~~~~~~~~~~~~~
// Every caching host allocator of this lineage rounds a request up to a power of two, so a
// 20.4 GiB request pins 32 GiB. Requests of at least large_block_threshold() bytes skip that:
//   * size: round_large(size) = size rounded up to the page size.
//   * bytes: still from torch_npu's own host allocator (Note [Backing store]), so torch_npu's
//     copy kernels find the pointer (ptr_exist) and send record_event to the registry: eager
//     non_blocking copies stay protected. torch_npu rounds too; where c10 has them (2.13, not 2.11) it obeys
//     c10's pinned_max_round_threshold_mb / pinned_max_cached_size_mb, which
//     configure_native_rounding() sets to the threshold at activation, so torch_npu pins the
//     exact size and never caches such a block itself (a bucket of unrounded blocks is the
//     heap overflow of PyTorch PR 192722). On torch <= 2.10 there is no such setting and
//     torch_npu still pins a power of two (see native_rounds_large()).
//   * reuse: a freed block is cached here with the fence of its eager uses (recorded on free,
//     never a synchronization: Note [Eager-use fences]); take() hands it only to a request it
//     can hold (size >= request, at most 1/8 slack), once that fence is done.
//   * capture: a large block a captured operation uses is adopted by the capture's pool like
//     any default-pool block (Note [Graph ownership of blocks]); its free waits for its graphs.
#pragma once

#include "pin_pool_allocator.h"

#include <cstddef>
#include <mutex>
#include <vector>

#include <torch_npu/csrc/core/npu/NPUStream.h>

namespace torch_npu_pinpool {

// Requests of at least this many bytes are large blocks (0: feature off).
// TORCH_NPU_PINPOOL_LARGE_BLOCK_MB, read once; default kDefaultLargeBlockMB.
size_t large_block_threshold();
// `size` rounded up to the page size.
size_t round_large(size_t size);
// Sets c10's pinned_max_round_threshold_mb / pinned_max_cached_size_mb to the threshold when
// torch has them (2.13; not 2.11) and the user did not set them lower. Returns false if torch lacks them.
bool configure_native_rounding();
// Whether torch_npu still rounds a large block to a power of two (torch without the threshold).
bool native_rounds_large();

class LargeBlocks {
 public:
  // A cached block that holds `rounded` bytes whose eager uses completed, or null. Marks it
  // allocated.
  PinBlock* take(size_t rounded);
  // A new block (already allocated) of `rounded` bytes at `ptr`.
  PinBlock* add(size_t rounded, void* ptr);
  // A freed block, with the fence of its eager uses (Note [Eager-use fences]): neither reused
  // nor given back before the fence is done.
  void put(PinBlock* block);
  // Removes and returns every cached block whose events completed (empty_cache).
  std::vector<PinBlock*> take_idle();

  struct Stats {
    int64_t blocks, bytes, active_blocks, active_bytes;
  };
  Stats stats();

 private:
  struct Cached {
    PinBlock* block;
    UseFence fence;  // its eager uses (Note [Eager-use fences])
  };

  std::mutex mutex_;
  std::vector<Cached> cached_;  // few: large blocks are rare
  int64_t blocks_{0}, bytes_{0}, active_blocks_{0}, active_bytes_{0};
};

}  // namespace torch_npu_pinpool
