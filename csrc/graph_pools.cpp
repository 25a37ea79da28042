// Graph pools: allocation inside a capture, who owns a block a captured operation uses, and
// when a block becomes reusable or goes back to the system. The fences that gate it are
// processed here too (process_pending).
#include "pin_pool_allocator.h"

#include "audit.h"
#include "large_blocks.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>
#include <torch_npu/csrc/core/npu/NPUStream.h>

#include <algorithm>

namespace torch_npu_pinpool {
namespace {
size_t size_index(size_t size) { return c10::llvm::Log2_64_Ceil(size); }

// Appends to `done` the fenced graphs whose fences completed, in fence order, and marks them
// fence_done; stops at the first fence that did not complete by `deadline` (one deadline for
// the whole call, however many graphs share that fence: Note [Replay fences]).
void completed(const std::vector<CapturedGraph*>& fenced, Deadline deadline,
               std::vector<CapturedGraph*>& done) {
  for (CapturedGraph* graph : fenced) {
    for (auto& fence : graph->fence) {
      if (!wait_events(fence->events, deadline)) {
        return;
      }
    }
    graph->fence_done = true;
    done.push_back(graph);
  }
}

// Records the fences of `to_fence` (dead graphs: their replay_streams no longer change): one
// event per stream, shared by every graph replayed there. Appends the graphs fenced to `fenced`
// and those replayed on a stream that is capturing now to still_unfenced (Note [Replay fences]).
// Each stream's capture status is read once per pass: thousands of graphs share one stream.
void record_fences(const std::vector<CapturedGraph*>& to_fence, std::vector<CapturedGraph*>& fenced,
                   std::vector<CapturedGraph*>& still_unfenced) {
  struct StreamFence {
    bool known{false};
    bool capturing{false};
    std::shared_ptr<ReplayFence> fence;  // made for the first graph fenced on the stream
  };
  ska::flat_hash_map<Stream, StreamFence> by_stream;
  auto of = [&by_stream](const Stream& stream) -> StreamFence& {
    StreamFence& entry = by_stream[stream];
    if (!entry.known) {
      entry.known = true;
      entry.capturing = in_capture(stream);
    }
    return entry;
  };
  const bool up = runtime_up();
  // The fence of `stream`, recorded once per pass; null when the runtime refused the record.
  auto fence_of = [&](const Stream& stream) -> std::shared_ptr<ReplayFence> {
    StreamFence& entry = of(stream);
    if (entry.fence == nullptr) {
      Event event = up ? try_record_on(stream) : nullptr;  // exiting: nothing is in flight
      if (up && event == nullptr) {
        return nullptr;
      }
      entry.fence = std::make_shared<ReplayFence>();
      if (event != nullptr) {
        entry.fence->events.push_back(std::move(event));
      }
    }
    return entry.fence;
  };
  for (CapturedGraph* graph : to_fence) {
    const auto& streams = graph->replay_streams;
    if (std::any_of(streams.begin(), streams.end(),
                    [&of](const Stream& s) { return of(s).capturing; })) {
      still_unfenced.push_back(graph);  // try again once that capture is over
      continue;
    }
    graph->fence.clear();
    for (const Stream& stream : streams) {
      if (auto fence = fence_of(stream)) {
        graph->fence.push_back(std::move(fence));
      } else {
        break;
      }
    }
    if (graph->fence.size() == streams.size()) {
      fenced.push_back(graph);
    } else {
      graph->fence.clear();
      still_unfenced.push_back(graph);  // a record failed: try again on a later pass
    }
  }
}
}  // namespace

// Note [Graph ownership of blocks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A captured copy keeps the host *address*; every replay reads or writes the bytes there as
// they are at that moment. So each graph lists the blocks its captured work uses
// (record_captured_use), whether a block was allocated inside a capture (a pool block) or
// before it (a default-pool block, then marked captured_), and whichever pool the graph
// captures into: a tensor kept from one graph and read by another graph's capture is used by
// both. Each block counts its entries in those lists (graph_uses_), and finish_graph_locked
// takes them back. A graph lists a block once per run of uses (last_user_): a block used by two
// captures in turn may be listed twice by one graph, and counted twice; the count stays exact.
// A block is never handed out again while
//   * its tensor is alive (allocated_), or
//   * a graph that lists it exists, or died and its replays may still run (its fence is not
//     complete: Note [Replay fences]), or
//   * an eager copy from it may still run (events_pending_: the fence recorded when its
//     tensor died, Note [Eager-use fences]).
// Once none holds (settle_locked), a pool block goes to its pool's free list while the pool
// lives, else back to the system; a default-pool block whose tensor died while it was
// captured goes to ATen's free path then (Base::free, with no stream left to fence).
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
  TORCH_CHECK(pool->capturing == 0, "torch_npu_pinpool: a graph capture into memory pool (",
              id.first, ", ", id.second, ") on device ", static_cast<int>(device),
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
    return allocate_default(size);
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
      block->allocated_ = true;
      pool.blocks_in_use++;
      pool.bytes_in_use += block->size_;
      return {block->ptr_, block};
    }
  }
  // The capture holds a use of `pool`, so it stays alive while we allocate unlocked.
  auto block = std::make_unique<PinBlock>(rounded, nullptr, &pool);
  block->ptr_ = allocate_raw(rounded, block.get());
  block->allocated_ = true;
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

