// Graph pools: allocation in a capture, block ownership, and the deferred work (fences).
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
//
// Note [Pool lifetime]
// ~~~~~~~~~~~~~~~~~~~~
// A pool lives while a graph of it captures or lives; meanwhile its free blocks are its own
// (empty_cache() leaves them). When its last graph dies it is released: the id may be captured
// into again (a new pool), its blocks go back as they settle, the object with its last block.

int PinPoolHostAllocatorImpl::capturing_into_locked(const GraphPool* pool) const {
  auto into_pool = [pool](const CapturedGraph* graph) { return graph->pool == pool; };
  return static_cast<int>(std::count_if(capturing_.begin(), capturing_.end(), into_pool));
}

// The live pool `id` names on `device` (Note [Pools per device]), or null.
GraphPool* PinPoolHostAllocatorImpl::live_pool_locked(c10::DeviceIndex device, MempoolId id) {
  for (GraphPool* pool : pools_) {
    if (pool->device == device && pool->named(id)) {
      return pool;
    }
  }
  return nullptr;
}

GraphPool* PinPoolHostAllocatorImpl::pool_for_capture_locked(c10::DeviceIndex device,
                                                             MempoolId id) {
  GraphPool* pool = live_pool_locked(device, id);
  if (pool == nullptr) {
    pool = pools_.emplace_back(new GraphPool{id, device});
  }
  TORCH_CHECK(capturing_into_locked(pool) == 0,
              "torch_npu_pinpool: a graph capture into memory pool (", id.first, ", ", id.second,
              ") on device ", static_cast<int>(device),
              " is already underway. Captures that share a pool must run one after another: "
              "end the other capture first, or capture into a different pool.");
  return pool;
}

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_during_capture(size_t size) {
  if (size == 0) {
    return {nullptr, nullptr};
  }
  const Stream stream = c10_npu::getCurrentNPUStream();
  GraphPool* pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (CapturedGraph* graph = capturing_graph_locked(stream)) {
      pool = graph->pool;
    }
  }
  if (pool == nullptr) {  // not a capturing stream
    return allocate_eager(size);
  }
  if (pending_.load(std::memory_order_relaxed) != 0) {
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
    std::lock_guard<std::mutex> lock(mutex_);
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
  std::lock_guard<std::mutex> lock(mutex_);
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
    std::lock_guard<std::mutex> lock(mutex_);
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
      block->set_state(BlockState::kAwaitingCopies);
      pending_blocks_.emplace_back(block, std::move(fence));
      update_pending_locked();
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
  if (pool->released) {
    unpin_locked(block, out.released);
    delete_pool_if_empty_locked(pool);
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
  std::lock_guard<std::mutex> lock(mutex_);
  for (GraphPool* pool : kNativeUnpinsCaptured ? pools_ : std::vector<GraphPool*>{}) {
    for (auto& list : pool->free_blocks) {
      for (PinBlock* block : list) {
        block->emptied_ = true;
      }
    }
  }
  for (auto& [handle, graph] : graphs_) {
    for (PinBlock* block : graph->blocks) {
      if (block->state() == BlockState::kGraphOwned &&
          (block->pool_ == nullptr || kNativeUnpinsCaptured)) {
        block->emptied_ = true;
      }
    }
  }
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

void PinPoolHostAllocatorImpl::delete_pool_if_empty_locked(GraphPool* pool) {
  if (pool->released && pool->blocks == 0) {
    pools_.erase(std::remove(pools_.begin(), pools_.end(), pool), pools_.end());
    delete pool;
  }
}

void PinPoolHostAllocatorImpl::drop_pool_use_locked(GraphPool* pool,
                                                    std::vector<c10::DataPtr>& released) {
  TORCH_INTERNAL_ASSERT(pool->graphs > 0, "memory pool released more often than used");
  if (--pool->graphs > 0) {
    return;
  }
  pool->released = true;
  if (observer_ != nullptr) {
    observer_->pool_released(pool->id, pool);  // Note [Released pools]
  }
  for (auto& list : pool->free_blocks) {
    for (PinBlock* block : list) {
      unpin_locked(block, released);
    }
    list.clear();
  }
  delete_pool_if_empty_locked(pool);
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

void PinPoolHostAllocatorImpl::update_pending_locked() {
  pending_.store(static_cast<int>(unfenced_.size() + fences_.size() + pending_blocks_.size()),
                 std::memory_order_relaxed);
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
  settle_eager_freed(out);
  fence_dead_graphs(out);
  retire_completed_fences(out);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    update_pending_locked();
  }
  give_back_default(out);
}

// kAwaitingCopies blocks whose fence is done settle; fences are queried unlocked.
void PinPoolHostAllocatorImpl::settle_eager_freed(GivenBack& out) {
  std::vector<std::pair<PinBlock*, UseFence>> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting.swap(pending_blocks_);
  }
  auto settled = std::stable_partition(waiting.begin(), waiting.end(),
                                       [](auto& item) { return !item.second.done(); });
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = settled; it != waiting.end(); ++it) {
    free_or_graph_owned_locked(it->first, out);
  }
  pending_blocks_.insert(pending_blocks_.end(), std::make_move_iterator(waiting.begin()),
                         std::make_move_iterator(settled));
}

