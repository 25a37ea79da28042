// PinPoolHostAllocator: torch_npu's pinned host allocator, made safe for ACLGraph capture.
//
// core/ owns the allocator's state: blocks and their states, graph pools, captured graphs, and
// the one class that keeps them. Its methods live in three files, one responsibility each:
//   core/pin_pool_allocator.cpp    the eager allocator (fast path, backing store, block map, ATen
//                                  hooks, stats, empty_cache) and its registration in ATen
//   graphs/capture_registry.cpp    every line that adds, ends or retires a capture or a graph
//   graphs/graph_pools.cpp         graph pools: allocation, block ownership, the fence queue
// runtime/ has the runtime calls (capture status, fence events); core/large_blocks.h the default
// pool's large requests (Note [Large blocks]); core/allocator_observer.h all it tells the audit.
//
// Note [Why our own pools]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// ATen >= 2.11 has host private pools, but they leak every block a capture used, assert when
// a released pool id is captured into again, recycle a pre-capture block freed inside a
// capture, and torch_npu 2.8 - 2.10 has no capture awareness at all. ATen's pool members are
// private and differ per release. So this allocator keeps ATen's CachingHostAllocatorImpl for
// the default (eager) pool only - we never call the base's begin_allocate_to_pool - and
// manages graph pools itself, identically on every torch 2.8 - 2.14.
//
// Note [Fast path]
// ~~~~~~~~~~~~~~~~
// Eager code pays one relaxed atomic load (and one size compare; free: two loads; allocate and
// free: one relaxed store of the block's state) per call on top of ATen's allocator:
//   allocate:      captures_underway_ == 0        -> Base::allocate (or, for a request of at
//                                                    least large_threshold_, LargeBlocks)
//   free:          !block->pool_ && kInUse        -> Base::free (or LargeBlocks for a large_ one)
//                  && captures_underway_ == 0
//   record_event:  captures_underway_ == 0        -> Base::record_event (pool blocks and
//                                                    foreign tensors only on a miss)
// Everything else (capture routing, graph pools, fences) runs under mutex_ and is only
// reached while a capture is underway or a graph-pool / captured block is involved. Deferred
// work (fences of dead graphs, pool blocks waiting for eager events) is picked up on the
// allocation slow path (allocate_host_memory), on every graph event, by empty_cache() and by
// stats. empty_cache() records any unrecorded fence and waits for the fences, so one
// host_empty_cache() after a graph's last use gives its blocks back.
#pragma once

#include "core/allocator_observer.h"
#include "runtime/npu_runtime.h"
#include "core/own_block_stats.h"
#include "runtime/version_shim.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace torch_npu_pinpool {

using CaptureFilter = std::function<bool(c10::Stream)>;

struct GraphPool;
struct CapturedGraph;

// A graph pool is one pool id on one device (Note [Pools per device]).
struct PoolKey {
  c10::DeviceIndex device;
  MempoolId id;
  bool operator==(const PoolKey& other) const {
    return device == other.device && id == other.id;
  }
};

// c10::MempoolIdHash only exists from torch 2.10.
struct PoolKeyHash {
  size_t operator()(const PoolKey& key) const {
    return (std::hash<uint64_t>()(key.id.first) * 31 + std::hash<uint64_t>()(key.id.second)) *
               31 +
           std::hash<int>()(key.device);
  }
};

// Note [Block states]
// ~~~~~~~~~~~~~~~~~~~
// Who may have a block next is its state, drawn once in docs/design.md ("Block states"):
//   kFree           cached for reuse: its pool's free list, ATen's free path (which waits for
//                   the events of its eager copies), or LargeBlocks' cache
//   kInUse          handed out, its tensor alive, no graph lists it
//   kGraphUsed      its tensor alive, and graphs list it (graph_uses_ > 0)
//   kGraphOwned     its tensor dead; graphs that list it live, or their replays may still run
//   kAwaitingCopies its tensor dead; eager copies from it may still run (its eager-use fence,
//                   Note [Eager-use fences]); graphs may list it too
// A block is handed out again only from kFree. The eager paths (ATen's Base and LargeBlocks)
// move a default-pool block between kFree and kInUse with one relaxed store each way; every
// other transition is made under the allocator's mutex_. The free fast path reads it: only a
// kInUse block's free is ATen's (Note [Fast path]).
enum class BlockState : uint8_t { kFree, kInUse, kGraphUsed, kGraphOwned, kAwaitingCopies };
const char* block_state_name(BlockState state);

struct PinBlock : at::HostBlock<Stream> {
  PinBlock(size_t size, void* ptr) : at::HostBlock<Stream>(size, ptr) {}
  PinBlock(size_t size, GraphPool* pool, bool large)
      : at::HostBlock<Stream>(size, nullptr), pool_(pool), large_(large) {}

