// Graph pools: allocation inside a capture, who owns a block a captured operation uses, and
// when a block becomes reusable or goes back to the system. The fences that gate it are
// processed here too (process_pending).
#include "core/pin_pool_allocator.h"

#include "core/large_blocks.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>
#include <torch_npu/csrc/core/npu/NPUStream.h>

#include <algorithm>
#include <chrono>

namespace torch_npu_pinpool {
namespace {
size_t size_index(size_t size) { return c10::llvm::Log2_64_Ceil(size); }

}  // namespace

// Note [Graph ownership of blocks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A captured copy keeps the host *address*; every replay reads or writes the bytes there as they
// are at that moment. So each graph lists the blocks its captured work uses (record_captured_use),
// whether a block was allocated inside a capture (a pool block) or before it (a default-pool
// block), and whichever pool the graph captures into: a tensor kept from one graph and read by
// another graph's capture is used by both. Each block counts its entries in those lists
// (graph_uses_), and graph_replays_over_locked takes them back. A graph lists a block once per run
// of uses (last_user_): a block used by two captures in turn may be listed twice by one graph, and
// counted twice; the count stays exact. A block is never handed out again while its tensor is alive
// (kInUse, kGraphUsed), a graph that lists it exists or died with replays that may still run
// (kGraphUsed, kGraphOwned: its fence is not complete, Note [Replay fences]), or an eager copy from
// it may still run (kAwaitingCopies: Note [Eager-use fences]). Once none holds
// (free_or_graph_owned_locked: kFree), a pool block goes to its pool's free list while the pool
// lives, else back to the system; a default-pool block goes to ATen's free path (Base::free, with
// no stream left to fence).
//
// Note [Pool lifetime]
// ~~~~~~~~~~~~~~~~~~~~
// A pool lives while a graph of it is capturing or alive. While it lives, its free blocks
// (freed unused inside a capture, or released by dead graphs) are its own: the next capture
// into it reuses them, and empty_cache() leaves them alone, as ATen's private pools do. When
// its last graph dies the pool is released: its id is erased at once (it can be captured into
// again, as a new pool), its free blocks go back to the system, and every block still held
// goes back as soon as it settles. The pool object goes when its last block does.

// ---------------------------------------------------------------------------------------
// Allocation and free

int PinPoolHostAllocatorImpl::capturing_into_locked(const GraphPool* pool) const {
  auto into_pool = [pool](const CapturedGraph* graph) { return graph->pool == pool; };
  return static_cast<int>(std::count_if(capturing_.begin(), capturing_.end(), into_pool));
}

// The pool `id` names on `device` (Note [Pools per device]): captures on other devices into the
// same id have pools of their own, as the device allocator's pools are per device.
GraphPool* PinPoolHostAllocatorImpl::pool_for_capture_locked(c10::DeviceIndex device,
                                                             MempoolId id) {
  GraphPool* pool = nullptr;
  if (id != MempoolId{0, 0}) {  // {0, 0}: <= 2.10 capture with pool=None, bound at its end
    auto it = pools_.find(PoolKey{device, id});
    pool = it == pools_.end() ? nullptr : it->second;
  }
  if (pool == nullptr) {
    pool = new GraphPool();
    pool->id = id;
    pool->device = device;
    max_pool_device_ = std::max(max_pool_device_, device);  // release_pool looks up to it
    all_pools_.push_back(pool);
    if (id != MempoolId{0, 0}) {
      pools_.emplace(PoolKey{device, id}, pool);
    }
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
  // Other streams and threads keep using the default pool while a capture runs.
  if (pool == nullptr) {
    return allocate_eager(size);
  }
  if (pending_.load(std::memory_order_relaxed) != 0) {
    process_pending();  // blocks of dead graphs become reusable here
  }
  return allocate_in_pool(*pool, size);
}

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_in_pool(GraphPool& pool,
                                                                    size_t size) {
  // Large requests are page-rounded (Note [Large blocks]), so a bucket can hold blocks of
  // differing sizes: take only one that holds the request (PyTorch PR 192722).
  const size_t rounded =
      size >= large_threshold_ ? round_large(size) : c10::llvm::PowerOf2Ceil(size);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& free_list = pool.free_blocks[size_index(rounded)];
    auto fits = std::find_if(free_list.begin(), free_list.end(),
                             [&](const PinBlock* b) { return b->size_ >= rounded; });
    if (fits != free_list.end()) {
      PinBlock* block = *fits;
      free_list.erase(fits);
      block->set_state(BlockState::kInUse);
      pool.blocks_in_use++;
      pool.bytes_in_use += block->size_;
      own_stats_.handed_out(block->size_);
      return {block->ptr_, block};
    }
  }
  // The capture holds a use of `pool`, so it stays alive while we allocate unlocked.
  auto block = std::make_unique<PinBlock>(rounded, &pool, /*large=*/false);
  const auto start = std::chrono::steady_clock::now();
  block->ptr_ = allocate_raw(rounded, block.get());
  add_host_time(stats_.host_alloc_time, start);  // Note [Stats of our own blocks]
  own_stats_.pinned(rounded);
  std::lock_guard<std::mutex> lock(mutex_);
  pool.blocks++;
  pool.blocks_in_use++;
  pool.bytes_held += rounded;
  pool.bytes_in_use += rounded;
  PinBlock* raw = block.release();
  return {raw->ptr_, raw};
}

UseFence take_use_fence(PinBlock* block) {
  std::vector<Stream> streams;
  {
    std::lock_guard<std::mutex> guard(block->mutex_);
    streams.assign(block->streams_.begin(), block->streams_.end());
    block->streams_.clear();
  }
  return UseFence(std::move(streams));
}

// The slow free: a graph-pool block, a default-pool block a graph uses (kGraphUsed), or any
// block freed while a capture is underway. Its eager uses are fenced now, when the tensor dies
// (Note [Eager-use fences]); it is handed out again once it settles.
void PinPoolHostAllocatorImpl::free_under_lock(PinBlock* block) {
  std::vector<c10::DataPtr> released;  // destroyed last, with no lock of ours held
  std::vector<PinBlock*> base_frees;
  UseFence fence = take_use_fence(block);
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
      free_or_graph_owned_locked(block, released, base_frees);
    } else {
      block->set_state(BlockState::kAwaitingCopies);
      pending_blocks_.emplace_back(block, std::move(fence));
      update_pending_locked();
    }
  }
  for (PinBlock* b : base_frees) {
    free_eager(b);
  }
}

