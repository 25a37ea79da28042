// PinPoolHostAllocator: torch_npu's pinned host allocator, made safe for ACLGraph capture.
//
// Note [Allocator design]
// ~~~~~~~~~~~~~~~~~~~~~~~
// ATen's Base runs the default pool (Note [Why our own pools]). Around it, four structures, each
// with its own mutex:
//   BlockMap       which blocks are ours, by address (Note [Block map])
//   GraphRegistry  graphs, captures and graph pools, and every block's graph fields (Note
//                  [Graph handles], Note [Graph ownership of blocks])
//   FenceQueue     what waits for the device: freed blocks with eager copies in flight, dead
//                  graphs whose replays may run (Note [Eager-use fences], Note [Replay fences])
//   LargeBlocks    idle large blocks, never more than native holds (Note [Large blocks])
// The allocator composes them; its process mutex makes one pass at a time (process_pending).
//
// Note [Lock order]
// ~~~~~~~~~~~~~~~~~
// process_mutex_ -> GraphRegistry -> FenceQueue -> BlockMap -> LargeBlocks -> OwnBlockStats
// (leaf). A block's own mutex_ (its streams_) and ATen's are taken with none of these held, or
// as a leaf. lock_for_fork() takes the first five in this order, once the fork gate is closed
// (Note [Fork gate], Note [Forked children]).
//
// The principles:
//   - With no capture underway an eager hit takes no lock of ours (Note [Fast path]); a miss
//     takes only the block map's, to add the block it pinned.
//   - No event is recorded or queried, and nothing pinned or unpinned, under a lock of ours; a
//     given-back DataPtr dies after they are released (GivenBack). Under the registry's mutex the
//     runtime is asked only whether a stream captures; nothing takes the GIL under any.
//   - Late, never early: a block goes back once nothing may read it; what waits on the device
//     is settled by a pass, which never waits.
//
// Note [Why our own pools]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// ATen's host private pools (>= 2.11) leak captured blocks, assert on recapture into a released
// id and recycle blocks freed inside a capture; torch_npu <= 2.10 has none. So ATen's Base runs
// the default pool only (its begin_allocate_to_pool is never called) and graph pools are ours.
//
// Note [Fast path]
// ~~~~~~~~~~~~~~~~
// With no capture underway, free (of a kInUse default-pool block) and record_event add one
// relaxed load to ATen's path (2.13+: free one more, pinned_max_cached_size), allocate two (and
// a size compare), each besides its Pass of the fork gate (a thread's own count stored twice,
// two relaxed loads; Note [Fork gate]). Everything else runs under the registry's mutex;
// deferred work (FenceQueue) is picked up before every allocation (as ATen processes its
// events), by graph events, stats and empty_cache.
#pragma once

#include <array>
#include <cstring>

#include "core/block_map.h"
#include "core/fence_queue.h"
#include "core/graph_registry.h"
#include "core/own_block_stats.h"
#include "runtime/fork_gate.h"

