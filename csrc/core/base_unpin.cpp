// unpin_in_base: ATen's default-pool cache unpins one block (Note [Emptied while graphs held
// it]), which ATen has no call for; how depends on the torch version (version_shim.h).
#include <c10/util/ScopeExit.h>

#include <algorithm>
#include <mutex>

#include "core/pin_pool_allocator.h"

#if PINPOOL_ATEN_FREE_UNPINS_ABOVE_CACHED_SIZE
#include <c10/core/AllocatorConfig.h>
#elif PINPOOL_ATEN_FLAT_FREE_LISTS
#include "core/private_field.h"
#endif

namespace torch_npu_pinpool {

#if PINPOOL_ATEN_FREE_UNPINS_ABOVE_CACHED_SIZE
namespace {
thread_local bool t_unpin_on_free = false;  // Base::free unpins rather than caches
}  // namespace

// Base's own value (c10's setting), but 0 while unpin_in_base frees on this thread. Every eager
// free asks it: the thread-local is read only while some thread is in unpin_in_base.
size_t PinPoolHostAllocatorImpl::pinned_max_cached_size() const {
  if (C10_UNLIKELY(unpinning_in_base_.load(std::memory_order_relaxed) != 0) && t_unpin_on_free) {
    return 0;
  }
  return c10::CachingAllocator::AcceleratorAllocatorConfig::pinned_max_cached_size();
}

// Its streams went to its fence, so Base::free records no event and, the block being larger
// than 0 bytes, unpins it as one it would not cache.
bool PinPoolHostAllocatorImpl::unpin_in_base(PinBlock* block) {
  unpinning_in_base_.fetch_add(1, std::memory_order_relaxed);
  t_unpin_on_free = true;
  auto reset = c10::make_scope_exit([this] {
    t_unpin_on_free = false;
    unpinning_in_base_.fetch_sub(1, std::memory_order_relaxed);
  });
  Base::free(block);
  return true;
}

#elif PINPOOL_ATEN_FLAT_FREE_LISTS
namespace {
using Base = at::CachingHostAllocatorImpl<Stream, Event, PinBlock>;
using FreeList = at::FreeBlockList<PinBlock>;
struct FreeLists {
  using type = std::vector<FreeList> Base::*;
  friend type field(FreeLists);
};
struct BlocksMutex {
  using type = std::mutex Base::*;
  friend type field(BlocksMutex);
};
struct Blocks {
  using type = ska::flat_hash_set<PinBlock*> Base::*;
  friend type field(Blocks);
};
struct PtrToBlock {
  using type = ska::flat_hash_map<void*, PinBlock*> Base::*;
  friend type field(PtrToBlock);
};
template struct PrivateField<FreeLists, &Base::free_list_>;
template struct PrivateField<BlocksMutex, &Base::blocks_mutex_>;
template struct PrivateField<Blocks, &Base::blocks_>;
template struct PrivateField<PtrToBlock, &Base::ptr_to_block_>;
}  // namespace

// Into its free list, then out of it as Base::empty_cache takes each block (same locks, same
// stats), unless another thread took it meanwhile: then it is in use, as a native hit would be.
// It leaves the in-use counts too, as 2.13's destroy_block does: 2.10's Base::free lowers them
// only for a block freed with events.
bool PinPoolHostAllocatorImpl::unpin_in_base(PinBlock* block) {
  Base::free(block);  // its streams went to its fence: straight into the free list
  const size_t index = size_index(block->size_);
  auto& free_list = (this->*field(FreeLists{}))[index];
  std::scoped_lock lock(free_list.mutex_, this->*field(BlocksMutex{}));
  auto it = std::find(free_list.list_.begin(), free_list.list_.end(), block);
  if (it == free_list.list_.end()) {
    return false;
  }
  free_list.list_.erase(it);
  (this->*field(Blocks{})).erase(block);
  (this->*field(PtrToBlock{})).erase(block->ptr_);
  free_block(block);
  stats_.allocations.decrease(1);
  stats_.allocated_bytes.decrease(block->size_);
  stats_.allocation_bucket_stats[index].decrease(1);
  stats_.allocated_bytes_bucket_stats[index].decrease(block->size_);
  stats_.active_bucket_stats[index].decrease(1);
  stats_.active_bytes_bucket_stats[index].decrease(block->size_);
  delete block;
  return true;
}

#else
bool PinPoolHostAllocatorImpl::unpin_in_base(PinBlock* block) {
  Base::free(block);  // cached until the next empty_cache (Note [Emptied while graphs held it])
  return false;
}
#endif

}  // namespace torch_npu_pinpool
