// PinPoolHostAllocator: torch_npu's pinned host allocator, made safe for ACLGraph capture.
//
// Note [Why our own pools]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// ATen's host private pools (>= 2.11) leak captured blocks, assert on recapture into a released
// id and recycle blocks freed inside a capture; torch_npu <= 2.10 has none. So ATen's Base runs
// the default pool only (its begin_allocate_to_pool is never called) and graph pools are ours.
//
// Note [Fast path]
// ~~~~~~~~~~~~~~~~
// With captures_underway_ == 0, free (of a kInUse default-pool block) and record_event add one
// relaxed load to ATen's path (2.13+: free one more, pinned_max_cached_size), allocate two (and
// a size compare). Everything else runs under
// mutex_; deferred work (pending_) is picked up before every allocation (as ATen processes its
// events), by graph events, stats and empty_cache.
#pragma once

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <cstring>
#include <deque>
#include <functional>
#include <map>

#include "core/allocator_observer.h"
#include "core/own_block_stats.h"

namespace torch_npu_pinpool {

using CaptureFilter = std::function<bool(c10::Stream)>;

struct GraphPool;

// Note [Block states]
// ~~~~~~~~~~~~~~~~~~~
// Who may have a block next (docs/design.md, "Block states"):
//   kFree           cached for reuse
//   kInUse          its tensor alive, no graph lists it
//   kGraphUsed      its tensor alive, graphs list it (graph_uses_ > 0)
//   kGraphOwned     its tensor dead; graphs that list it live or may still replay
//   kAwaitingCopies its tensor dead; eager copies may still run (Note [Eager-use fences])
// Only kFree is handed out. The eager paths move a default-pool block kFree <-> kInUse with a
// relaxed store; every other move is made under mutex_.
enum class BlockState : uint8_t { kFree, kInUse, kGraphUsed, kGraphOwned, kAwaitingCopies };

// The name block_state() gives a state (test/pinpool/test_block_states.py).
inline const char* name(BlockState state) {
  switch (state) {
    case BlockState::kFree:
      return "free";
    case BlockState::kInUse:
      return "in_use";
    case BlockState::kGraphUsed:
      return "graph_used";
    case BlockState::kGraphOwned:
      return "graph_owned";
    case BlockState::kAwaitingCopies:
      return "awaiting_copies";
  }
  return "unknown";  // not a BlockState
}

struct PinBlock : at::HostBlock<Stream> {
  PinBlock(size_t size, void* ptr) : at::HostBlock<Stream>(size, ptr) {}
  PinBlock(size_t size, GraphPool* pool, bool large)
      : at::HostBlock<Stream>(size, nullptr), pool_(pool), large_(large) {}

  void set_state(BlockState state) { state_.store(state, std::memory_order_relaxed); }
  BlockState state() const { return state_.load(std::memory_order_relaxed); }

  GraphPool* const pool_{nullptr};  // null for a default-pool block
  const bool large_{false};         // owned by LargeBlocks (Note [Large blocks])
  std::atomic<BlockState> state_{BlockState::kInUse};
  // Under mutex_: entries in unfinished graphs' `blocks`, and the graph that listed it last.
  uint32_t graph_uses_{0};
  uint64_t last_user_{0};
  bool emptied_{false};  // Note [Emptied while graphs held it]
};

// Note [Eager-use fences]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A freed block is reused once every eager copy that used it ran: one event per stream in its
// streams_, recorded when its tensor dies, never on a capturing stream (that stream stays
// unfenced, and the fence not done, until its capture is over).
class UseFence {
 public:
  UseFence() = default;
  explicit UseFence(PinBlock* block);  // takes block->streams_
  bool done() { return record() && events_done(events_); }
  bool empty() const { return events_.empty() && unfenced_.empty(); }

