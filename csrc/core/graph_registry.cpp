// GraphRegistry: graphs by handle, the captures underway, and the pools.
#include "core/graph_registry.h"

#include <algorithm>

namespace torch_npu_pinpool {

// Note [Pools per device]
// ~~~~~~~~~~~~~~~~~~~~~~~
// As torch_npu's device pools, a host pool is keyed (device, id): one id names an independent
// pool on each device. The device is the current one, which torch_npu makes the capture device
// in every hook but release_pool, which names no device (Note [Releases without hooks]).
//
// Note [Pool lifetime]
// ~~~~~~~~~~~~~~~~~~~~
// A pool lives while a graph of it captures or lives; meanwhile its free blocks are its own
// (empty_cache() leaves them). When its last graph dies it is released: the id may be captured
// into again (a new pool), its blocks go back as they settle, the object with its last block.

bool CapturedGraph::runtime_still_captures() const {
  return capture_stream.has_value() && captures_into(*capture_stream, model.load());
}

CapturedGraph* GraphRegistry::add(bool announced) {
  auto* graph = new CapturedGraph();
  graph->handle = ++next_handle_;
  graph->announced = announced;
  graphs_.emplace(graph->handle, graph);
  return graph;
}

CapturedGraph* GraphRegistry::find(uint64_t handle) {
  auto it = graphs_.find(handle);
  return it == graphs_.end() ? nullptr : it->second;
}

// Note [Invalidated captures]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Filters match ACTIVE streams only, but an INVALIDATED stream (a captured task failed) is still
// in its capture: a copy there belongs to the graph whose model the stream captures into.
CapturedGraph* GraphRegistry::capturing_on(const Stream& stream) {
  for (CapturedGraph* graph : capturing_) {
    if (graph->filter(stream)) {
      return graph;
    }
  }
  const CaptureInfo info = capture_info(stream);
  if (info.status != CaptureStatus::kInvalidated) {
    return nullptr;
  }
  for (CapturedGraph* graph : capturing_) {
    if (graph->model.load() == info.model) {
      return graph;
    }
  }
  return nullptr;
}

// Note [Conditional nodes]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu >= 2.13 captures a torch.cond branch by end_allocate_to_pool and
// begin_allocate_to_pool with the child model's filter (and back), inside one capture: a graph
// of the pool whose capture stream still captures resumes with the new filter.
CapturedGraph* GraphRegistry::mid_capture(c10::DeviceIndex device, MempoolId pool_id) {
  for (auto& [handle, graph] : graphs_) {
    if (graph->state == CapturedGraph::State::kAlive && graph->pool->id == pool_id &&
        graph->pool->device == device && graph->runtime_still_captures()) {
      return graph;
    }
  }
  return nullptr;
}

CapturedGraph* GraphRegistry::capturing_into(c10::DeviceIndex device, MempoolId pool_id) {
  for (CapturedGraph* graph : capturing_) {
    if (graph->pool->id == pool_id && graph->pool->device == device) {
      return graph;
    }
  }
  return nullptr;
}

void GraphRegistry::start_capture(CapturedGraph* graph, CaptureFilter filter) {
  graph->filter = std::move(filter);
  graph->state = CapturedGraph::State::kCapturing;
  if (observer_ != nullptr) {
    observer_->graph_capturing(graph->handle, true);
  }
  capturing_.push_back(graph);
  captures_underway_.store(static_cast<int>(capturing_.size()), std::memory_order_relaxed);
}

void GraphRegistry::stop_capture(CapturedGraph* graph) {
  capturing_.erase(std::remove(capturing_.begin(), capturing_.end(), graph), capturing_.end());
  captures_underway_.store(static_cast<int>(capturing_.size()), std::memory_order_relaxed);
  graph->filter = nullptr;
  graph->state = CapturedGraph::State::kAlive;
  if (observer_ != nullptr) {
    observer_->graph_capturing(graph->handle, false);
  }
}

void GraphRegistry::remove(CapturedGraph* graph) {
  if (graph->state == CapturedGraph::State::kCapturing) {
    stop_capture(graph);
  }
  graphs_.erase(graph->handle);
  graph->state = CapturedGraph::State::kDead;
  if (observer_ != nullptr) {
    observer_->graph_died(graph->handle);
  }
}

std::vector<CapturedGraph*> GraphRegistry::release_without_hooks(MempoolId pool_id) {
  std::vector<CapturedGraph*> alive;  // graphs of no hooks of the id, on any device
  for (auto& [handle, graph] : graphs_) {
    if (!graph->announced && graph->state == CapturedGraph::State::kAlive &&
        graph->pool->named(pool_id)) {
      alive.push_back(graph);
    }
  }
  if (alive.empty() ||  // release_pool ends no capture
      static_cast<size_t>(++unmatched_releases_[pool_id]) < alive.size()) {
    return {};
  }
  unmatched_releases_.erase(pool_id);
  return alive;
}

int GraphRegistry::captures_into_pool(const GraphPool* pool) const {
  auto into_pool = [pool](const CapturedGraph* graph) { return graph->pool == pool; };
  return static_cast<int>(std::count_if(capturing_.begin(), capturing_.end(), into_pool));
}

GraphPool* GraphRegistry::live_pool(c10::DeviceIndex device, MempoolId id) {
  for (GraphPool* pool : pools_) {
    if (pool->device == device && pool->named(id)) {
      return pool;
    }
  }
  return nullptr;
}

GraphPool* GraphRegistry::pool_for_capture(c10::DeviceIndex device, MempoolId id) {
  GraphPool* pool = live_pool(device, id);
  if (pool == nullptr) {
    const auto state = id == MempoolId{0, 0} ? GraphPool::State::kUnbound : GraphPool::State::kLive;
    pool = pools_.emplace_back(new GraphPool{id, device, state});
  }
  TORCH_CHECK(captures_into_pool(pool) == 0,
              "torch_npu_pinpool: a graph capture into memory pool (", id.first, ", ", id.second,
              ") on device ", static_cast<int>(device),
              " is already underway. Captures that share a pool must run one after another: "
              "end the other capture first, or capture into a different pool.");
  return pool;
}

void GraphRegistry::delete_pool_if_empty(GraphPool* pool) {
  if (pool->state == GraphPool::State::kReleased && pool->blocks == 0) {
    pools_.erase(std::remove(pools_.begin(), pools_.end(), pool), pools_.end());
    delete pool;
  }
}

std::vector<PoolInfo> GraphRegistry::pool_info() {
  std::vector<PoolInfo> out;
  for (GraphPool* pool : pools_) {
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
    const int capturing = captures_into_pool(pool);
    out.push_back({pool->id, pool->device, pool->graphs - capturing, capturing > 0,
                   pool->state == GraphPool::State::kReleased, pool->blocks, pool->bytes_held,
                   pool->bytes_in_use, adopted.size()});
  }
  return out;
}

}  // namespace torch_npu_pinpool
