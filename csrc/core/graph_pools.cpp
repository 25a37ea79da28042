// Block ownership: allocation in a capture, settling blocks, and the pass that settles them.
#include <c10/util/llvmMathExtras.h>

#include <algorithm>
#include <utility>

#include "core/large_blocks.h"
#include "core/pin_pool_allocator.h"

namespace torch_npu_pinpool {
namespace {
size_t size_index(size_t size) { return c10::llvm::Log2_64_Ceil(size); }
}  // namespace

// Note [Graph ownership of blocks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A replay uses captured host addresses as they are then: each graph lists the blocks its work
// uses, of any pool, and a block counts its entries (graph_uses_) until that graph's fence.
// A block settles (kFree) once its tensor died, no graph lists it and its eager-use fence is
// done: a pool block goes to its pool, a default-pool one to ATen.

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_during_capture(size_t size) {
  if (size == 0) {
    return {nullptr, nullptr};
  }
  const Stream stream = current_stream();
  GraphPool* pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(graphs_.mutex());
    if (CapturedGraph* graph = graphs_.capturing_on(stream)) {
      pool = graph->pool;
    }
  }
  if (pool == nullptr) {  // not a capturing stream
    return allocate_eager(size);
  }
  if (fences_.pending()) {
    process_pending();
  }
  return allocate_in_pool(*pool, size);
}

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_in_pool(GraphPool& pool, size_t size) {
  // Large blocks are page-rounded (Note [Exact backing store]): a bucket's may be too small.
  const size_t rounded = size > large_threshold_ && pins_exact_now()
                             ? round_large(size)
                             : c10::llvm::PowerOf2Ceil(size);
  {
    std::lock_guard<std::mutex> lock(graphs_.mutex());
    auto& free_list = pool.free_blocks[size_index(rounded)];
    auto fits = std::find_if(free_list.begin(), free_list.end(),
                             [&](const PinBlock* b) { return b->size_ >= rounded; });
    if (fits != free_list.end()) {
      PinBlock* block = *fits;
      free_list.erase(fits);
      block->set_state(BlockState::kInUse);
      block->emptied_ = false;  // reused: native would have pinned it anew
      pool.blocks_in_use++;
      pool.bytes_in_use += block->size_;
      own_stats_.handed_out(block->size_);
      return {block->ptr_, block};
    }
  }
  // The capture's use keeps `pool` alive while unlocked.
  auto block = std::make_unique<PinBlock>(rounded, &pool, /*large=*/false);
  block->ptr_ = allocate_raw(rounded, block.get());
  own_stats_.pinned(rounded);
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  pool.blocks++;
  pool.blocks_in_use++;
  pool.bytes_held += rounded;
  pool.bytes_in_use += rounded;
  PinBlock* raw = block.release();
  return {raw->ptr_, raw};
}

// A pool block, a kGraphUsed block, or any block freed while a capture is underway.
void PinPoolHostAllocatorImpl::free_under_lock(PinBlock* block) {
  GivenBack out;  // dies last, with no lock of ours held
  UseFence fence(block);
  {
    std::lock_guard<std::mutex> lock(graphs_.mutex());
    if (observer_ != nullptr) {
      observer_->freed(block->ptr_, block->size_, block->pool_ != nullptr);
    }
    if (block->pool_ != nullptr) {
      block->pool_->blocks_in_use--;
      block->pool_->bytes_in_use -= block->size_;
      own_stats_.freed(block->size_);
    }
    if (fence.empty()) {
      free_or_graph_owned_locked(block, out);
    } else {
      fences_.add_awaiting(block, std::move(fence));
    }
  }
  give_back_default(out);
}

// Its tensor died and its eager copies ran (Note [Block states]).
void PinPoolHostAllocatorImpl::free_or_graph_owned_locked(PinBlock* block, GivenBack& out) {
  if (block->graph_uses_ != 0) {
    block->set_state(BlockState::kGraphOwned);
    return;
  }
  block->set_state(BlockState::kFree);
  GraphPool* pool = block->pool_;
  if (pool == nullptr) {
    (std::exchange(block->emptied_, false) ? out.unpins : out.base_frees).push_back(block);
    return;
  }
  if (observer_ != nullptr) {
    observer_->pool_block_settled(block->ptr_, block->size_);  // leaked_by_native
  }
  if (pool->state == GraphPool::State::kReleased) {
    unpin_locked(block, out.released);
    graphs_.delete_pool_if_empty(pool);
  } else {
    pool->free_blocks[size_index(block->size_)].push_back(block);
  }
}

// Note [Emptied while graphs held it]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu's host_empty_cache() unpins a block whose tensor died though a live graph still
// replays from it: a default-pool block (any version), and one a capture pinned when there are
// no host pools (<= 2.10). We keep such a block (kGraphOwned, or free in a live pool) for its
// graphs, and flag it; when its last graph is gone it is unpinned then, not cached: a pool's goes
// back into torch_npu's cache (as every block of ours), a default-pool one is unpinned in ATen's
// (unpin_in_base) or LargeBlocks, into torch_npu's; and that cache is emptied. So the user's
// empty_cache takes effect once the graphs are gone, and no graph's death leaves more pinned
// than native's did. Emptying torch_npu's cache costs no pin native would not pay: it holds only
// blocks ATen or our pools gave back, which native's own caches would not hand out either.
// (Where unpin_in_base cannot, a default-pool block stays cached until the next empty_cache.)
void PinPoolHostAllocatorImpl::mark_graph_held_emptied() {
  constexpr bool kNativeUnpinsCaptured = !PINPOOL_HAS_ATEN_HOST_POOLS;
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  for (GraphPool* pool : kNativeUnpinsCaptured ? graphs_.pools() : std::vector<GraphPool*>{}) {
    for (auto& list : pool->free_blocks) {
      for (PinBlock* block : list) {
        block->emptied_ = true;
      }
    }
  }
  graphs_.for_each_graph([&](CapturedGraph& graph) {
    for (PinBlock* block : graph.blocks) {
      if (block->state() == BlockState::kGraphOwned &&
          (block->pool_ == nullptr || kNativeUnpinsCaptured)) {
        block->emptied_ = true;
      }
    }
  });
}