  void set_state(BlockState state) { state_.store(state, std::memory_order_relaxed); }
  BlockState state() const { return state_.load(std::memory_order_relaxed); }

  // The graph pool that owns this block; null for default-pool blocks. Immutable.
  GraphPool* const pool_{nullptr};
  // A default-pool block owned by LargeBlocks, not by ATen's Base (Note [Large blocks]).
  const bool large_{false};
  std::atomic<BlockState> state_{BlockState::kInUse};  // Note [Block states]
  // Guarded by PinPoolHostAllocatorImpl::mutex_:
  // Its entries in the `blocks` lists of graphs not yet finished (Note [Graph ownership of
  // blocks]): a count, so one buffer read by thousands of graphs costs each capture and each
  // finished graph one increment or decrement, and a block keeps no table.
  uint32_t graph_uses_{0};
  uint64_t last_user_{0};  // handle of the graph that listed it last; never reused
};

// The fence of a freed block's eager uses: takes its streams_ (Note [Eager-use fences]).
UseFence take_use_fence(PinBlock* block);

// One graph memory pool on the host side; identified like the graph's device pool: a pool id
// on one device. See Note [Pool lifetime] and Note [Pools per device].
struct GraphPool {
  MempoolId id{0, 0};  // {0, 0} until bound (capture with pool=None on <= 2.10)
  c10::DeviceIndex device{-1};  // the device its graphs capture on; immutable
  int graphs{0};       // graphs of this pool that are capturing or alive
  int unannounced{0};  // of which made without the Python hooks (release_pool ends them)
  bool released{false};  // graphs reached 0: id erased, blocks go back as they become free
  std::vector<std::vector<PinBlock*>> free_blocks{64};  // reusable, by size index
  // What it owns: counts, not a set (a pool may hold thousands of blocks, and each is made
  // in allocate_in_pool and ends in unpin_locked); in use: kInUse or kGraphUsed.
  size_t blocks{0};
  size_t blocks_in_use{0};
  size_t bytes_held{0};
  size_t bytes_in_use{0};
};

// One captured graph, from capture begin until its blocks are given back.
// See Note [Graph handles] and Note [Replay fences].
struct CapturedGraph {
  enum class State { kAnnounced, kCapturing, kAlive };  // once dead it is out of graphs_
  uint64_t handle{0};
  State state{State::kAnnounced};
  bool announced{false};  // made by graph_begin (Python hooks); else by begin_allocate_to_pool
  GraphPool* pool{nullptr};
  CaptureFilter filter;          // while capturing: does this stream capture into this graph?
  std::atomic<void*> model{nullptr};  // the runtime's aclmdlRI, known once capture began
  c10::DeviceIndex device{-1};   // the capture device: replays run there
  std::optional<Stream> capture_stream;  // known once capture began
  // Inline storage for the usual graph (a few blocks, replayed on one stream): no heap
  // allocation per graph for these, nor a free when it finishes.
  c10::SmallVector<PinBlock*, 4> blocks;  // blocks its captured work uses: one per use counted
  c10::SmallVector<Stream, 1> replay_streams;  // where it was replayed; no duplicates
  // Dead and fenced: the fences in the queue that still cover it (one per replay stream).
  size_t fences_left{0};
  // The arguments of its captured host functions (Note [Strided pinned copies in capture]):
  // every replay uses them, so they go with the graph, once its fence completed.
  std::vector<std::shared_ptr<void>> replay_state;
};

// One entry of the fence queue (Note [Replay fences]): an event recorded on a replay stream
// behind every replay of `graphs` there.
struct ReplayFence {
  Event event;
  std::vector<CapturedGraph*> graphs;
};

struct PoolInfo {
  MempoolId id;
  c10::DeviceIndex device;
  int graphs;
  bool capturing;
  bool released;
  size_t blocks;
  size_t bytes_held;
  size_t bytes_in_use;
  size_t adopted_blocks;
};

class LargeBlocks;  // large_blocks.h

class PinPoolHostAllocatorImpl final : public at::CachingHostAllocatorImpl<Stream, Event, PinBlock> {
  using Base = at::CachingHostAllocatorImpl<Stream, Event, PinBlock>;

 public:
  explicit PinPoolHostAllocatorImpl(at::HostAllocator* native);

