// PinPoolHostAllocator: torch_npu's pinned host allocator, made safe for ACLGraph capture.
//
// Note [Why our own pools]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// ATen >= 2.11 has host private pools, but they leak every block a capture used, assert when
// a released pool id is captured into again, recycle a pre-capture block freed inside a
// capture, and torch_npu 2.8 - 2.10 has no capture awareness at all. ATen's pool members are
// private and differ per release. So this allocator keeps ATen's CachingHostAllocatorImpl for
// the default (eager) pool only - we never call the base's begin_allocate_to_pool - and
// manages graph pools itself, identically on every torch 2.8 - 2.13.
//
// Note [Fast path]
// ~~~~~~~~~~~~~~~~
// Eager code pays one relaxed atomic load per call on top of ATen's allocator:
//   allocate:      captures_underway_ == 0        -> Base::allocate
//   free:          !block->pool_ && !adopted_by_  -> Base::free
//   record_event:  captures_underway_ == 0        -> Base::record_event (pool blocks and
//                                                    foreign tensors only on a miss)
// Everything else (capture routing, graph pools, retirement) runs under mutex_ and is only
// reached while a capture is underway or a graph-pool block is involved. Deferred work
// (retiring pools) is picked up on the allocation slow path (allocate_host_memory), by
// release_pool, by empty_cache() and by stats. empty_cache() records any unrecorded fence and
// waits for the fences, so one host_empty_cache() after a graph's last use returns its pool.
#pragma once

#include "version_shim.h"

#include <ATen/core/CachingHostAllocator.h>
#include <torch_npu/csrc/core/npu/NPUEvent.h>
#include <torch_npu/csrc/core/npu/NPUStream.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace torch_npu_pinpool {

using Stream = c10_npu::NPUStream;
using CaptureFilter = std::function<bool(c10::Stream)>;

struct GraphPool;

// c10::MempoolIdHash only exists from torch 2.10.
struct PoolIdHash {
  size_t operator()(const MempoolId& id) const {
    return std::hash<uint64_t>()(id.first) * 31 + std::hash<uint64_t>()(id.second);
  }
};

// An NPUEvent that goes back to a per-device free list when dropped. NPUEvent records go
// through torch_npu's task queue, and NPUEvent::query() says "not ready" while the record
// still sits in that queue: exactly the conservative answer a host allocator needs.
struct EventRecycler {
  void operator()(c10_npu::NPUEvent* event) const;
};
using Event = std::unique_ptr<c10_npu::NPUEvent, EventRecycler>;

struct PinBlock : at::HostBlock<Stream> {
  PinBlock(size_t size, void* ptr) : at::HostBlock<Stream>(size, ptr) {}
  PinBlock(size_t size, void* ptr, GraphPool* pool)
      : at::HostBlock<Stream>(size, ptr), pool_(pool) {}

  // The graph pool that owns this block; null for default-pool blocks. Immutable.
  GraphPool* const pool_{nullptr};
  // A default-pool block that a captured operation reads or writes belongs to that
  // capture's pool until the pool retires. See Note [Capture block lifetime].
  std::atomic<GraphPool*> adopted_by_{nullptr};
  // Guarded by PinPoolHostAllocatorImpl::mutex_.
  bool used_by_capture_{false};
  bool free_deferred_{false};  // adopted block whose tensor died before its pool retired
  // Issue #14 hook: a default-pool block owned by LargeBlocks, not by ATen's Base. Immutable.
  bool large_{false};
};

// One graph memory pool on the host side; identified like the graph's device pool.
struct GraphPool {
  MempoolId id{0, 0};  // {0, 0} until bound (capture with pool=None on <= 2.10)
  int uses{0};                // graphs holding it + the capture underway into it
  bool capturing{false};
  bool retired{false};  // no graph uses it any more; id erased, waiting for the fence
  bool drained{false};  // fence complete: blocks are given back as soon as they are free
  std::vector<std::vector<PinBlock*>> free_blocks{64};  // reusable, by size index
  ska::flat_hash_set<PinBlock*> blocks;                 // every block it owns
  std::vector<PinBlock*> adopted;                       // default-pool blocks it captured
  std::vector<GraphPool*> depends_on;  // pools whose blocks its graphs read (one use each)
  ska::flat_hash_set<Stream> replay_streams;
  std::vector<Event> fence;  // retirement: one event per replay stream
  bool fence_recorded{false};
  size_t bytes_held{0};
  size_t bytes_in_use{0};
};

struct PoolInfo {
  MempoolId id;
  int graphs;
  bool capturing;
  bool retiring;
  size_t blocks;
  size_t bytes_held;
  size_t bytes_in_use;
  size_t adopted_blocks;
};

class LargeBlocks;  // csrc/large_blocks.h (issue #14)

class PinPoolHostAllocatorImpl final : public at::CachingHostAllocatorImpl<Stream, Event, PinBlock> {
  using Base = at::CachingHostAllocatorImpl<Stream, Event, PinBlock>;

 public:
  explicit PinPoolHostAllocatorImpl(at::HostAllocator* native);

  std::pair<void*, void*> allocate(size_t size) override;
  void free(void* ctx) override;
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override;
  void empty_cache() override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;
  at::HostStats stats();