// ---------------------------------------------------------------------------------------
// Where a block goes: Note [Graph ownership of blocks], Note [Pool lifetime]

// A block whose tensor died and whose eager copies ran: graph-owned while graphs list it,
// else free (Note [Block states]).
void PinPoolHostAllocatorImpl::free_or_graph_owned_locked(PinBlock* block,
                                                          std::vector<c10::DataPtr>& released,
                                                          std::vector<PinBlock*>& base_frees) {
  if (block->graph_uses_ != 0) {
    block->set_state(BlockState::kGraphOwned);
    return;
  }
  block->set_state(BlockState::kFree);
  GraphPool* pool = block->pool_;
  if (pool == nullptr) {
    base_frees.push_back(block);  // ATen's free: no stream left to fence, cached at once
    return;
  }
  if (observer_ != nullptr) {
    observer_->pool_block_settled(block->ptr_, block->size_);  // leaked_by_native
  }
  if (pool->released) {
    unpin_locked(block, released);
    delete_pool_if_empty_locked(pool);
  } else {
    pool->free_blocks[size_index(block->size_)].push_back(block);
  }
}

void PinPoolHostAllocatorImpl::unpin_locked(PinBlock* block, std::vector<c10::DataPtr>& released) {
  GraphPool* pool = block->pool_;
  pool->blocks--;
  pool->bytes_held -= block->size_;
  const auto start = std::chrono::steady_clock::now();
  released.push_back(take_raw(block->ptr_));
  add_host_time(stats_.host_free_time, start);  // Note [Stats of our own blocks]
  own_stats_.given_back(block->size_);
  delete block;
}