  // --- the eager allocator (pin_pool_allocator.cpp)
  std::pair<void*, void*> allocate(size_t size) override;
  void free(void* ctx) override;
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override;
  void empty_cache() override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;
  at::HostStats stats();
  void reset_accumulated_stats();
  void reset_peak_stats();
  // Whether any capture is registered (the pageable copy guard's fast check).
  bool capture_underway() const {
    return captures_underway_.load(std::memory_order_relaxed) != 0;
  }
  // In a forked child (Note [Forked children]): no capture runs here, whatever the parent had.
  void forget_captures() { captures_underway_.store(0); }

  // --- the capture registry (capture_registry.cpp); see Note [Graph handles]
  uint64_t graph_begin(MempoolId pool_id);
  void graph_capturing(uint64_t handle);
  bool graph_begin_failed(uint64_t handle);
  void graph_end(uint64_t handle, MempoolId pool_id);
  bool graph_end_failed(uint64_t handle);
  void graph_replay(uint64_t handle);
  // True when no fence is in flight: the caller runs process_pending() next, without the GIL
  // (Note [Replay fences]); graph_died itself records no event and keeps the GIL.
  bool graph_died(uint64_t handle);
  // A host function captured on `stream` uses the pinned blocks behind `blocks` ((ptr, ctx)
  // pairs) and `state` on every replay: both go to the graph capturing there. False (nothing
  // taken) when no capture the registry knows runs on `stream`.
  bool keep_for_replays(const Stream& stream, const std::vector<std::pair<void*, void*>>& blocks,
                        std::shared_ptr<void> state);
  // What torch_npu >= 2.11 calls through at::HostAllocator.
  void begin_allocate_to_pool(MempoolId pool_id, CaptureFilter filter);
  void end_allocate_to_pool(MempoolId pool_id);
  void release_pool(MempoolId pool_id);

  // --- graph pools (graph_pools.cpp)
  std::vector<PoolInfo> pool_info();
  // The state of the block that holds `ptr` (Note [Block states]); null if no block of ours.
  const char* block_state(const void* ptr);
  // Gives back what dead graphs and freed pool blocks hold once their events completed.
  // wait: record every fence still unrecorded and wait for the fences (bounded) first.
  void process_pending(bool wait = false);

 private:
  // ATen hooks (pin_pool_allocator.cpp).
  void allocate_host_memory(size_t size, void** ptr) override;
  void free_block(PinBlock* block) override;
  // Timing for host_alloc_time / host_free_time, as torch_npu's subclass times its pins.
  void add_host_time(c10::CachingAllocator::DurationStat& stat,
                     std::chrono::steady_clock::time_point start);
  void record_stream(std::optional<std::vector<Event>>& events, Stream stream) override;
  bool query_event(Event& event) override;
#if PINPOOL_HAS_ATEN_HOST_POOLS
  Stream get_current_stream() const override;
  bool stream_is_capturing(Stream stream) const override;
#endif

  // The default pool's allocate / free: requests >= large_threshold_ go to LargeBlocks instead
  // of ATen's Base (Note [Large blocks]).
  std::pair<void*, void*> allocate_eager(size_t size);
  std::pair<void*, void*> allocate_large(size_t size);
  void free_eager(PinBlock* block);

  // Backing store and block map (pin_pool_allocator.cpp); Note [Backing store], Note [Block
  // map]. `block` may be null for a default-pool block ATen's Base has not made yet
  // (bind_base_block fills it in).
  void* allocate_raw(size_t size, PinBlock* block);
  void bind_base_block(void* ptr, void* ctx);
  c10::DataPtr take_raw(void* ptr);
  PinBlock* find_block(const void* ptr);
  bool record_eager_use(void* ptr, void* ctx, Stream stream);
  // A large block pinned for `rounded` bytes; on a failed pin, idle large blocks are given back
  // and the pin is tried once more. give_back_idle_large: oldest first, until at most
  // `keep_bytes` stay idle.
  PinBlock* pin_large(size_t rounded);
  void give_back_idle_large(size_t keep_bytes);

  // Capture registry internals (capture_registry.cpp).
  CapturedGraph* graph_locked(uint64_t handle);
  CapturedGraph* capturing_graph_locked(Stream stream);
  CapturedGraph* new_graph_locked(bool announced);
  void start_capture_locked(CapturedGraph* graph, CaptureFilter filter);
  void resume_capture_locked(CapturedGraph* graph, CaptureFilter filter);
  CapturedGraph* graph_mid_capture_locked(c10::DeviceIndex device, MempoolId pool_id);
  void stop_capture_locked(CapturedGraph* graph);
  void graph_dies_locked(CapturedGraph* graph, std::vector<c10::DataPtr>& released);
  bool record_captured_use(PinBlock* block, CapturedGraph& graph);
  bool runtime_still_captures(CapturedGraph* graph);
  // A capture_begin or capture_end that raised: false if the graph died of it (Note [Capture
  // that ended without telling the allocator]).
  bool capture_failed(uint64_t handle, bool at_end);