  // Capture registry (called by torch_npu >= 2.11 through at::HostAllocator, or by the
  // Python hooks on <= 2.10). A zero pool id asks for a pool bound later by bind_pool().
  uint64_t begin_capture(MempoolId pool_id, CaptureFilter filter);
  void end_capture(MempoolId pool_id);
  void end_capture_token(uint64_t token, MempoolId bind_id);
  void abort_capture(uint64_t token);
  int abort_captures_since(uint64_t seq);
  std::vector<MempoolId> ended_since(uint64_t seq);
  std::vector<uint64_t> captures_since(uint64_t seq);
  uint64_t seq() const { return seq_.load(); }
  void release_pool(MempoolId pool_id);
  void note_replay(MempoolId pool_id);
  std::vector<PoolInfo> pool_info();
  // Gives back what retiring pools and freed pool blocks hold once their events completed.
  // wait: record every fence still unrecorded and wait for the fences (bounded) first.
  void process_pending(bool wait = false);
  at::HostAllocator* native() const { return native_; }

 private:
  // ATen hooks.
  void allocate_host_memory(size_t size, void** ptr) override;
  void free_block(PinBlock* block) override;
  void record_stream(std::optional<std::vector<Event>>& events, Stream stream) override;
  bool query_event(Event& event) override;
#if PINPOOL_HAS_ATEN_HOST_POOLS
  Stream get_current_stream() const override;
  bool stream_is_capturing(Stream stream) const override;
#endif

  struct Capture {
    uint64_t token;
    GraphPool* pool;
    CaptureFilter filter;
    std::thread::id thread;
  };
  struct PendingBlock {
    std::vector<Event> events;
    PinBlock* block;
  };

  std::pair<void*, void*> allocate_during_capture(size_t size);
  std::pair<void*, void*> allocate_in_pool(GraphPool& pool, size_t size);
  void free_slow(PinBlock* block);
  bool record_use(void* ptr, void* ctx, Stream stream);
  bool record_captured_use(PinBlock* block, GraphPool& pool);
  PinBlock* find_block(void* ptr, void* ctx);

  GraphPool* capture_pool_locked(Stream stream);
  GraphPool* pool_for_id_locked(MempoolId id);
  void release_use_locked(GraphPool* pool);
  void add_dependency_locked(GraphPool& pool, GraphPool* other);
  void place_free_block_locked(PinBlock* block, std::vector<c10::DataPtr>& released);
  void drain_locked(GraphPool* pool, std::vector<c10::DataPtr>& released,
                    std::vector<PinBlock*>& base_frees);
  void forget_pool_if_empty_locked(GraphPool* pool);
  void update_pending_locked();
  void unregister_capture_locked(std::vector<Capture>::iterator it);

  // Issue #14 hooks (Note [Large blocks]): the default pool's allocate / free, routing
  // requests >= large_threshold_ to LargeBlocks instead of ATen's Base.
  std::pair<void*, void*> allocate_default(size_t size);
  std::pair<void*, void*> allocate_large(size_t size);
  void free_default(PinBlock* block);

  void* allocate_raw(size_t size, PinBlock* pool_block);
  c10::DataPtr take_raw(void* ptr);
  std::vector<Event> record_events(const ska::flat_hash_set<Stream>& streams);
  bool events_done(std::vector<Event>& events);
  bool wait_events(std::vector<Event>& events);
  void process_pending_pass(bool wait);

  at::HostAllocator* const native_;  // torch_npu's allocator: our backing store
  const size_t large_threshold_;     // issue #14: SIZE_MAX when large blocks are off
  LargeBlocks* const large_;         // issue #14; leaked with the allocator

  // Note [Backing store]: ptr -> the native DataPtr that keeps those bytes ours.
  std::mutex backing_mutex_;
  ska::flat_hash_map<void*, std::pair<c10::DataPtr, PinBlock*>> backing_;

  std::atomic<int> captures_underway_{0};
  std::atomic<int> pending_{0};  // retiring pools + pool blocks waiting for events

  // Guards everything below and PinBlock::used_by_capture_ / free_deferred_, and the
  // allocated_ flag of pool blocks. Only the slow paths take it.
  std::mutex mutex_;
  std::vector<Capture> captures_;
  ska::flat_hash_map<MempoolId, GraphPool*, PoolIdHash> pools_;
  std::vector<GraphPool*> anonymous_pools_;  // capturing with pool=None on <= 2.10
  std::vector<GraphPool*> retiring_;
  std::vector<GraphPool*> drained_;  // retired, fenced, still owning blocks in use
  std::vector<PendingBlock> pending_blocks_;
  std::vector<std::pair<uint64_t, std::pair<MempoolId, std::thread::id>>> ended_;
  std::atomic<uint64_t> seq_{0};

  std::mutex process_mutex_;  // serializes process_pending()
  std::atomic<bool> process_again_{false};  // a process_pending() found process_mutex_ taken
};

// The object in ATen's host-allocator registry (at::setHostAllocator, priority 1).
class PinPoolHostAllocator final : public at::HostAllocator {
 public:
  explicit PinPoolHostAllocator(at::HostAllocator* native);

  at::DataPtr allocate(size_t size) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override;
  void empty_cache() override;
  at::HostStats get_stats() override;
  void reset_accumulated_stats() override;
  void reset_peak_stats() override;
#if PINPOOL_HAS_ATEN_HOST_POOLS
  void begin_allocate_to_pool(MempoolId pool_id, CaptureFilter filter) override;
  void end_allocate_to_pool(MempoolId pool_id) override;
  void release_pool(MempoolId pool_id) override;
#endif

  PinPoolHostAllocatorImpl& impl() { return *impl_; }

 private:
  // Leaked with the allocator: nothing here is ever destroyed (exit-order safety).
  PinPoolHostAllocatorImpl* impl_;
};

// Registers the allocator (once). Returns false if it was already active.
bool activate();
PinPoolHostAllocator* active_allocator();  // null until activate()

// Capture status of a stream without flushing torch_npu's task queue:
// {aclmdlRICaptureStatus, aclmdlRI}. {0, null} if the runtime lacks the API.
std::pair<int, void*> capture_info(const Stream& stream);

}  // namespace torch_npu_pinpool
