// FenceQueue: what waits for the device before it may be given back: freed blocks whose eager
// copies may still run, and dead graphs whose replays may still run.
#pragma once

#include <deque>
#include <mutex>

#include "core/graph_registry.h"

namespace torch_npu_pinpool {

struct ReplayFence {
  Event event;
  std::vector<CapturedGraph*> graphs;
  Stream stream;
  uint64_t replays_before;  // replays enqueued before the record (Note [Shared fences])
};

// Adding takes only its mutex. The three steps of a pass (Note [Replay fences]) run one thread
// at a time (the allocator's process mutex), query the runtime unlocked, and hand back what no
// longer waits.
class FenceQueue {
 public:
  bool pending() const { return pending_.load(std::memory_order_relaxed) != 0; }
  void add_awaiting(PinBlock* block, UseFence fence);     // kAwaitingCopies
  void add_dead(CapturedGraph* graph);                    // kDead
  void note_replay() { replays_enqueued_.fetch_add(1); }  // after its work was enqueued
  std::mutex& mutex() { return mutex_; }                  // taken around fork() (Note [Lock order])

  std::vector<PinBlock*> settle_awaiting();        // blocks whose eager copies ran
  std::vector<CapturedGraph*> fence_dead();        // graphs that need no fence
  std::vector<CapturedGraph*> retire_completed();  // graphs whose last fence completed

 private:
  struct DeadGraph {
    CapturedGraph* graph;
    std::vector<ReplayFence*> joins;  // in flight, in fences_
    std::vector<Stream> uncovered;    // a fence is recorded on each
  };
  void cover_locked(DeadGraph& dead, uint64_t now, std::vector<Stream>& to_record);
  bool join_fences_locked(DeadGraph& dead, std::deque<ReplayFence>& recorded);
  void note_settled_locked(const ReplayFence& fence);
  void update_pending_locked();

  std::atomic<int> pending_{0};                // unfenced_ + fences_ + awaiting_
  std::atomic<uint64_t> replays_enqueued_{0};  // Note [Shared fences]
  std::mutex mutex_;
  std::vector<std::pair<PinBlock*, UseFence>> awaiting_;
  std::vector<CapturedGraph*> unfenced_;  // dead, no fence recorded yet
  std::deque<ReplayFence> fences_;        // in flight; erased from in a pass only
  // Per stream, replays_before of its newest completed fence (Note [Shared fences]).
  std::vector<std::pair<Stream, uint64_t>> settled_;
};

}  // namespace torch_npu_pinpool