void PinPoolHostAllocatorImpl::give_back_emptied() {
  if (emptied_given_back_.load(std::memory_order_relaxed) &&
      emptied_given_back_.exchange(false, std::memory_order_relaxed)) {
    native_->empty_cache();  // our DataPtrs died before: no lock of ours is held
  }
}

// With no lock of ours held.
void PinPoolHostAllocatorImpl::give_back_default(GivenBack& out) {
  for (PinBlock* block : out.base_frees) {
    free_eager(block);
  }
  for (PinBlock* block : out.unpins) {
    unpin_default(block);
  }
}

// A flagged default-pool block, free: its graphs are gone and its eager copies ran.
void PinPoolHostAllocatorImpl::unpin_default(PinBlock* block) {
  if (block->large_) {
    large_->forget(block);
    c10::DataPtr released = take_raw(block->ptr_);
    delete block;
  } else if (!unpin_in_base(block)) {
    return;
  }
  emptied_given_back_.store(true, std::memory_order_relaxed);
}

void PinPoolHostAllocatorImpl::unpin_locked(PinBlock* block, std::vector<c10::DataPtr>& released) {
  GraphPool* pool = block->pool_;
  if (block->emptied_) {
    emptied_given_back_.store(true, std::memory_order_relaxed);
  }
  pool->blocks--;
  pool->bytes_held -= block->size_;
  released.push_back(take_raw(block->ptr_));
  own_stats_.given_back(block->size_);
  delete block;
}

void PinPoolHostAllocatorImpl::drop_pool_use_locked(GraphPool* pool,
                                                    std::vector<c10::DataPtr>& released) {
  TORCH_INTERNAL_ASSERT(pool->graphs > 0, "memory pool released more often than used");
  if (--pool->graphs > 0) {
    return;
  }
  pool->state = GraphPool::State::kReleased;
  if (observer_ != nullptr) {
    observer_->pool_released(pool->id, pool);  // Note [Released pools]
  }
  for (auto& list : pool->free_blocks) {
    for (PinBlock* block : list) {
      unpin_locked(block, released);
    }
    list.clear();
  }
  graphs_.delete_pool_if_empty(pool);
}

// No replay of `graph` can run any more.
void PinPoolHostAllocatorImpl::graph_replays_over_locked(CapturedGraph* graph, GivenBack& out) {
  for (PinBlock* block : graph->blocks) {
    if (--block->graph_uses_ != 0) {
      continue;
    }
    if (block->state() == BlockState::kGraphUsed) {
      block->set_state(BlockState::kInUse);
    } else if (block->state() == BlockState::kGraphOwned) {
      free_or_graph_owned_locked(block, out);
    }  // kAwaitingCopies: its eager-use fence settles it
  }
  delete graph;
}

// Never skipped: a caller that finds another thread inside leaves process_again_ set for it.
// own_pass (empty_cache): it waits for that thread, whose pass never waits, and is sure that a
// pass began after its call.
void PinPoolHostAllocatorImpl::process_pending(bool own_pass) {
  process_again_.store(true);
  for (;;) {
    std::unique_lock<std::mutex> serial(process_mutex_, std::defer_lock);
    if (own_pass && !passes_orphaned_.load(std::memory_order_relaxed)) {
      serial.lock();
      own_pass = false;
    } else if (!serial.try_lock()) {
      return;
    }
    while (process_again_.exchange(false)) {
      process_pending_pass();
    }
    serial.unlock();
    if (!process_again_.load()) {
      give_back_emptied();
      return;
    }
  }
}

// One pass (Note [Replay fences]): it asks the runtime, and waits for nothing.
void PinPoolHostAllocatorImpl::process_pending_pass() {
  GivenBack out;  // dies last, with no lock of ours held
  const std::vector<PinBlock*> settled = fences_.settle_awaiting();
  std::vector<CapturedGraph*> over = fences_.fence_dead();
  const std::vector<CapturedGraph*> retired = fences_.retire_completed();
  over.insert(over.end(), retired.begin(), retired.end());
  if (!settled.empty() || !over.empty()) {
    std::lock_guard<std::mutex> lock(graphs_.mutex());
    for (PinBlock* block : settled) {
      free_or_graph_owned_locked(block, out);
    }
    for (CapturedGraph* graph : over) {
      graph_replays_over_locked(graph, out);
    }
  }
  give_back_default(out);
}

// The registry's mutex: a pool block is deleted under it.
const char* PinPoolHostAllocatorImpl::block_state(const void* ptr) {
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  const PinBlock* block = blocks_.find(ptr);
  return block == nullptr ? nullptr : name(block->state());
}

std::vector<PoolInfo> PinPoolHostAllocatorImpl::pool_info() {
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  return graphs_.pool_info();
}

}  // namespace torch_npu_pinpool
