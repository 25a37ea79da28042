// The capture hooks: every call that adds, ends or retires a capture or a graph.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string>

#include "core/pin_pool_allocator.h"

namespace torch_npu_pinpool {

// Note [Graph handles]
// ~~~~~~~~~~~~~~~~~~~~
// ATen's calls name pools only, so the Python hooks on NPUGraph (_hooks.py) name each graph:
//   capture_begin: h = graph_begin(pool), graph_capturing(h); graph_begin_failed(h) if it raised
//   capture_end: graph_end(h, pool()); graph_end_failed(h)   replay, then: graph_replay(h)
//   reset / GC: graph_died(h). A handle of a dead graph is ignored.
// <= 2.10: graph_begin registers the capture (model_filter). >= 2.11: it announces the graph
// and begin_allocate_to_pool attaches the pool; release_pool ends only unannounced graphs
// (Note [Releases without hooks]).

namespace {
thread_local CapturedGraph* t_announced = nullptr;  // for the next begin_allocate_to_pool

// Matches nothing until graph_capturing has read the model.
CaptureFilter model_filter(CapturedGraph* graph) {
  return [graph](c10::Stream s) { return captures_into(s, graph->model.load()); };
}
}  // namespace

// It drops its pool use now, its blocks after its fence (graph_replays_over_locked).
void PinPoolHostAllocatorImpl::graph_dies_locked(CapturedGraph* graph,
                                                 std::vector<c10::DataPtr>& released) {
  if (t_announced == graph) {
    t_announced = nullptr;
  }
  graphs_.remove(graph);
  if (graph->pool != nullptr) {
    drop_pool_use_locked(graph->pool, released);
    graph->pool = nullptr;
  }
  fences_.add_dead(graph);
}

namespace {
// torch_npu's copy kernels do not report every use of an expandable pinned block. The setting
// is read as torch_npu reads it: spaces ignored, any case.
void refuse_expandable_segments() {
  const char* conf = std::getenv("PYTORCH_NPU_ALLOC_CONF");
  if (PINPOOL_NPU_REFUSES_EXPANDABLE_CAPTURE || conf == nullptr) {
    return;
  }
  std::string flat(conf);
  flat.erase(std::remove(flat.begin(), flat.end(), ' '), flat.end());
  std::transform(flat.begin(), flat.end(), flat.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  TORCH_CHECK(flat.find("pin_memory_expandable_segments:true") == std::string::npos,
              "torch_npu_pinpool: graph capture is not supported with "
              "PYTORCH_NPU_ALLOC_CONF=pin_memory_expandable_segments:True: torch_npu's copy "
              "kernels do not report every use of expandable pinned blocks to the host "
              "allocator, so a captured block could not be kept alive for its graph. Remove "
              "pin_memory_expandable_segments from PYTORCH_NPU_ALLOC_CONF to capture graphs "
              "(eager pinned memory works either way).");
}
}  // namespace

uint64_t PinPoolHostAllocatorImpl::graph_begin(MempoolId pool_id) {
  refuse_expandable_segments();
  if (observer_ != nullptr) {  // it may take the GIL: before the lock
    observer_->capture_into(pool_id);
  }
  std::lock_guard<std::mutex> lock(graphs_.mutex());
#if PINPOOL_HAS_ATEN_HOST_POOLS
  CapturedGraph* graph = graphs_.add(/*announced=*/true);
  t_announced = graph;
#else
  GraphPool* pool = graphs_.pool_for_capture(current_device(), pool_id);  // may throw: first
  CapturedGraph* graph = graphs_.add(/*announced=*/true);
  graph->pool = pool;
  graph->pool->graphs++;  // the capture's use of its pool, the graph's once it ends
  graphs_.start_capture(graph, model_filter(graph));
#endif
  return graph->handle;
}

void PinPoolHostAllocatorImpl::begin_allocate_to_pool(MempoolId pool_id, CaptureFilter filter) {
  const c10::DeviceIndex device = current_device();
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  CapturedGraph* graph = t_announced;
  t_announced = nullptr;
  if (graph == nullptr) {
    if (CapturedGraph* parent = graphs_.mid_capture(device, pool_id)) {
      graphs_.start_capture(parent, std::move(filter));  // Note [Conditional nodes]
      return;
    }
  }
  GraphPool* pool = graphs_.pool_for_capture(device, pool_id);  // may throw: first
  if (graph == nullptr || graph->state != CapturedGraph::State::kAnnounced) {
    graph = graphs_.add(/*announced=*/false);
  }
  graph->pool = pool;
  graph->pool->graphs++;
  graphs_.start_capture(graph, std::move(filter));
}

void PinPoolHostAllocatorImpl::graph_capturing(uint64_t handle) {
  const Stream stream = current_stream();
  const CaptureInfo info = capture_info(stream);
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  CapturedGraph* graph = graphs_.find(handle);
  TORCH_CHECK(graph != nullptr && graph->state == CapturedGraph::State::kCapturing,
              "torch_npu_pinpool: NPUGraph.capture_begin returned but torch_npu did not hand the "
              "capture to the host allocator (begin_allocate_to_pool). This torch_npu build is "
              "not one the plugin supports; set TORCH_NPU_PINPOOL=0 to run without it.");
  TORCH_CHECK(info.status == CaptureStatus::kActive && info.model != nullptr,
              "torch_npu_pinpool: NPUGraph.capture_begin returned but the current stream is not "
              "capturing.");
  TORCH_INTERNAL_ASSERT(stream.device_index() == graph->pool->device);
  graph->capture_stream = stream;
  graph->model.store(info.model);
}

void PinPoolHostAllocatorImpl::end_allocate_to_pool(MempoolId pool_id) {
  const c10::DeviceIndex device = current_device();
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  if (CapturedGraph* graph = graphs_.capturing_into(device, pool_id)) {
    graphs_.stop_capture(graph);
  }  // else a retried capture_end: >= 2.12 calls this before checking the runtime's answer.
}

void PinPoolHostAllocatorImpl::graph_end(uint64_t handle, MempoolId pool_id) {
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  CapturedGraph* graph = graphs_.find(handle);
  TORCH_CHECK(graph != nullptr, "torch_npu_pinpool: graph ", handle,
              " is not registered (its capture ended twice?).");
  if (graph->state == CapturedGraph::State::kCapturing) {
    graphs_.stop_capture(graph);  // <= 2.10
  }
  GraphPool* pool = graph->pool;
  if (pool->state == GraphPool::State::kUnbound) {  // <= 2.10: pool() answers after capture_end
    TORCH_CHECK(graphs_.live_pool(pool->device, pool_id) == nullptr,
                "torch_npu_pinpool: memory pool (", pool_id.first, ", ", pool_id.second,
                ") on device ", static_cast<int>(pool->device), " is already bound.");
    pool->id = pool_id;
    pool->state = GraphPool::State::kLive;
  }
}

// Note [Capture that ended without telling the allocator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// After a capture_begin / capture_end raised, a graph whose capture is over dies; one still
// capturing stays registered (resumed after capture_end only) for a retry.
bool PinPoolHostAllocatorImpl::capture_failed(uint64_t handle, bool at_end) {
  std::vector<c10::DataPtr> released;  // dies after the lock
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  CapturedGraph* graph = graphs_.find(handle);
  if (graph == nullptr) {
    return false;
  }
  const bool registered = graph->state == CapturedGraph::State::kCapturing;
  if ((registered || at_end) && graph->runtime_still_captures()) {
    if (!registered) {
      graphs_.start_capture(graph, model_filter(graph));
    }
    return true;
  }
  if (at_end && observer_ != nullptr && graph->pool != nullptr) {  // Note [Failed captures]
    const GraphPool& pool = *graph->pool;
    observer_->capture_failed(&pool, pool.id, pool.blocks, pool.bytes_held);
  }
  graph_dies_locked(graph, released);
  return false;
}

// A replay notes its stream for the graph's fence (Note [Replay fences]), taking no lock for the
// (graph, stream) this thread noted last.
namespace {
struct NotedReplay {
  uint64_t handle{0};
  c10::DeviceIndex device{-1};
  c10::StreamId stream{0};
};
thread_local std::array<NotedReplay, 8> t_replays_noted{};
}  // namespace

void PinPoolHostAllocatorImpl::graph_replay(uint64_t handle) {
  fences_.note_replay();  // Note [Shared fences]
  NotedReplay& noted = t_replays_noted[handle % t_replays_noted.size()];
  if (noted.handle == handle && current_stream(noted.device).id() == noted.stream) {
    return;
  }
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  CapturedGraph* graph = graphs_.find(handle);
  if (graph != nullptr && graph->pool != nullptr) {
    const Stream stream = current_stream(graph->pool->device);
    auto& streams = graph->replay_streams;
    if (std::find(streams.begin(), streams.end(), stream) == streams.end()) {
      streams.push_back(stream);
    }
    noted = {handle, graph->pool->device, stream.id()};
  }
}

void PinPoolHostAllocatorImpl::graph_died(uint64_t handle) {
  std::vector<c10::DataPtr> released;  // dies after the lock
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  if (CapturedGraph* graph = graphs_.find(handle)) {
    graph_dies_locked(graph, released);
  }
}

// Note [Releases without hooks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu's reset() (>= 2.11; its destructor too) calls release_pool(id), naming no graph. A
// graph made through the hooks dies by graph_died alone (its reset hook, or its __del__), and
// the release_pool inside that reset runs within hooked_reset(), which it ignores. Any other
// release_pool is one unannounced graph's (begun by begin_allocate_to_pool with no graph_begin
// before it), and nothing says which: the id's unannounced graphs die together once as many
// such releases came as there are of them (native keeps a pool's blocks until its last graph's
// release, too). So no reset frees the blocks of a graph that may still replay.
namespace {
thread_local int t_hooked_resets = 0;
}  // namespace

void PinPoolHostAllocatorImpl::hooked_reset(bool entering) { t_hooked_resets += entering ? 1 : -1; }

void PinPoolHostAllocatorImpl::release_pool(MempoolId pool_id) {
  if (t_hooked_resets > 0) {
    return;  // a hooked graph's: graph_died follows
  }
  {
    std::vector<c10::DataPtr> released;  // dies after the lock
    std::lock_guard<std::mutex> lock(graphs_.mutex());
    for (CapturedGraph* graph : graphs_.release_without_hooks(pool_id)) {
      graph_dies_locked(graph, released);
    }
  }
  process_pending();
}

bool PinPoolHostAllocatorImpl::keep_for_replays(const Stream& stream,
                                                const std::vector<std::pair<void*, void*>>& blocks,
                                                std::shared_ptr<void> state) {
  std::vector<PinBlock*> found;
  for (const auto& [ptr, ctx] : blocks) {
    found.push_back(blocks_.find(ptr));  // not under the registry's mutex
  }
  std::lock_guard<std::mutex> lock(graphs_.mutex());
  CapturedGraph* graph = graphs_.capturing_on(stream);
  if (graph == nullptr) {
    return false;
  }
  for (PinBlock* block : found) {
    record_captured_use(block, *graph);
  }
  graph->replay_state.push_back(std::move(state));
  return true;
}

// `block` (null: not ours) is used by `graph`'s captured work.
bool PinPoolHostAllocatorImpl::record_captured_use(PinBlock* block, CapturedGraph& graph) {
  if (block == nullptr) {
    TORCH_WARN_ONCE(
        "torch_npu_pinpool: a pinned tensor allocated before torch_npu_pinpool was activated is "
        "used inside a graph capture; it is not protected from reuse. Import torch_npu_pinpool "
        "before pinning memory.");
    return false;
  }
  if (observer_ != nullptr) {
    observer_->used_by_capture(block->ptr_, block->size_, block->pool_, graph.handle,
                               graph.pool->device);
  }
  if (block->last_user_ == graph.handle) {
    return true;  // counted already
  }
  block->last_user_ = graph.handle;
  graph.blocks.push_back(block);
  block->graph_uses_++;
  if (block->state() == BlockState::kInUse) {
    block->set_state(BlockState::kGraphUsed);  // its free takes the slow path
  }
  return true;
}

}  // namespace torch_npu_pinpool
