// FenceQueue: eager-use fences of freed blocks, and replay fences of dead graphs.
#include "core/fence_queue.h"

#include <algorithm>

namespace torch_npu_pinpool {

// Note [Replay fences]
// ~~~~~~~~~~~~~~~~~~~~
// A dead graph's fence is an event on each stream it was replayed on (the capture device's
// current stream; never a capturing one), recorded by the pass its death asks for: one event per
// stream for the graphs that died since the last pass, unless one already covers it (Note
// [Shared fences]). A pass never waits (nor does host_empty_cache(), as ATen's only queries its
// events): it retires every completed fence in flight, on whichever stream, so a busy stream
// holds back only the graphs replayed on it; and a synchronize() after a reset lets the next pass
// give the graph's blocks back. Late, never early.
//
// Note [Shared fences]
// ~~~~~~~~~~~~~~~~~~~~
// replays_enqueued_ counts replays whose work is already enqueued: the hooks call graph_replay
// after torch_npu's replay returned. A fence keeps the count it read before its record. If a
// fence of stream S kept the count as it is now, no replay was enqueued since it read it, so
// every replay a dead graph enqueued on S precedes that fence: the graph joins it while it is in
// flight, and needs none on S once it completed. So resetting many graphs after their replays
// records one event per stream, not one per graph (bench P9); a replay in between (a decode loop)
// makes the next death record its own, as before. Only a pass changes fences_ (but for appends)
// and settled_, so what a pass finds covering a graph is still there when the graph joins it.

void FenceQueue::add_awaiting(PinBlock* block, UseFence fence) {
  block->set_state(BlockState::kAwaitingCopies);
  std::lock_guard<std::mutex> lock(mutex_);
  awaiting_.emplace_back(block, std::move(fence));
  update_pending_locked();
}

void FenceQueue::add_dead(CapturedGraph* graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  unfenced_.push_back(graph);
  update_pending_locked();
}

void FenceQueue::update_pending_locked() {
  pending_.store(static_cast<int>(unfenced_.size() + fences_.size() + awaiting_.size()),
                 std::memory_order_relaxed);
}

std::vector<PinBlock*> FenceQueue::settle_awaiting() {
  std::vector<std::pair<PinBlock*, UseFence>> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting.swap(awaiting_);
  }
  auto ran = std::stable_partition(waiting.begin(), waiting.end(),
                                   [](auto& item) { return !item.second.done(); });
  std::vector<PinBlock*> settled;
  for (auto it = ran; it != waiting.end(); ++it) {
    settled.push_back(it->first);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  awaiting_.insert(awaiting_.end(), std::make_move_iterator(waiting.begin()),
                   std::make_move_iterator(ran));
  update_pending_locked();
  return settled;
}

// Every completed fence, in any order; queried unlocked. Only a pass erases from fences_, and
// others only append, which moves no element.
std::vector<CapturedGraph*> FenceQueue::retire_completed() {
  std::vector<ReplayFence*> in_flight;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (ReplayFence& fence : fences_) {
      in_flight.push_back(&fence);
    }
  }
  in_flight.erase(std::remove_if(in_flight.begin(), in_flight.end(),
                                 [](ReplayFence* fence) { return !event_done(fence->event); }),
                  in_flight.end());
  std::vector<CapturedGraph*> over;
  std::lock_guard<std::mutex> lock(mutex_);
  for (ReplayFence* fence : in_flight) {
    for (CapturedGraph* graph : fence->graphs) {
      if (--graph->fences_left == 0) {
        over.push_back(graph);
      }
    }
    note_settled_locked(*fence);
    fence->event.reset();  // marks it retired
  }
  fences_.erase(std::remove_if(fences_.begin(), fences_.end(),
                               [](const ReplayFence& fence) { return fence.event == nullptr; }),
                fences_.end());
  update_pending_locked();
  return over;
}

// Which of dead.graph's replay streams a fence already covers (Note [Shared fences]); the others
// are added to to_record once.
void FenceQueue::cover_locked(DeadGraph& dead, uint64_t now, std::vector<Stream>& to_record) {
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

// False (dead.graph joins nothing) if a stream it needs has no event.
bool FenceQueue::join_fences_locked(DeadGraph& dead, std::deque<ReplayFence>& recorded) {
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

// `fence` completed, so did every replay enqueued before it (Note [Shared fences]).
void FenceQueue::note_settled_locked(const ReplayFence& fence) {
  for (auto& [stream, replays_before] : settled_) {
    if (stream == fence.stream) {
      replays_before = std::max(replays_before, fence.replays_before);
      return;
    }
  }
  settled_.emplace_back(fence.stream, fence.replays_before);
}

std::vector<CapturedGraph*> FenceQueue::fence_dead() {
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
    return {};
  }
  std::deque<ReplayFence> recorded;  // a few: the replay streams of each device
  for (const Stream& stream : to_record) {
    recorded.push_back(
        {stream_capturing(stream) ? nullptr : try_record_on(stream), {}, stream, now});
  }
  std::vector<CapturedGraph*> over;
  std::lock_guard<std::mutex> lock(mutex_);
  for (DeadGraph& graph : dead) {
    if (!join_fences_locked(graph, recorded)) {
      unfenced_.push_back(graph.graph);
    } else if (graph.graph->fences_left == 0) {
      over.push_back(graph.graph);
    }
  }
  for (ReplayFence& fence : recorded) {
    if (!fence.graphs.empty()) {
      fences_.push_back(std::move(fence));
    }
  }
  update_pending_locked();
  return over;
}

}  // namespace torch_npu_pinpool