namespace torch_npu_pinpool {

class LargeBlocks;

class PinPoolHostAllocatorImpl final
    : public at::CachingHostAllocatorImpl<Stream, Event, PinBlock> {
  using Base = at::CachingHostAllocatorImpl<Stream, Event, PinBlock>;

 public:
  explicit PinPoolHostAllocatorImpl(at::HostAllocator* native);

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
  bool capture_underway() const { return graphs_.capture_underway(); }
  void forget_captures() { graphs_.forget_captures(); }  // Note [Forked children]
  void lock_for_fork();      // pthread_atfork: the locks below, in order (bounded)
  void unlock_after_fork();  // in the parent and in the child: those it took
  void unlock_in_forked_child();

  // capture_hooks.cpp: Note [Graph handles]
  uint64_t graph_begin(MempoolId pool_id);
  void graph_capturing(uint64_t handle);
  void graph_end(uint64_t handle, MempoolId pool_id);
  // False if the graph died of it (Note [Capture that ended without telling the allocator]).
  bool capture_failed(uint64_t handle, bool at_end);
  void graph_replay(uint64_t handle);  // after its replay was enqueued (Note [Shared fences])
  void graph_died(uint64_t handle);    // run process_pending() next, without the GIL
  bool owns(const void* ptr) { return blocks_.find(ptr) != nullptr; }  // any byte of a block
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
  // Note [Backing store]; `block` is null for a Base block not yet made.
  void* allocate_raw(size_t size, PinBlock* block);
  c10::DataPtr take_raw(void* ptr);
  bool record_eager_use(void* ptr, void* ctx, Stream stream);
  void give_back_idle_large(size_t keep_bytes);

  // What settling blocks gives back, handed back with no lock of ours held.
  struct GivenBack {
    std::vector<c10::DataPtr> released;  // native's free of each
    std::vector<PinBlock*> base_frees;   // default-pool blocks for ATen's free
    std::vector<PinBlock*> unpins;       // default-pool blocks to unpin (flagged emptied_)
  };
  // Under the registry's mutex.
  void graph_dies_locked(CapturedGraph* graph, std::vector<c10::DataPtr>& released);
  bool record_captured_use(PinBlock* block, CapturedGraph& graph);
  void free_or_graph_owned_locked(PinBlock* block, GivenBack& out);
  void unpin_locked(PinBlock* block, std::vector<c10::DataPtr>& released);
  void drop_pool_use_locked(GraphPool* pool, std::vector<c10::DataPtr>& released);
  void graph_replays_over_locked(CapturedGraph* graph, GivenBack& out);

  std::pair<void*, void*> allocate_during_capture(size_t size);
  std::pair<void*, void*> allocate_in_pool(GraphPool& pool, size_t size);
  void free_under_lock(PinBlock* block);
  void give_back_default(GivenBack& out);
  void process_pending_pass();
  void mark_graph_held_emptied();
  void give_back_emptied();
  void unpin_default(PinBlock* block);
  bool unpin_in_base(PinBlock* block);  // false: this torch cannot, it stays cached

  at::HostAllocator* const native_;    // our backing store
  const size_t large_threshold_;       // SIZE_MAX when large blocks are off
  OwnBlockStats own_stats_;            // Note [Stats of our own blocks]
  LargeBlocks* const large_;           // leaked
  AllocatorObserver* const observer_;  // Note [Observer hooks]
  BlockMap blocks_;
  GraphRegistry graphs_;
  FenceQueue fences_;
  std::atomic<bool> emptied_given_back_{false};  // Note [Emptied while graphs held it]

  std::mutex process_mutex_;  // one pass at a time (process_pending)
  std::array<std::mutex*, 5> fork_locks();
  size_t fork_locked_{0};                     // how many of fork_locks() lock_for_fork() holds
  std::atomic<bool> passes_orphaned_{false};  // a forked child without process_mutex_
  std::atomic<bool> process_again_{false};
};

// The object registered in ATen's host-allocator registry. Each of its calls, and the deleter
// of what it hands out, is a Pass (Note [Fork gate]).
class PinPoolHostAllocator final : public at::HostAllocator {
 public:
  explicit PinPoolHostAllocator(at::HostAllocator* native)
      : impl_(new PinPoolHostAllocatorImpl(native)) {}

  at::DataPtr allocate(size_t size) override;
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    impl_->copy_data(dest, src, count);
  }
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    ForkGate::Pass pass;
    return impl_->record_event(ptr, ctx, stream);
  }
  void empty_cache() override;
  at::HostStats get_stats() override {
    ForkGate::Pass pass;
    return impl_->stats();
  }
  void reset_accumulated_stats() override {
    ForkGate::Pass pass;
    impl_->reset_accumulated_stats();
  }
  void reset_peak_stats() override {
    ForkGate::Pass pass;
    impl_->reset_peak_stats();
  }
#if PINPOOL_HAS_ATEN_HOST_POOLS
  void begin_allocate_to_pool(MempoolId pool_id, CaptureFilter filter) override {
    ForkGate::Pass pass;
    impl_->begin_allocate_to_pool(pool_id, std::move(filter));
  }
  void end_allocate_to_pool(MempoolId pool_id) override {
    ForkGate::Pass pass;
    impl_->end_allocate_to_pool(pool_id);
  }
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