 private:
  bool record();  // true once every stream is fenced
  std::vector<Event> events_;
  std::vector<Stream> unfenced_;
};

// A pool id on one device (Note [Pools per device], Note [Pool lifetime]).
struct GraphPool {
  MempoolId id{0, 0};           // {0, 0} until bound (pool=None on <= 2.10)
  c10::DeviceIndex device{-1};  // its graphs' capture device
  int graphs{0};                // capturing or alive
  bool released{false};         // graphs reached 0: id free, blocks go back as they settle
  std::vector<std::vector<PinBlock*>> free_blocks{64};                 // by size index
  size_t blocks{0}, blocks_in_use{0}, bytes_held{0}, bytes_in_use{0};  // in use: tensor alive
  // Whether `other` names this pool now: neither unbound nor released.
  bool named(MempoolId other) const { return !released && id != MempoolId{0, 0} && id == other; }
};

// Note [Graph handles], Note [Replay fences].
struct CapturedGraph {
  enum class State { kAnnounced, kCapturing, kAlive };  // once dead it is out of graphs_
  uint64_t handle{0};
  State state{State::kAnnounced};
  bool announced{false};     // made by graph_begin, not by begin_allocate_to_pool
  GraphPool* pool{nullptr};  // its device is the capture device; null once dead
  CaptureFilter filter;      // while capturing
  std::atomic<void*> model{nullptr};
  std::optional<Stream> capture_stream;
  c10::SmallVector<PinBlock*, 4> blocks;  // one entry per counted use
  c10::SmallVector<Stream, 1> replay_streams;
  size_t fences_left{0};  // dead: fences in fences_ that cover it
  // Host function arguments (Note [Strided pinned copies in capture]), kept until its fence.
  std::vector<std::shared_ptr<void>> replay_state;
};

struct ReplayFence {
  Event event;
  std::vector<CapturedGraph*> graphs;
  Stream stream;
  uint64_t replays_before;  // replays_enqueued_ before the record (Note [Shared fences])
};

struct PoolInfo {
  MempoolId id;
  c10::DeviceIndex device;
  int graphs;
  bool capturing, released;
  size_t blocks, bytes_held, bytes_in_use, adopted_blocks;
};

class LargeBlocks;

class PinPoolHostAllocatorImpl final
    : public at::CachingHostAllocatorImpl<Stream, Event, PinBlock> {
  using Base = at::CachingHostAllocatorImpl<Stream, Event, PinBlock>;

 public:
  explicit PinPoolHostAllocatorImpl(at::HostAllocator* native);

  // Note [Is this stream capturing]: the one place the plugin asks.
  static bool stream_capturing(const Stream& stream);

  // pin_pool_allocator.cpp
  std::pair<void*, void*> allocate(size_t size) override;
  void free(void* ctx) override;
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override;
  void empty_cache() override;
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  at::HostStats stats();
  void reset_accumulated_stats();
  void reset_peak_stats();
  bool capture_underway() const { return captures_underway_.load(std::memory_order_relaxed) != 0; }
  void forget_captures() { captures_underway_.store(0); }  // Note [Forked children]
  void lock_for_fork();      // pthread_atfork: the locks below, in order (bounded)
  void unlock_after_fork();  // in the parent and in the child: those it took
  void unlock_in_forked_child();

  // capture_registry.cpp: Note [Graph handles]
  uint64_t graph_begin(MempoolId pool_id);
  void graph_capturing(uint64_t handle);
  void graph_end(uint64_t handle, MempoolId pool_id);
  // False if the graph died of it (Note [Capture that ended without telling the allocator]).
  bool capture_failed(uint64_t handle, bool at_end);
  void graph_replay(uint64_t handle);  // after its replay was enqueued (Note [Shared fences])
  void graph_died(uint64_t handle);    // run process_pending() next, without the GIL
  bool owns(const void* ptr) { return find_block(ptr) != nullptr; }  // any byte of a block
  // The graph capturing on `stream` keeps `blocks` and `state` for its replays; false if none.
  bool keep_for_replays(const Stream& stream, const std::vector<std::pair<void*, void*>>& blocks,
                        std::shared_ptr<void> state);
  void begin_allocate_to_pool(MempoolId pool_id, CaptureFilter filter);
  void end_allocate_to_pool(MempoolId pool_id);
  void release_pool(MempoolId pool_id);
  // Around torch_npu's reset() of a graph made through the hooks (Note [Releases without hooks]).
  static void hooked_reset(bool entering);

  // graph_pools.cpp
  std::vector<PoolInfo> pool_info();
  const char* block_state(const void* ptr);     // null if no block of ours holds `ptr`
  void process_pending(bool own_pass = false);  // Note [Replay fences]; never waits

 private:
  void allocate_host_memory(size_t size, void** ptr) override;
  void free_block(PinBlock* block) override;
#if PINPOOL_ATEN_FREE_UNPINS_ABOVE_CACHED_SIZE
  size_t pinned_max_cached_size() const override;  // 0 inside unpin_in_base
  std::atomic<int> unpinning_in_base_{0};          // threads inside unpin_in_base
#endif
  void add_host_time(c10::CachingAllocator::DurationStat& stat,
                     std::chrono::steady_clock::time_point start);
  void record_stream(std::optional<std::vector<Event>>& events, Stream stream) override;
  bool query_event(Event& event) override;
#if PINPOOL_HAS_ATEN_HOST_POOLS
  Stream get_current_stream() const override;
  bool stream_is_capturing(Stream stream) const override;
#endif

  std::pair<void*, void*> allocate_eager(size_t size);
  std::pair<void*, void*> allocate_large(size_t size);
  void free_eager(PinBlock* block);
  // Note [Backing store], Note [Block map]; `block` is null for a Base block not yet made.
  void* allocate_raw(size_t size, PinBlock* block);
  c10::DataPtr take_raw(void* ptr);
  PinBlock* find_block(const void* ptr);
  bool record_eager_use(void* ptr, void* ctx, Stream stream);
  void give_back_idle_large(size_t keep_bytes);

  CapturedGraph* graph_locked(uint64_t handle);
  CapturedGraph* capturing_graph_locked(Stream stream);
  CapturedGraph* new_graph_locked(bool announced);
  void resume_capture_locked(CapturedGraph* graph, CaptureFilter filter);
  CapturedGraph* graph_mid_capture_locked(c10::DeviceIndex device, MempoolId pool_id);
  void stop_capture_locked(CapturedGraph* graph);
  void graph_dies_locked(CapturedGraph* graph, std::vector<c10::DataPtr>& released);
  bool record_captured_use(PinBlock* block, CapturedGraph& graph);
  bool runtime_still_captures(CapturedGraph* graph);

  std::pair<void*, void*> allocate_during_capture(size_t size);
  std::pair<void*, void*> allocate_in_pool(GraphPool& pool, size_t size);
  void free_under_lock(PinBlock* block);
  GraphPool* live_pool_locked(c10::DeviceIndex device, MempoolId id);
  GraphPool* pool_for_capture_locked(c10::DeviceIndex device, MempoolId id);
  int capturing_into_locked(const GraphPool* pool) const;
  void drop_pool_use_locked(GraphPool* pool, std::vector<c10::DataPtr>& released);
  void delete_pool_if_empty_locked(GraphPool* pool);
  // What settling blocks gives back, handed back with no lock of ours held.
  struct GivenBack {
    std::vector<c10::DataPtr> released;  // native's free of each
    std::vector<PinBlock*> base_frees;   // default-pool blocks for ATen's free
    std::vector<PinBlock*> unpins;       // default-pool blocks to unpin (flagged emptied_)
  };
  void give_back_default(GivenBack& out);
  void free_or_graph_owned_locked(PinBlock* block, GivenBack& out);
  void unpin_locked(PinBlock* block, std::vector<c10::DataPtr>& released);
  void graph_replays_over_locked(CapturedGraph* graph, GivenBack& out);
  void update_pending_locked();
  void process_pending_pass();
  void mark_graph_held_emptied();
  void give_back_emptied();
  void unpin_default(PinBlock* block);
  bool unpin_in_base(PinBlock* block);  // false: this torch cannot, it stays cached
  void settle_eager_freed(GivenBack& out);
  void retire_completed_fences(GivenBack& out);
  void fence_dead_graphs(GivenBack& out);
  struct DeadGraph;
  void cover_locked(DeadGraph& dead, uint64_t now, std::vector<Stream>& to_record);
  bool join_fences_locked(DeadGraph& dead, std::deque<ReplayFence>& recorded);
  void note_settled_locked(const ReplayFence& fence);

  at::HostAllocator* const native_;    // our backing store
  const size_t large_threshold_;       // SIZE_MAX when large blocks are off
  OwnBlockStats own_stats_;            // Note [Stats of our own blocks]
  LargeBlocks* const large_;           // leaked
  AllocatorObserver* const observer_;  // Note [Observer hooks]

  struct MappedBlock {
    c10::DataPtr data;
    size_t size;
    PinBlock* block;  // null only between a Base block's pin and its binding
  };
  std::mutex map_mutex_;
  std::map<uintptr_t, MappedBlock> block_map_;  // Note [Block map]

  std::atomic<int> captures_underway_{0};        // capturing_.size()
  std::atomic<int> pending_{0};                  // unfenced_ + fences_ + pending_blocks_
  std::atomic<bool> emptied_given_back_{false};  // Note [Emptied while graphs held it]
  std::atomic<uint64_t> replays_enqueued_{0};    // Note [Shared fences]

  // Note [Lock order]
  // ~~~~~~~~~~~~~~~~~
  // process_mutex_ -> mutex_ -> map_mutex_ -> LargeBlocks' -> OwnBlockStats' (leaf); a block's
  // own mutex_ (its streams_) and ATen's are taken with none of these held, or as a leaf.
  // lock_for_fork() takes the first four in this order (Note [Forked children]).
  //
  // mutex_ guards what follows, the graphs' and pools' fields and PinBlock's graph fields; never
  // held while taking the GIL or while a block map DataPtr dies.
  std::mutex mutex_;
  uint64_t next_handle_{0};
  ska::flat_hash_map<uint64_t, CapturedGraph*> graphs_;  // announced, capturing or alive
  std::vector<CapturedGraph*> capturing_;
  std::vector<CapturedGraph*> unfenced_;  // dead, no fence recorded yet
  std::deque<ReplayFence> fences_;        // in flight; erased from in a pass only
  // Per stream, replays_before of its newest completed fence (Note [Shared fences]).
  std::vector<std::pair<Stream, uint64_t>> settled_;
  std::vector<GraphPool*> pools_;  // every pool object, live or released, in creation order
  std::map<MempoolId, int> unmatched_releases_;                 // Note [Pools per device]
  std::vector<std::pair<PinBlock*, UseFence>> pending_blocks_;  // kAwaitingCopies

  std::mutex process_mutex_;  // serializes process_pending(); fences_ is erased from under it only
  std::array<std::mutex*, 4> fork_locks();
  size_t fork_locked_{0};                     // how many of fork_locks() lock_for_fork() holds
  std::atomic<bool> passes_orphaned_{false};  // a forked child without process_mutex_
  std::atomic<bool> process_again_{false};
};

// The object registered in ATen's host-allocator registry.
class PinPoolHostAllocator final : public at::HostAllocator {
 public:
  explicit PinPoolHostAllocator(at::HostAllocator* native)
      : impl_(new PinPoolHostAllocatorImpl(native)) {}

