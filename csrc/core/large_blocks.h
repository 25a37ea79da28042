// LargeBlocks: eager pinned blocks above the large threshold, never more than native holds.
//
// Note [Large blocks]
// ~~~~~~~~~~~~~~~~~~~
// torch_npu's allocator (ATen's CachingHostAllocatorImpl) pins a request of r bytes as 2^c,
// c = Log2_64_Ceil(r), and caches a freed block in its class c: a request hits iff its class
// holds a cached block whose copies have completed (events processed before the search), and
// nothing is unpinned before host_empty_cache(). Where torch_npu can pin an exact size (Note
// [Exact backing store]) a large request here makes the same hit / miss decision per class and
// differs only in the size it pins:
//   - a hit takes the smallest idle block of the class that holds r;
//   - when the class's idle blocks are all smaller than r (native would hit), the smallest is
//     given back and 2^c pinned in its place; the class is "full" from then on;
//   - a miss pins r, page-rounded, if the class holds no block and is not full; else 2^c.
// Freed blocks with copies in flight wait as kAwaitingCopies, outside this cache, as native's
// wait for their events. So a class holds as many blocks as native's would, each <= 2^c: the
// pinned bytes (live + idle) never exceed native's, and the pins exceed native's by at most one
// per class, its single replacement. A single request of r costs r (bench P6). The optional cap
// TORCH_NPU_PINPOOL_LARGE_CACHE_MB gives idle blocks back beyond native's and so may pin more.
#pragma once

#include <array>

#include "core/pin_pool_allocator.h"

namespace torch_npu_pinpool {

// TORCH_NPU_PINPOOL_LARGE_BLOCK_MB (default 32 MiB) rounded up to a power of two; SIZE_MAX: off.
size_t large_block_threshold();
// Whether torch_npu pins the large path's sizes exactly now (Note [Exact backing store]); false:
// requests of any size go through ATen's Base, as natively.
bool pins_exact_now();
size_t large_cache_limit();       // TORCH_NPU_PINPOOL_LARGE_CACHE_MB; default: no cap
size_t round_large(size_t size);  // up to the page size

class LargeBlocks {
 public:
  explicit LargeBlocks(OwnBlockStats* stats) : stats_(stats) {}

  // What a request of `rounded` bytes gets: a cached block (kInUse), or the size to pin and,
  // when native would have hit, the idle block to give back first (no longer counted).
  struct Take {
    PinBlock* hit{nullptr};
    size_t pin_size{0};
    PinBlock* give_back{nullptr};
  };
  Take take(size_t rounded);
  void add(PinBlock* block);     // just pinned: counted in its class
  void put(PinBlock* block);     // freed, its copies done: idle
  void forget(PinBlock* block);  // freed, its copies done, and given back: no longer counted
  // Idle blocks, oldest first, until at most `keep_bytes` stay idle; no longer counted.
  std::vector<PinBlock*> take_idle(size_t keep_bytes);
  std::mutex& mutex() { return mutex_; }  // taken around fork() (Note [Lock order])

 private:
  struct SizeClass {
    int blocks{0};      // live, awaiting copies or idle
    bool full{false};   // pins 2^c only
    bool exact{false};  // holds a block smaller than 2^c (at most one)
  };
  void uncount_locked(PinBlock* block);

  std::mutex mutex_;             // never held across a runtime call
  std::vector<PinBlock*> idle_;  // oldest first
  size_t idle_bytes_{0};
  std::array<SizeClass, 64> classes_{};
  OwnBlockStats* const stats_;
};

}  // namespace torch_npu_pinpool