  // Graph pools internals (graph_pools.cpp).
  std::pair<void*, void*> allocate_during_capture(size_t size);
  std::pair<void*, void*> allocate_in_pool(GraphPool& pool, size_t size);
  void free_under_lock(PinBlock* block);
  GraphPool* pool_for_capture_locked(c10::DeviceIndex device, MempoolId id);
  int capturing_into_locked(const GraphPool* pool) const;  // its graphs in capturing_
  void drop_pool_use_locked(GraphPool* pool, std::vector<c10::DataPtr>& released);
  void delete_pool_if_empty_locked(GraphPool* pool);
  void free_or_graph_owned_locked(PinBlock* block, std::vector<c10::DataPtr>& released,
                                  std::vector<PinBlock*>& base_frees);
  void unpin_locked(PinBlock* block, std::vector<c10::DataPtr>& released);
  void graph_replays_over_locked(CapturedGraph* graph, std::vector<c10::DataPtr>& released,
                                 std::vector<PinBlock*>& base_frees);
  void update_pending_locked();
  // One process_pending() pass and its steps (graph_pools.cpp, Note [Replay fences]); what a
  // pass gives back is collected in `out` and handed back with no lock of ours held.
  struct GivenBack {
    std::vector<c10::DataPtr> released;  // native's free of each
    std::vector<PinBlock*> base_frees;   // default-pool blocks for ATen's free
  };
  void process_pending_pass(Deadline deadline);
  void settle_eager_freed(GivenBack& out);
  void pop_completed_fences(Deadline deadline, GivenBack& out);
  void fence_dead_graphs(bool wait, GivenBack& out);

  at::HostAllocator* const native_;  // torch_npu's allocator: our backing store
  const size_t large_threshold_;     // SIZE_MAX when large blocks are off
  OwnBlockStats own_stats_;          // graph-pool and large blocks (Note [Stats of our own blocks])
  LargeBlocks* const large_;         // leaked with the allocator
  AllocatorObserver* const observer_;  // the audit report; null when off (Note [Audit hooks])

  // Note [Block map]: every block this allocator handed out, by address.
  struct MappedBlock {
    c10::DataPtr data;  // torch_npu's DataPtr that keeps the bytes ours (Note [Backing store])
    size_t size;
    PinBlock* block;  // null only between a Base block's pin and bind_base_block
  };
  std::mutex map_mutex_;
  std::map<uintptr_t, MappedBlock> block_map_;

  std::atomic<int> captures_underway_{0};  // capturing_.size(), for the fast path
  std::atomic<int> pending_{0};  // dead graphs + pool blocks waiting for events

  // Guards everything below, the graphs' and pools' fields, PinBlock's use counts /
  // state_ other than the eager kFree <-> kInUse moves. Only the slow
  // paths take it; it is never held while taking the GIL or while a block map DataPtr dies.
  std::mutex mutex_;
  uint64_t next_handle_{0};
  ska::flat_hash_map<uint64_t, CapturedGraph*> graphs_;  // announced, capturing or alive
  std::vector<CapturedGraph*> capturing_;                // state kCapturing
  // Dead graphs waiting for a fence to be recorded, and the fence queue: recorded fences in
  // record order (Note [Replay fences]). Both change under mutex_; fences_ only in
  // process_pending_pass (process_mutex_ held too), which waits for its events without mutex_.
  std::vector<CapturedGraph*> unfenced_;
  std::deque<ReplayFence> fences_;
  ska::flat_hash_map<PoolKey, GraphPool*, PoolKeyHash> pools_;  // live pools by device and id
  c10::DeviceIndex max_pool_device_{-1};  // the highest device any pool was made for
  // release_pool calls not yet matched to a graph, per pool id (Note [Pools per device]).
  std::map<MempoolId, int> unmatched_releases_;
  std::vector<GraphPool*> all_pools_;  // every pool object that exists (live or released)
  // Blocks free_under_lock freed while eager copies from them may still run, with the fence of
  // those copies (Note [Eager-use fences]).
  std::vector<std::pair<PinBlock*, UseFence>> pending_blocks_;

  std::mutex process_mutex_;  // serializes process_pending(); fences are used under it only
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

// Makes the allocator (once) without registering it: the graph hooks can reach it before it
// owns any pinned memory (torch_npu_pinpool.activate installs them in between).
PinPoolHostAllocator* prepare();
// Registers the allocator (once), preparing it first if need be. Returns false if it was
// registered already.
bool activate();
bool is_registered();
PinPoolHostAllocator* active_allocator();  // null until prepare()

}  // namespace torch_npu_pinpool
