// PinBlock: a pinned block of ours, its state, and the fence on the eager copies that used it.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

#include <vector>

#include "runtime/npu_runtime.h"

namespace torch_npu_pinpool {

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
// relaxed store; every other move is made under the registry's mutex.
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
  // Under the registry's mutex: entries in unfinished graphs' `blocks`, and the graph that
  // listed it last.
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

}  // namespace torch_npu_pinpool
