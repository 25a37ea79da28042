// AllocatorObserver: all the allocator tells an observer (the report, when it is on).
//
// Note [Observer hooks]
// ~~~~~~~~~~~~~~~~~~~~~
// The allocator and the copy_ kernel wrapper report through an interface each
// (AllocatorObserver here, CopyObserver in copy/copy_observer.h) and know nothing of what
// observes them. One place installs the observers, before prepare() makes the allocator; an
// allocator made before keeps none. observer_ is null when none is installed (the report off or
// compiled out). "Locked" calls come under the registry's mutex and take only the observer's own
// mutex; the others come with no allocator lock held and may take the GIL.
#pragma once

#include "runtime/npu_runtime.h"
#include "runtime/version_shim.h"

namespace torch_npu_pinpool {

class AllocatorObserver {
 public:
  virtual ~AllocatorObserver() = default;
  virtual void allocated(void* block) = 0;
  // An eager copy (its stream not capturing), before ATen records its event.
  virtual void used_by_copy(void* block, size_t block_size, const Stream& stream) = 0;
  // Unlocked: the tensor of any block died, before the allocator caches or frees the block
  // (so that the observer may forget the block).
  virtual void tensor_freed(void* block) = 0;
  // Locked. `pool`: the block's graph pool, or null.
  virtual void used_by_capture(void* block, size_t block_size, const void* pool, uint64_t graph,
                               c10::DeviceIndex device) = 0;
  // Locked, from here on.
  virtual void freed(void* block, size_t block_size, bool pool_block) = 0;
  virtual void pool_block_settled(void* block, size_t block_size) = 0;
  virtual void graph_capturing(uint64_t graph, bool capturing) = 0;
  virtual void graph_died(uint64_t graph) = 0;
  virtual void capture_failed(const void* pool, MempoolId id, uint64_t blocks,
                              uint64_t bytes) = 0;  // at capture_end: its graph is let go
  virtual void pool_released(MempoolId id, const void* pool) = 0;
  virtual void capture_into(MempoolId id) = 0;  // unlocked
};

// Note [Observer hooks]: the observer of the allocators made from now on; null: none.
void set_allocator_observer(AllocatorObserver* observer);

}  // namespace torch_npu_pinpool
