// LargeBlocks: eager pinned blocks of at least TORCH_NPU_PINPOOL_LARGE_BLOCK_MB.
//
// Note [Large blocks]
// ~~~~~~~~~~~~~~~~~~~
// Requests of at least large_block_threshold() skip the power-of-two rounding of ATen's Base:
// pinned at round_large(size) from torch_npu's allocator (Note [Backing store]), which
// configure_native_rounding() keeps from rounding or caching them where c10 has the limits
// (else native_rounds_large()). A freed block is cached with its eager-use fence and reused for
// a request it holds with no more waste than PowerOf2Ceil; idle blocks go back at
// host_empty_cache(), on a failed pin (then it is retried), or oldest first above
// large_cache_limit(). A captured one is adopted like any default-pool block.
#pragma once

#include "core/pin_pool_allocator.h"

namespace torch_npu_pinpool {

size_t large_block_threshold();   // a power of two; 0: off. Default 32 MiB
size_t large_cache_limit();       // TORCH_NPU_PINPOOL_LARGE_CACHE_MB; default 4 GiB
size_t round_large(size_t size);  // up to the page size
void configure_native_rounding();
bool native_rounds_large();  // torch_npu still pins a power of two

class LargeBlocks {
 public:
  explicit LargeBlocks(OwnBlockStats* stats) : stats_(stats) {}

  PinBlock* take(size_t rounded);  // a cached block whose fence is done, or null; kInUse
  void add(PinBlock* block);       // just pinned
  void put(PinBlock* block);       // freed (kFree)
  // Cached blocks whose fences are done, oldest first, until at most `keep_bytes` stay idle.
  std::vector<PinBlock*> take_idle(size_t keep_bytes);

 private:
  struct Cached {
    PinBlock* block;
    UseFence fence;
  };

  std::mutex mutex_;
  std::vector<Cached> cached_;  // oldest first
  size_t idle_bytes_{0};
  OwnBlockStats* const stats_;
};

}  // namespace torch_npu_pinpool