  at::DataPtr allocate(size_t size) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    impl_->copy_data(dest, src, count);
  }
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    return impl_->record_event(ptr, ctx, stream);
  }
  void empty_cache() override;
  at::HostStats get_stats() override { return impl_->stats(); }
  void reset_accumulated_stats() override { impl_->reset_accumulated_stats(); }
  void reset_peak_stats() override { impl_->reset_peak_stats(); }
#if PINPOOL_HAS_ATEN_HOST_POOLS
  void begin_allocate_to_pool(MempoolId pool_id, CaptureFilter filter) override {
    impl_->begin_allocate_to_pool(pool_id, std::move(filter));
  }
  void end_allocate_to_pool(MempoolId pool_id) override { impl_->end_allocate_to_pool(pool_id); }
  void release_pool(MempoolId pool_id) override;
#endif

  PinPoolHostAllocatorImpl& impl() { return *impl_; }

 private:
  PinPoolHostAllocatorImpl* impl_;  // leaked: never destroyed (exit order)
};

// prepare() makes the allocator without registering it; activate() registers it (false if it
// was already); active_allocator() is null until prepare().
PinPoolHostAllocator* prepare();
bool activate();
bool is_registered();
PinPoolHostAllocator* active_allocator();

}  // namespace torch_npu_pinpool
