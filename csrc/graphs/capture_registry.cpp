// The capture registry: every line that adds, ends or retires a capture or a graph. A graph is
// begun, learns its runtime capture, ends (or fails to), is replayed, and dies (reset, garbage
// collection, or a capture that ended without a graph); each is one call here. What a graph's
// death does to its blocks is graph_pools.cpp's (Note [Graph ownership of blocks]).
#include "core/pin_pool_allocator.h"

#include <c10/util/Exception.h>
#include <torch_npu/csrc/core/npu/NPUFunctions.h>
#include <torch_npu/csrc/core/npu/NPUStream.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string>

namespace torch_npu_pinpool {

// Note [Graph handles]
// ~~~~~~~~~~~~~~~~~~~~
// The allocator knows graphs, not just pools: ownership, replay fences and death are per
// graph. ATen's interface (begin/end_allocate_to_pool, release_pool) speaks of pool ids only,
// and several graphs share a pool, so the Python hooks on NPUGraph (torch_npu_pinpool/
// _hooks.py) give each capture a handle and every later call names it:
//
//   capture_begin:  h = graph_begin(pool)     before torch_npu's capture_begin
//                   graph_capturing(h)        after it: learn the runtime's stream and model
//                   graph_begin_failed(h)     if it raised
//   capture_end:    graph_end(h, pool())      after torch_npu's capture_end
//                   graph_end_failed(h)       if it raised
//   replay:         graph_replay(h)           before torch_npu's replay
//   reset / GC:     graph_died(h)             exactly once (reset, or a weakref callback)
//
// Where the capture is registered (the filter that routes allocations and captured copies):
//   * torch_npu <= 2.10 tells the host allocator nothing: graph_begin registers the capture
//     with a filter "stream ACTIVE, capturing into this graph's model", which matches
//     nothing until graph_capturing has read the model (nothing runs in between).
//   * torch_npu >= 2.11 calls begin_allocate_to_pool(id, filter) inside capture_begin, on
//     the thread that called graph_begin: graph_begin only *announces* the graph on this
//     thread, and begin_allocate_to_pool attaches torch_npu's pool id and filter to it.
//     end_allocate_to_pool stops the capture. release_pool is ignored for announced graphs
//     (their hooks report their death); a capture torch_npu begins without our hook (a C++
//     caller) makes an unannounced graph, which dies on its pool's release_pool.
//
// A handle that names a dead graph is ignored, so a late finalizer or a reset after garbage
// collection is harmless.
//
// Note [Pools per device]
// ~~~~~~~~~~~~~~~~~~~~~~~
// torch_npu's device allocator keeps its graph pools per device (releasePool(capture_dev_, id)
// and the rest name the device), so one pool id - a graph_pool_handle() shared by the graphs of
// every device, say - names one independent pool on each device, and captures on two devices
// into it may run at once. The host pools are keyed the same way, (device, id): each device's
// graphs own their blocks, and only two captures into one id on the *same* device are refused.
// ATen's interface names no device, so the registry takes the device each call means from the
// current device, where torch_npu's NPUGraph (2.11 - 2.13) makes it the capture device:
//   * graph_begin / begin_allocate_to_pool: capture_begin reads capture_dev_ as the current
//     device and calls begin_allocate_to_pool on the same thread without changing it.
//   * end_allocate_to_pool: capture_end first checks that the current stream is the capture
//     stream, a stream of the capture device; the conditional-node calls run on the capture
//     device's streams too. So the capture ended is the one into (current device, id).
//   * release_pool: reset() (and the C++ destructor, on any thread) calls it with whatever
//     device is current (a reset with another device current names that device), so
//     it names no device. Announced graphs ignore it (their hooks report their death by
//     handle). Of unannounced graphs of the id on one device, one dies, as ever; when they
//     span devices, which one died is unknown, so none dies until as many release_pool calls
//     as there are such graphs have come, and then all do: their blocks are held longer,
//     never given back under a graph that may still replay.
//     With no unannounced graph in any of the id's pools (one lookup per device up to the
//     highest that has a pool) it returns at once, as every reset of an announced graph does.
// Backport (<= 2.10): graph_begin runs on the capture_begin caller's thread, whose current
// device torch_npu makes the capture device; graph_end binds a pool=None pool on that device.

namespace {
// The device a pool hook means (Note [Pools per device]).
c10::DeviceIndex pool_hook_device() { return c10_npu::current_device(); }

// The graph graph_begin announced on this thread for the next begin_allocate_to_pool.
thread_local CapturedGraph* t_announced = nullptr;

// Our own capture filter (torch_npu >= 2.11 passes its own): the stream captures into the
// graph's model. Matches nothing until graph_capturing has read the model.
CaptureFilter model_filter(CapturedGraph* graph) {
  return [graph](c10::Stream s) {
    return captures_into(Stream(Stream::UNCHECKED, s), graph->model.load());
  };
}
}  // namespace

CapturedGraph* PinPoolHostAllocatorImpl::graph_locked(uint64_t handle) {
  auto it = graphs_.find(handle);
  return it == graphs_.end() ? nullptr : it->second;
}

// Note [Invalidated captures]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// When the runtime fails to add a captured task it marks the capture INVALIDATED: its streams
// stay in the capture (their work is dropped) until aclmdlRICaptureEnd fails with 507903. A
// capture filter matches ACTIVE streams only (torch_npu's own, >= 2.11, and model_filter), so a
// copy that reaches the allocator after its capture was invalidated - torch_npu's task-queue
// thread may run the failing task before the main thread's record_event - matches no graph. It
// still belongs to the graph whose model the stream captures into: that graph keeps the block
// until the failed capture is abandoned, and the copy is not taken for a capture begun before
// activation.
CapturedGraph* PinPoolHostAllocatorImpl::capturing_graph_locked(Stream stream) {
  const c10::Stream s = stream.unwrap();
  for (CapturedGraph* graph : capturing_) {
    if (graph->filter(s)) {
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

CapturedGraph* PinPoolHostAllocatorImpl::new_graph_locked(bool announced) {
  auto* graph = new CapturedGraph();
  graph->handle = ++next_handle_;
  graph->announced = announced;
  graph->device = pool_hook_device();
  graphs_.emplace(graph->handle, graph);
  return graph;
}

// The capture takes a use of its pool (the graph's use once it ends).
void PinPoolHostAllocatorImpl::start_capture_locked(CapturedGraph* graph, CaptureFilter filter) {
  graph->pool->graphs++;
  resume_capture_locked(graph, std::move(filter));
}

// Allocations and captured uses that `filter` matches go to `graph` again (its pool use is
// already taken).
void PinPoolHostAllocatorImpl::resume_capture_locked(CapturedGraph* graph, CaptureFilter filter) {
  graph->filter = std::move(filter);
  graph->state = CapturedGraph::State::kCapturing;
  if (observer_ != nullptr) {
    observer_->graph_capturing(graph->handle, true);
  }
  capturing_.push_back(graph);
  captures_underway_.store(static_cast<int>(capturing_.size()), std::memory_order_relaxed);
}

// Note [Conditional nodes]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// To capture a branch of torch.cond into a child model, torch_npu (>= 2.13, as PyTorch's
// CUDAGraph::begin_capture_to_if_node) calls end_allocate_to_pool(id) and then
// begin_allocate_to_pool(id, filter) with a filter for the child model's stream, and the same
// pair with the parent's filter when the branch ends - all inside one capture. The graph goes
// on: its runtime capture is still active. So a begin_allocate_to_pool that finds a graph of
// the same pool whose own capture stream still captures its model resumes that graph with the
// new filter: a block used in a branch belongs to the graph whose replays run the branch.
CapturedGraph* PinPoolHostAllocatorImpl::graph_mid_capture_locked(c10::DeviceIndex device,
                                                                   MempoolId pool_id) {
  for (auto& [handle, graph] : graphs_) {
    if (graph->state == CapturedGraph::State::kAlive && graph->pool != nullptr &&
        graph->pool->id == pool_id && graph->pool->device == device &&
        runtime_still_captures(graph)) {
      return graph;
    }
  }
  return nullptr;
}

void PinPoolHostAllocatorImpl::stop_capture_locked(CapturedGraph* graph) {
  capturing_.erase(std::remove(capturing_.begin(), capturing_.end(), graph), capturing_.end());
  captures_underway_.store(static_cast<int>(capturing_.size()), std::memory_order_relaxed);
  graph->filter = nullptr;
  graph->state = CapturedGraph::State::kAlive;
  if (observer_ != nullptr) {
    observer_->graph_capturing(graph->handle, false);
  }
}

// The graph is gone (or never came to be): it drops its pool use now and its blocks once its
// replays are over (graph_replays_over_locked, after the fence).
void PinPoolHostAllocatorImpl::graph_dies_locked(CapturedGraph* graph,
                                                  std::vector<c10::DataPtr>& released) {
  if (graph->state == CapturedGraph::State::kCapturing) {
    stop_capture_locked(graph);
  }
  if (t_announced == graph) {
    t_announced = nullptr;
  }
  graphs_.erase(graph->handle);
  if (observer_ != nullptr) {
    observer_->graph_died(graph->handle);
  }
  if (graph->pool != nullptr) {
    if (!graph->announced) {
      graph->pool->unannounced--;
    }
    drop_pool_use_locked(graph->pool, released);
    graph->pool = nullptr;
  }
  unfenced_.push_back(graph);
  update_pending_locked();
}

bool PinPoolHostAllocatorImpl::runtime_still_captures(CapturedGraph* graph) {
  void* model = graph->model.load();
  return graph->capture_stream.has_value() && captures_into(*graph->capture_stream, model);
}

// ---------------------------------------------------------------------------------------
// The calls of Note [Graph handles]

namespace {
// Refused before anything is registered: torch_npu's copy kernels do not report every use of
// an expandable pinned block to the host allocator (PYTORCH_NPU_ALLOC_CONF as torch_npu reads
// it: spaces ignored, any case). torch_npu >= 2.14 refuses such a capture itself, exactly when
// the setting is in effect (version_shim.h).
void refuse_expandable_segments() {
  if (PINPOOL_NPU_REFUSES_EXPANDABLE_CAPTURE) {
    return;
  }
  const char* conf = std::getenv("PYTORCH_NPU_ALLOC_CONF");
  if (conf == nullptr) {
    return;
  }
  std::string flat;
  for (const char* c = conf; *c != '\0'; ++c) {
    if (*c != ' ') {
      flat += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
    }
  }
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
  if (observer_ != nullptr) {  // released_pool_recapture; it may take the GIL: before the lock
    observer_->capture_into(pool_id);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  CapturedGraph* graph = new_graph_locked(/*announced=*/true);
#if PINPOOL_HAS_ATEN_HOST_POOLS
  t_announced = graph;  // begin_allocate_to_pool attaches the pool and the filter
#else
  try {
    graph->pool = pool_for_capture_locked(graph->device, pool_id);
  } catch (...) {
    graphs_.erase(graph->handle);
    delete graph;
    throw;
  }
  start_capture_locked(graph, model_filter(graph));
#endif
  return graph->handle;
}

void PinPoolHostAllocatorImpl::begin_allocate_to_pool(MempoolId pool_id, CaptureFilter filter) {
  const c10::DeviceIndex device = pool_hook_device();
  std::lock_guard<std::mutex> lock(mutex_);
  CapturedGraph* graph = t_announced;
  t_announced = nullptr;
  if (graph == nullptr) {
    if (CapturedGraph* parent = graph_mid_capture_locked(device, pool_id)) {
      resume_capture_locked(parent, std::move(filter));  // Note [Conditional nodes]
      return;
    }
  }
  if (graph == nullptr || graph->state != CapturedGraph::State::kAnnounced) {
    graph = new_graph_locked(/*announced=*/false);
  }
  try {
    graph->pool = pool_for_capture_locked(device, pool_id);
  } catch (...) {
    if (!graph->announced) {  // nobody else holds it; an announced one is its hook's
      graphs_.erase(graph->handle);
      delete graph;
    }
    throw;
  }
  if (!graph->announced) {
    graph->pool->unannounced++;  // release_pool ends it
  }
  start_capture_locked(graph, std::move(filter));
}

void PinPoolHostAllocatorImpl::graph_capturing(uint64_t handle) {
  const Stream stream = c10_npu::getCurrentNPUStream();
  const CaptureInfo info = capture_info(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  CapturedGraph* graph = graph_locked(handle);
  TORCH_CHECK(graph != nullptr && graph->state == CapturedGraph::State::kCapturing,
              "torch_npu_pinpool: NPUGraph.capture_begin returned but torch_npu did not hand the "
              "capture to the host allocator (begin_allocate_to_pool). This torch_npu build is "
              "not one the plugin supports; set TORCH_NPU_PINPOOL=0 to run without it.");
  TORCH_CHECK(info.status == CaptureStatus::kActive && info.model != nullptr,
              "torch_npu_pinpool: NPUGraph.capture_begin returned but the current stream is not "
              "capturing.");
  graph->capture_stream = stream;
  graph->device = stream.device_index();
  graph->model.store(info.model);
}

bool PinPoolHostAllocatorImpl::graph_begin_failed(uint64_t handle) {
  return capture_failed(handle, /*at_end=*/false);
}

void PinPoolHostAllocatorImpl::end_allocate_to_pool(MempoolId pool_id) {
  const c10::DeviceIndex device = pool_hook_device();  // Note [Pools per device]
  std::lock_guard<std::mutex> lock(mutex_);
  for (CapturedGraph* graph : capturing_) {
    if (graph->pool->id == pool_id && graph->pool->device == device) {
      stop_capture_locked(graph);
      return;
    }
  }
  // Already stopped: a retried capture_end after a failed one (torch_npu >= 2.12 calls
  // end_allocate_to_pool before it checks the runtime's answer).
}

void PinPoolHostAllocatorImpl::graph_end(uint64_t handle, MempoolId pool_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  CapturedGraph* graph = graph_locked(handle);
  TORCH_CHECK(graph != nullptr, "torch_npu_pinpool: graph ", handle,
              " is not registered (its capture ended twice?).");
  if (graph->state == CapturedGraph::State::kCapturing) {
    stop_capture_locked(graph);  // <= 2.10: torch_npu's capture_end told us nothing
  }
  GraphPool* pool = graph->pool;
  if (pool->id == MempoolId{0, 0}) {
    // <= 2.10: NPUGraph::pool() only answers after capture_end; bind the pool to it now.
    const PoolKey key{pool->device, pool_id};
    TORCH_CHECK(pools_.find(key) == pools_.end(), "torch_npu_pinpool: memory pool (",
                pool_id.first, ", ", pool_id.second, ") on device ",
                static_cast<int>(pool->device), " is already bound.");
    pool->id = pool_id;
    pools_.emplace(key, pool);
  }
}

// Note [Capture that ended without telling the allocator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// When torch_npu's capture_end raises, the runtime capture may be over (107038, 107025,
// 507903: the stream left the capture, no graph came of it) or still going (capture_end called
// on the wrong stream). torch_npu 2.11 checks aclmdlRICaptureEnd's result *before* it calls
// end_allocate_to_pool, 2.12 on calls it first, and <= 2.10 never calls it: so the registry
// asks the runtime. Over: the graph dies now (no replay can read its blocks). Still going: the
// capture stays registered, so a correct retry of capture_end works.
//
// A capture_begin that raised is judged the same way, but a registration torch_npu did not
// make or already stopped is never resumed there: the graph dies.
bool PinPoolHostAllocatorImpl::graph_end_failed(uint64_t handle) {
  return capture_failed(handle, /*at_end=*/true);
}

bool PinPoolHostAllocatorImpl::capture_failed(uint64_t handle, bool at_end) {
  std::vector<c10::DataPtr> released;  // dies after the lock
  std::lock_guard<std::mutex> lock(mutex_);
  CapturedGraph* graph = graph_locked(handle);
  if (graph == nullptr) {
    return false;
  }
  const bool registered = graph->state == CapturedGraph::State::kCapturing;
  if ((registered || at_end) && runtime_still_captures(graph)) {
    if (!registered) {
      // torch_npu stopped the registration although the runtime still captures.
      resume_capture_locked(graph, model_filter(graph));
    }
    return true;  // keep protecting it
  }
  if (at_end && observer_ != nullptr && graph->pool != nullptr) {  // Note [Failed captures]
    const GraphPool& pool = *graph->pool;
    observer_->capture_failed(&pool, pool.id, pool.blocks, pool.bytes_held);
  }
  graph_dies_locked(graph, released);
  return false;
}

// Note [Replay fences]
// ~~~~~~~~~~~~~~~~~~~~
// NPUGraph::replay runs the model on the current stream *of the capture device* (it makes that
// device current first), whatever device the caller had current. So a replay is noted as
// getCurrentNPUStream(graph->device), and the fence recorded when the graph dies is one event
// on each such stream, recorded with that stream's device current (NPUEvent::record) and
// queried the same way (event_done). A fence is never recorded on a stream that is capturing:
// it would be captured, not run; the graph's blocks then wait until that capture is over.
//
// One event covers every replay enqueued on its stream before it, so fences form one queue
// (fences_, in record order): each entry is an event on one stream and the dead graphs whose
// replays there it covers. A pass (process_pending_pass)
//   1. pops the fences that completed, front first, and finishes each graph whose last fence
//      that was (a graph replayed on two streams is in two fences: fences_left counts them);
//      it stops at the first fence still in flight when its deadline passes - one deadline per
//      call, however many graphs a fence covers, and the rest wait for a later call;
//   2. fences the graphs that died since (unfenced_): one event per stream for all of them,
//      so graphs dying one after another (a reset loop) share a fence. A pass that does not
//      wait records none while a fence is in flight: they share the next one. Then graph_died
//      runs no pass at all (a reset costs the registry update, no event query), and the next
//      pass (an allocation inside a capture or one that misses its free list, stats(),
//      host_empty_cache()) does both steps.
// A graph's blocks may come back a fence later; never earlier.
//
// The fast path: the replay hook runs on every replay (every step of a decode loop), and
// noting a stream already noted costs a thread-local compare, without mutex_ or the registry:
// each thread remembers the last (graph, stream) it noted per slot. A graph's replay_streams
// only grows while it lives and handles are never reused, so a remembered pair stays true.
namespace {
struct NotedReplay {
  uint64_t handle{0};
  c10::DeviceIndex device{-1};
  c10::StreamId stream{0};
};
thread_local std::array<NotedReplay, 8> t_replays_noted{};
}  // namespace

void PinPoolHostAllocatorImpl::graph_replay(uint64_t handle) {
  NotedReplay& noted = t_replays_noted[handle % t_replays_noted.size()];
  if (noted.handle == handle &&
      c10_npu::getCurrentNPUStream(noted.device).id() == noted.stream) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);  // getCurrentNPUStream takes no lock of ours
  if (CapturedGraph* graph = graph_locked(handle)) {
    const Stream stream = c10_npu::getCurrentNPUStream(graph->device);
    auto& streams = graph->replay_streams;  // a few: torch_npu's pool streams at most
    if (std::find(streams.begin(), streams.end(), stream) == streams.end()) {
      streams.push_back(stream);
    }
    noted = {handle, graph->device, stream.id()};
  }
}

bool PinPoolHostAllocatorImpl::graph_died(uint64_t handle) {
  std::vector<c10::DataPtr> released;  // dies after the lock
  std::lock_guard<std::mutex> lock(mutex_);
  CapturedGraph* graph = graph_locked(handle);
  if (graph == nullptr) {
    return false;
  }
  graph_dies_locked(graph, released);
  return fences_.empty();  // no fence in flight: fence its replays now (process_pending)
}

// torch_npu >= 2.11 calls it from every NPUGraph::reset: with announced graphs only (the
// hooks report their deaths), it finds the id's pools (one lookup per device that has a pool)
// have none of their own and returns, without walking the registry.
void PinPoolHostAllocatorImpl::release_pool(MempoolId pool_id) {
  {
    std::vector<c10::DataPtr> released;  // dies after the lock
    std::lock_guard<std::mutex> lock(mutex_);
    // The id's pools that have graphs of their own, one per device (Note [Pools per device]).
    std::vector<GraphPool*> owners;
    for (c10::DeviceIndex device = 0; device <= max_pool_device_; ++device) {
      auto it = pools_.find(PoolKey{device, pool_id});
      if (it != pools_.end() && it->second->unannounced > 0) {
        owners.push_back(it->second);
      }
    }
    if (owners.empty()) {
      return;
    }
    std::vector<CapturedGraph*> alive;  // unannounced graphs of the id, on every device
    for (auto& [handle, graph] : graphs_) {
      if (!graph->announced && graph->state == CapturedGraph::State::kAlive &&
          std::find(owners.begin(), owners.end(), graph->pool) != owners.end()) {
        alive.push_back(graph);
      }
    }
    if (alive.empty()) {
      // only captures underway: release_pool ends no capture
    } else if (std::all_of(alive.begin(), alive.end(), [&](const CapturedGraph* graph) {
                 return graph->pool == alive.front()->pool;
               })) {
      graph_dies_locked(alive.front(), released);  // one device: any of them, as ever
    } else if (static_cast<size_t>(++unmatched_releases_[pool_id]) >= alive.size()) {
      // Note [Pools per device]: which one died is unknown until all have.
      unmatched_releases_.erase(pool_id);
      for (CapturedGraph* graph : alive) {
        graph_dies_locked(graph, released);
      }
    }
  }
  process_pending();
}

bool PinPoolHostAllocatorImpl::keep_for_replays(const Stream& stream,
                                                const std::vector<std::pair<void*, void*>>& blocks,
                                                std::shared_ptr<void> state) {
  std::vector<PinBlock*> found;
  for (const auto& [ptr, ctx] : blocks) {
    found.push_back(find_block(ptr));  // map_mutex_, never under mutex_
  }
  std::lock_guard<std::mutex> lock(mutex_);
  CapturedGraph* graph = capturing_graph_locked(stream);
  if (graph == nullptr) {
    return false;
  }
  for (PinBlock* block : found) {
    record_captured_use(block, *graph);
  }
  graph->replay_state.push_back(std::move(state));
  return true;
}

// A captured operation on `graph`'s stream reads or writes `block` (null: not ours).
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
                               graph.device);
  }
  if (block->last_user_ == graph.handle) {
    return true;  // counted already (the usual repeat: a loop of copies from one buffer)
  }
  block->last_user_ = graph.handle;
  graph.blocks.push_back(block);
  block->graph_uses_++;
  if (block->state() == BlockState::kInUse) {
    block->set_state(BlockState::kGraphUsed);  // Note [Block states]: its free takes the slow path
  }
  return true;
}

}  // namespace torch_npu_pinpool
