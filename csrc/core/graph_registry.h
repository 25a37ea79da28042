// GraphRegistry: the graphs and captures the allocator knows, and the pools they allocate from.
#pragma once

#include <c10/util/SmallVector.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "core/allocator_observer.h"
#include "core/pin_block.h"

namespace torch_npu_pinpool {

using CaptureFilter = std::function<bool(c10::Stream)>;

// A pool id on one device (Note [Pools per device], Note [Pool lifetime]):
//
//   kUnbound ---- graph_end names its id (<= 2.10, pool=None) ----> kLive
//   (new, id {0, 0})                  (new, an id) ---------------> kLive
//   kLive ---- its last graph dies ----> kReleased ---- its last block given back ----> deleted
struct GraphPool {
  enum class State { kUnbound, kLive, kReleased };
  MempoolId id{0, 0};
  c10::DeviceIndex device{-1};  // its graphs' capture device
  State state{State::kUnbound};
  int graphs{0};                                                       // capturing or alive
  std::vector<std::vector<PinBlock*>> free_blocks{64};                 // by size index
  size_t blocks{0}, blocks_in_use{0}, bytes_held{0}, bytes_in_use{0};  // in use: tensor alive
  // Whether `other` names this pool now.
  bool named(MempoolId other) const { return state == State::kLive && id == other; }
};

// Note [Graph handles], Note [Replay fences]. A graph's fields are guarded by the registry's
// mutex while it is registered; once dead, by the FenceQueue that holds it.
//
//   kAnnounced (>= 2.11: graph_begin) --begin_allocate_to_pool--> kCapturing --end--> kAlive
//   kCapturing <--Note [Conditional nodes]-- kAlive;   any --reset, GC, failed capture--> kDead
struct CapturedGraph {
  enum class State { kAnnounced, kCapturing, kAlive, kDead };
  uint64_t handle{0};
  State state{State::kAnnounced};
  bool announced{false};     // made by graph_begin, not by begin_allocate_to_pool
  GraphPool* pool{nullptr};  // its device is the capture device; null when announced or dead
  CaptureFilter filter;      // while capturing
  std::atomic<void*> model{nullptr};
  std::optional<Stream> capture_stream;
  c10::SmallVector<PinBlock*, 4> blocks;  // one entry per counted use
  c10::SmallVector<Stream, 1> replay_streams;
  size_t fences_left{0};  // dead: fences that cover it
  // Host function arguments (Note [Strided pinned copies in capture]), kept until its fence.
  std::vector<std::shared_ptr<void>> replay_state;

  bool runtime_still_captures() const;  // its capture stream still captures into its model
};

struct PoolInfo {
  MempoolId id;
  c10::DeviceIndex device;
  int graphs;
  bool capturing, released;
  size_t blocks, bytes_held, bytes_in_use, adopted_blocks;
};

// Every method but capture_underway() is called with mutex() held.
class GraphRegistry {
 public:
  explicit GraphRegistry(AllocatorObserver* observer) : observer_(observer) {}
  std::mutex& mutex() { return mutex_; }
  bool capture_underway() const { return captures_underway_.load(std::memory_order_relaxed) != 0; }
  void forget_captures() { captures_underway_.store(0); }  // Note [Forked children]

  CapturedGraph* add(bool announced);
  CapturedGraph* find(uint64_t handle);  // null once dead
  CapturedGraph* capturing_on(const Stream& stream);
  CapturedGraph* mid_capture(c10::DeviceIndex device, MempoolId pool_id);
  CapturedGraph* capturing_into(c10::DeviceIndex device, MempoolId pool_id);
  void start_capture(CapturedGraph* graph, CaptureFilter filter);
  void stop_capture(CapturedGraph* graph);
  void remove(CapturedGraph* graph);  // it dies: out of the registry, kDead
  // Once as many releases of `pool_id` came as it has graphs of no hooks (Note [Releases without
  // hooks]): those graphs, which die; else none.
  std::vector<CapturedGraph*> release_without_hooks(MempoolId pool_id);

  GraphPool* live_pool(c10::DeviceIndex device, MempoolId id);
  GraphPool* pool_for_capture(c10::DeviceIndex device, MempoolId id);  // throws if one captures
  void delete_pool_if_empty(GraphPool* pool);
  const std::vector<GraphPool*>& pools() const { return pools_; }
  template <typename Fn>
  void for_each_graph(Fn fn) {
    for (auto& [handle, graph] : graphs_) {
      fn(*graph);
    }
  }
  std::vector<PoolInfo> pool_info();

 private:
  int captures_into_pool(const GraphPool* pool) const;

  AllocatorObserver* const observer_;
  std::mutex mutex_;
  std::atomic<int> captures_underway_{0};  // capturing_.size()
  uint64_t next_handle_{0};
  ska::flat_hash_map<uint64_t, CapturedGraph*> graphs_;  // announced, capturing or alive
  std::vector<CapturedGraph*> capturing_;
  std::vector<GraphPool*> pools_;  // every pool object, live or released, in creation order
  std::map<MempoolId, int> unmatched_releases_;  // Note [Releases without hooks]
};

}  // namespace torch_npu_pinpool