// The slow free: a graph-pool block, a default-pool block a graph uses (captured_), or any
// block freed while a capture is underway. Its eager uses are fenced now, when the tensor dies
// (Note [Eager-use fences]); it is handed out again once it settles.
void PinPoolHostAllocatorImpl::free_slow(PinBlock* block) {
  std::vector<c10::DataPtr> released;  // destroyed last, with no lock of ours held
  std::vector<PinBlock*> base_frees;
  UseFence fence = take_use_fence(block);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (audit_ != nullptr) {
      audit_free_locked(block);
    }
    if (block->pool_ == nullptr) {
      block->free_deferred_ = true;  // ATen's free runs once the block settles
    } else {
      block->allocated_ = false;
      block->pool_->blocks_in_use--;
      block->pool_->bytes_in_use -= block->size_;
    }
    if (fence.empty()) {
      settle_locked(block, released, base_frees);
    } else {
      block->events_pending_ = true;
      pending_blocks_.emplace_back(block, std::move(fence));
      update_pending_locked();
    }
  }
  for (PinBlock* b : base_frees) {
    free_default(b);
  }
}

// recycled_by_native: the tensor of a block that a live graph's captured copies use dies.
void PinPoolHostAllocatorImpl::audit_free_locked(PinBlock* block) {
  if (block->live_uses_ != 0) {
    audit_->note_freed_while_used(block->ptr_, block->size_, block->pool_ != nullptr,
                                  block->capturing_uses_ != 0);
  }
}

// ---------------------------------------------------------------------------------------
// Where a block goes: Note [Graph ownership of blocks], Note [Pool lifetime]

void PinPoolHostAllocatorImpl::settle_locked(PinBlock* block,
                                             std::vector<c10::DataPtr>& released,
                                             std::vector<PinBlock*>& base_frees) {
  if (block->graph_uses_ != 0) {
    return;
  }
  GraphPool* pool = block->pool_;
  if (pool == nullptr) {
    block->captured_.store(false);  // its next free takes the fast path
    if (block->free_deferred_ && !block->events_pending_) {
      block->free_deferred_ = false;
      base_frees.push_back(block);  // ATen's free: no stream left to fence, cached at once
    }
    return;
  }
  if (block->allocated_ || block->events_pending_) {
    return;
  }
  if (audit_ != nullptr) {
    audit_->note_pool_block_settled(block->ptr_, block->size_);  // leaked_by_native
  }
  if (pool->released) {
    give_back_locked(block, released);
    maybe_delete_pool_locked(pool);
  } else {
    pool->free_blocks[size_index(block->size_)].push_back(block);
  }
}

void PinPoolHostAllocatorImpl::give_back_locked(PinBlock* block,
                                                std::vector<c10::DataPtr>& released) {
  GraphPool* pool = block->pool_;
  pool->blocks--;
  pool->bytes_held -= block->size_;
  released.push_back(take_raw(block->ptr_));
  delete block;
}

void PinPoolHostAllocatorImpl::maybe_delete_pool_locked(GraphPool* pool) {
  if (pool->released && pool->blocks == 0) {
    all_pools_.erase(std::remove(all_pools_.begin(), all_pools_.end(), pool), all_pools_.end());
    delete pool;
  }
}

void PinPoolHostAllocatorImpl::release_graph_use_locked(GraphPool* pool,
                                                        std::vector<c10::DataPtr>& released) {
  TORCH_INTERNAL_ASSERT(pool->graphs > 0, "memory pool released more often than used");
  if (--pool->graphs > 0) {
    return;
  }
  pool->released = true;
  if (audit_ != nullptr) {
    audit_->note_pool_released(pool->id, pool);  // Note [Released pools]
  }
  auto it = pools_.find(PoolKey{pool->device, pool->id});
  if (it != pools_.end() && it->second == pool) {
    pools_.erase(it);
  }
  for (auto& list : pool->free_blocks) {
    for (PinBlock* block : list) {
      give_back_locked(block, released);
    }
    list.clear();
  }
  maybe_delete_pool_locked(pool);
}