void PinPoolHostAllocatorImpl::delete_pool_if_empty_locked(GraphPool* pool) {
  if (pool->released && pool->blocks == 0) {
    all_pools_.erase(std::remove(all_pools_.begin(), all_pools_.end(), pool), all_pools_.end());
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
  auto it = pools_.find(PoolKey{pool->device, pool->id});
  if (it != pools_.end() && it->second == pool) {
    pools_.erase(it);
  }
  for (auto& list : pool->free_blocks) {
    for (PinBlock* block : list) {
      unpin_locked(block, released);
    }
    list.clear();
  }
  delete_pool_if_empty_locked(pool);
}

// The graph's fence completed: no replay of it can run any more.
void PinPoolHostAllocatorImpl::graph_replays_over_locked(CapturedGraph* graph,
                                                         std::vector<c10::DataPtr>& released,
                                                         std::vector<PinBlock*>& base_frees) {
  for (PinBlock* block : graph->blocks) {
    if (--block->graph_uses_ != 0) {
      continue;
    }
    if (block->state() == BlockState::kGraphUsed) {
      block->set_state(BlockState::kInUse);  // its tensor lives; a default-pool one's free: ATen's
    } else if (block->state() == BlockState::kGraphOwned) {
      free_or_graph_owned_locked(block, released, base_frees);
    }  // kAwaitingCopies: its eager-use fence settles it
  }
  delete graph;
}

void PinPoolHostAllocatorImpl::update_pending_locked() {
  pending_.store(static_cast<int>(unfenced_.size() + fences_.size() + pending_blocks_.size()),
                 std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------
// Deferred work: Note [Replay fences]

// Never silently skipped: a caller that finds another thread inside leaves process_again_
// set, and that thread runs another pass before it leaves (so a graph that dies while another
// thread processes - a GC finalizer, say - gets its fence at once).
void PinPoolHostAllocatorImpl::process_pending(bool wait) {
  process_again_.store(true);
  for (;;) {
    std::unique_lock<std::mutex> serial(process_mutex_, std::defer_lock);
    if (wait) {
      serial.lock();
    } else if (!serial.try_lock()) {
      return;  // the thread inside sees process_again_ after its pass
    }
    if (wait) {  // this caller's own pass, even if another thread consumed the request
      process_again_.store(false);
      process_pending_pass(fence_wait_deadline());
      wait = false;
    }
    while (process_again_.exchange(false)) {
      process_pending_pass(no_wait());
    }
    serial.unlock();
    if (!process_again_.load()) {
      return;
    }
  }
}

// One pass, one deadline: blocks freed after eager copies settle once those copies ran; the
// fences that completed finish the graphs they cover; the graphs that died since are fenced;
// and new fences that completed at once (an idle stream's) finish theirs too.
void PinPoolHostAllocatorImpl::process_pending_pass(Deadline deadline) {
  GivenBack out;  // dies last, with no lock of ours held
  settle_eager_freed(out);
  pop_completed_fences(deadline, out);
  fence_dead_graphs(/*wait=*/deadline != no_wait(), out);
  pop_completed_fences(deadline, out);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    update_pending_locked();
  }
  for (PinBlock* block : out.base_frees) {
    free_eager(block);
  }
}

// Blocks free_under_lock freed while eager copies from them may still run: their fences are
// recorded and queried unlocked (UseFence counts a runtime error as "not done", never throws).
void PinPoolHostAllocatorImpl::settle_eager_freed(GivenBack& out) {
  std::vector<std::pair<PinBlock*, UseFence>> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting.swap(pending_blocks_);
  }
  std::vector<bool> done;
  done.reserve(waiting.size());
  for (auto& item : waiting) {
    done.push_back(item.second.done());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (done[i]) {
      free_or_graph_owned_locked(waiting[i].first, out.released, out.base_frees);
    } else {
      pending_blocks_.push_back(std::move(waiting[i]));
    }
  }
}

// Pops the fences that completed by `deadline`, front first, and finishes each graph whose
// last fence that was; stops at the first fence still in flight then. Only this thread
// (process_mutex_) pushes or pops fences_, so its front stays put while waited for unlocked.
void PinPoolHostAllocatorImpl::pop_completed_fences(Deadline deadline, GivenBack& out) {
  for (;;) {
    ReplayFence* front = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (fences_.empty()) {
        return;
      }
      front = &fences_.front();
    }
    if (!wait_event(front->event, deadline)) {
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (CapturedGraph* graph : front->graphs) {
      if (--graph->fences_left == 0) {
        graph_replays_over_locked(graph, out.released, out.base_frees);
      }
    }
    fences_.pop_front();
  }
}

// Records the fences of the graphs that died since the last ones were recorded - when this
// pass waits, or when no fence is in flight (else they share the next one). One event per
// replay stream, for every graph replayed there; a graph replayed on a stream that is
// capturing now, or whose event could not be recorded, stays unfenced for a later pass.
void PinPoolHostAllocatorImpl::fence_dead_graphs(bool wait, GivenBack& out) {
  std::vector<CapturedGraph*> dead;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!wait && !fences_.empty()) {
      return;
    }
    dead.swap(unfenced_);
  }
  if (dead.empty()) {
    return;
  }
  const bool up = runtime_up();  // exiting: nothing is in flight, no fence is needed
  struct StreamFence {
    Stream stream;
    ReplayFence fence;  // no event: the stream is capturing, or the record failed
  };
  std::deque<StreamFence> streams;  // a few: the replay streams of each device
  auto fence_of = [&streams](const Stream& stream) -> StreamFence& {
    for (StreamFence& entry : streams) {
      if (entry.stream == stream) {
        return entry;
      }
    }
    // Never on a capturing stream: Note [Is this stream capturing].
    streams.push_back({stream, {in_capture(stream) ? nullptr : try_record_on(stream), {}}});
    return streams.back();
  };
  std::vector<CapturedGraph*> unfenced, finished;
  for (CapturedGraph* graph : dead) {
    const auto& replayed = graph->replay_streams;
    if (!up || replayed.empty()) {
      finished.push_back(graph);
    } else if (std::all_of(replayed.begin(), replayed.end(),
                           [&](const Stream& s) { return fence_of(s).fence.event != nullptr; })) {
      graph->fences_left = replayed.size();
      for (const Stream& stream : replayed) {
        fence_of(stream).fence.graphs.push_back(graph);
      }
    } else {
      unfenced.push_back(graph);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  unfenced_.insert(unfenced_.end(), unfenced.begin(), unfenced.end());
  for (StreamFence& entry : streams) {
    if (!entry.fence.graphs.empty()) {
      fences_.push_back(std::move(entry.fence));
    }
  }
  for (CapturedGraph* graph : finished) {
    graph_replays_over_locked(graph, out.released, out.base_frees);
  }
}

// ---------------------------------------------------------------------------------------
// Introspection

const char* block_state_name(BlockState state) {
  static constexpr const char* kNames[] = {"free", "in_use", "graph_used", "graph_owned",
                                           "awaiting_copies"};  // in BlockState's order
  return kNames[static_cast<int>(state)];
}

const char* PinPoolHostAllocatorImpl::block_state(const void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);  // a pool block is deleted under it
  const PinBlock* block = find_block(ptr);
  return block == nullptr ? nullptr : block_state_name(block->state());
}

std::vector<PoolInfo> PinPoolHostAllocatorImpl::pool_info() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PoolInfo> out;
  for (GraphPool* pool : all_pools_) {
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
    out.push_back({pool->id, pool->device, pool->graphs - capturing, capturing > 0,
                   pool->released, pool->blocks, pool->bytes_held, pool->bytes_in_use,
                   adopted.size()});
  }
  return out;
}

}  // namespace torch_npu_pinpool