// Every completed fence, in any order; queried unlocked. Only a pass (process_mutex_) erases
// from fences_, and others only append, which moves no element.
void PinPoolHostAllocatorImpl::retire_completed_fences(GivenBack& out) {
  std::vector<ReplayFence*> in_flight;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (ReplayFence& fence : fences_) {
      in_flight.push_back(&fence);
    }
  }
  std::vector<ReplayFence*> completed;
  for (ReplayFence* fence : in_flight) {
    if (event_done(fence->event)) {
      completed.push_back(fence);
    }
  }
  if (completed.empty()) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (ReplayFence* fence : completed) {
    for (CapturedGraph* graph : fence->graphs) {
      if (--graph->fences_left == 0) {
        graph_replays_over_locked(graph, out);
      }
    }
    note_settled_locked(*fence);
    fence->event.reset();  // marks it retired
  }
  fences_.erase(std::remove_if(fences_.begin(), fences_.end(),
                               [](const ReplayFence& fence) { return fence.event == nullptr; }),
                fences_.end());
}

// A dead graph of a pass, and the fences that will cover its replays (Note [Shared fences]).
struct PinPoolHostAllocatorImpl::DeadGraph {
  CapturedGraph* graph;
  std::vector<ReplayFence*> joins;  // in flight, in fences_
  std::vector<Stream> uncovered;    // a fence is recorded on each
};

// Under mutex_: which of dead.graph's replay streams a fence already covers (Note [Shared
// fences]); the others are added to to_record once.
void PinPoolHostAllocatorImpl::cover_locked(DeadGraph& dead, uint64_t now,
                                            std::vector<Stream>& to_record) {
  for (const Stream& stream : dead.graph->replay_streams) {
    auto settled = std::find_if(settled_.begin(), settled_.end(),
                                [&](const auto& entry) { return entry.first == stream; });
    if (settled != settled_.end() && settled->second == now) {
      continue;  // a completed fence follows its replays
    }
    auto fence = std::find_if(fences_.begin(), fences_.end(), [&](const ReplayFence& f) {
      return f.stream == stream && f.replays_before == now;
    });
    if (fence != fences_.end()) {
      dead.joins.push_back(&*fence);
      continue;
    }
    dead.uncovered.push_back(stream);
    if (std::find(to_record.begin(), to_record.end(), stream) == to_record.end()) {
      to_record.push_back(stream);
    }
  }
}

// Under mutex_: false (dead.graph joins nothing) if a stream it needs has no event.
bool PinPoolHostAllocatorImpl::join_fences_locked(DeadGraph& dead,
                                                  std::deque<ReplayFence>& recorded) {
  for (const Stream& stream : dead.uncovered) {
    auto fence = std::find_if(recorded.begin(), recorded.end(),
                              [&](const ReplayFence& f) { return f.stream == stream; });
    if (fence->event == nullptr) {
      return false;  // the stream is capturing, or the record failed: a later pass retries
    }
    dead.joins.push_back(&*fence);
  }
  dead.graph->fences_left = dead.joins.size();
  for (ReplayFence* fence : dead.joins) {
    fence->graphs.push_back(dead.graph);
  }
  return true;
}

// Under mutex_: `fence` completed, so did every replay enqueued before it (Note [Shared fences]).
void PinPoolHostAllocatorImpl::note_settled_locked(const ReplayFence& fence) {
  for (auto& [stream, replays_before] : settled_) {
    if (stream == fence.stream) {
      replays_before = std::max(replays_before, fence.replays_before);
      return;
    }
  }
  settled_.emplace_back(fence.stream, fence.replays_before);
}

void PinPoolHostAllocatorImpl::fence_dead_graphs(GivenBack& out) {
  const uint64_t now = replays_enqueued_.load();  // before any record below
  const bool up = runtime_up();
  std::vector<DeadGraph> dead;
  std::vector<Stream> to_record;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (CapturedGraph* graph : unfenced_) {
      dead.push_back({graph, {}, {}});
      if (up) {
        cover_locked(dead.back(), now, to_record);
      }
    }
    unfenced_.clear();
  }
  if (dead.empty()) {
    return;
  }
  std::deque<ReplayFence> recorded;  // a few: the replay streams of each device
  for (const Stream& stream : to_record) {
    recorded.push_back(
        {stream_capturing(stream) ? nullptr : try_record_on(stream), {}, stream, now});
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (DeadGraph& graph : dead) {
    if (!join_fences_locked(graph, recorded)) {
      unfenced_.push_back(graph.graph);
    } else if (graph.graph->fences_left == 0) {
      graph_replays_over_locked(graph.graph, out);
    }
  }
  for (ReplayFence& fence : recorded) {
    if (!fence.graphs.empty()) {
      fences_.push_back(std::move(fence));
    }
  }
}

// mutex_: a pool block is deleted under it.
const char* PinPoolHostAllocatorImpl::block_state(const void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  const PinBlock* block = find_block(ptr);
  return block == nullptr ? nullptr : name(block->state());
}

std::vector<PoolInfo> PinPoolHostAllocatorImpl::pool_info() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PoolInfo> out;
  for (GraphPool* pool : pools_) {
    ska::flat_hash_set<PinBlock*> adopted;  // default-pool blocks its graphs use
    for (auto& [handle, graph] : graphs_) {
      if (graph->pool == pool) {
        for (PinBlock* block : graph->blocks) {
          if (block->pool_ == nullptr) {
            adopted.insert(block);
          }
        }
      }
    }
    const int capturing = capturing_into_locked(pool);
    out.push_back({pool->id, pool->device, pool->graphs - capturing, capturing > 0, pool->released,
                   pool->blocks, pool->bytes_held, pool->bytes_in_use, adopted.size()});
  }
  return out;
}

}  // namespace torch_npu_pinpool