// The graph's fence completed: no replay of it can run any more.
void PinPoolHostAllocatorImpl::finish_graph_locked(CapturedGraph* graph,
                                                   std::vector<c10::DataPtr>& released,
                                                   std::vector<PinBlock*>& base_frees) {
  for (PinBlock* block : graph->blocks) {
    block->graph_uses_--;
    settle_locked(block, released, base_frees);
  }
  delete graph;
}

void PinPoolHostAllocatorImpl::update_pending_locked() {
  pending_.store(static_cast<int>(unfenced_.size() + fenced_.size() + pending_blocks_.size()),
                 std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------
// Deferred work

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

// Finishes the fenced graphs whose fence completed by `deadline`. Only the thread in
// process_pending (process_mutex_) changes fenced_, so it reads it here without mutex_.
void PinPoolHostAllocatorImpl::finish_fenced(Deadline deadline, PassScratch& pass) {
  pass.done.clear();
  completed(fenced_, deadline, pass.done);
  if (pass.done.empty()) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  fenced_.erase(std::remove_if(fenced_.begin(), fenced_.end(),
                               [](CapturedGraph* g) { return g->fence_done; }),
                fenced_.end());
  for (CapturedGraph* graph : pass.done) {
    finish_graph_locked(graph, pass.released, pass.base_frees);
  }
}

// Note [Pass scratch]
// ~~~~~~~~~~~~~~~~~~~
// A pass may finish thousands of graphs at once (host_empty_cache() after a vLLM-style reset of
// every graph of a pool); growing fresh lists in each pass (thousands of DataPtrs reallocated,
// a hash set of the finished graphs) took about a tenth of that pass, in malloc and free. So the
// pass works in scratch_, which only the thread inside process_pending (process_mutex_)
// touches: every vector is empty between passes and keeps its capacity. The DataPtrs in
// `released` die at the end of the pass, with no lock of ours held.
void PinPoolHostAllocatorImpl::process_pending_pass(Deadline deadline) {
  PassScratch& pass = scratch_;
  pass.clear();  // empty unless the last pass threw

  // Blocks freed after eager use: their fences are recorded and queried unlocked.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pass.blocks.swap(pending_blocks_);
  }
  for (auto& item : pass.blocks) {
    if (item.second.done()) {
      pass.ready.push_back(item.first);
    } else {
      pass.not_ready.push_back(std::move(item));
    }
  }
  pass.blocks.clear();

  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (PinBlock* block : pass.ready) {
      block->events_pending_ = false;
      settle_locked(block, pass.released, pass.base_frees);
    }
    for (auto& item : pass.not_ready) {
      pending_blocks_.push_back(std::move(item));
    }
  }
  pass.ready.clear();
  pass.not_ready.clear();
  // Dead graphs (Note [Replay fences]): finish those whose fence completed, then fence those
  // that died since (unless a fence is still in flight and this pass does not wait), then
  // finish the new fences that are done already (an idle stream's, say).
  finish_fenced(deadline, pass);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (deadline != no_wait() || fenced_.empty()) {
      pass.to_fence.swap(unfenced_);
    }
  }
  if (!pass.to_fence.empty()) {
    // Only this thread (process_mutex_) touches fences and changes fenced_.
    record_fences(pass.to_fence, pass.fenced, pass.still_unfenced);
    pass.to_fence.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      unfenced_.insert(unfenced_.end(), pass.still_unfenced.begin(), pass.still_unfenced.end());
      fenced_.insert(fenced_.end(), pass.fenced.begin(), pass.fenced.end());
    }
    pass.still_unfenced.clear();
    if (!pass.fenced.empty()) {
      finish_fenced(deadline, pass);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    update_pending_locked();
  }
  for (PinBlock* block : pass.base_frees) {
    free_default(block);
  }
  pass.base_frees.clear();
  pass.released.clear();  // native's free of each, no lock of ours held
}

// ---------------------------------------------------------------------------------------
// Introspection

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
    out.push_back({pool->id, pool->device, pool->graphs - pool->capturing, pool->capturing > 0,
                   pool->released, pool->blocks, pool->bytes_held, pool->bytes_in_use,
                   adopted.size()});
  }
  return out;
}

}  // namespace torch_npu_pinpool
