#include "pin_pool_allocator.h"

#include "large_blocks.h"  // issue #14

#include <Python.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <c10/util/llvmMathExtras.h>
#include <dlfcn.h>
#include <torch_npu/csrc/core/npu/sys_ctrl/npu_sys_ctrl.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace torch_npu_pinpool {
namespace {

constexpr int kCaptureStatusActive = 1;  // aclmdlRICaptureStatus::ACTIVE
// empty_cache() waits at most this long for a retiring pool's fence (then the pool stays
// retiring and a later call gives it back): a wedged runtime must not hang host_empty_cache().
constexpr auto kFenceWaitLimit = std::chrono::seconds(5);

size_t size_index(size_t size) { return c10::llvm::Log2_64_Ceil(size); }

bool runtime_up() { return c10_npu::NpuSysCtrl::GetInstance().GetInitFlag(); }

// Per-device free lists of NPUEvents; leaked (events may be dropped during exit).
struct EventFreeList {
  std::mutex mutex;
  std::vector<std::vector<c10_npu::NPUEvent*>> per_device;
};
EventFreeList& event_free_list() {
  static auto* list = new EventFreeList();
  return *list;
}

Event make_event(c10::DeviceIndex device) {
  auto& list = event_free_list();
  {
    std::lock_guard<std::mutex> lock(list.mutex);
    if (device >= 0 && static_cast<size_t>(device) < list.per_device.size() &&
        !list.per_device[device].empty()) {
      auto* event = list.per_device[device].back();
      list.per_device[device].pop_back();
      return Event(event);
    }
  }
  return Event(new c10_npu::NPUEvent());
}

}  // namespace

void EventRecycler::operator()(c10_npu::NPUEvent* event) const {
  const auto device = event->device_index();
  if (device < 0) {  // never recorded
    delete event;
    return;
  }
  auto& list = event_free_list();
  std::lock_guard<std::mutex> lock(list.mutex);
  if (list.per_device.size() <= static_cast<size_t>(device)) {
    list.per_device.resize(device + 1);
  }
  list.per_device[device].push_back(event);
}

std::pair<int, void*> capture_info(const Stream& stream) {
  using GetInfoFn = int (*)(void*, int*, void**);
  // libascendcl is loaded by torch_npu with local scope; look it up by handle.
  static GetInfoFn get_info = []() -> GetInfoFn {
    void* lib = dlopen("libascendcl.so", RTLD_NOW | RTLD_NOLOAD);
    void* sym = dlsym(lib != nullptr ? lib : RTLD_DEFAULT, "aclmdlRICaptureGetInfo");
    return reinterpret_cast<GetInfoFn>(sym);
  }();
  if (get_info == nullptr) {
    return {0, nullptr};
  }
  int status = 0;
  void* model = nullptr;
  // stream(false): the raw aclrtStream without draining torch_npu's task queue.
  if (get_info(stream.stream(false), &status, &model) != 0) {
    return {0, nullptr};
  }
  return {status, model};
}

// ---------------------------------------------------------------------------------------
// Note [Backing store]
// ~~~~~~~~~~~~~~~~~~~~
// Raw pinned bytes come from torch_npu's own host allocator (native_->allocate), never from
// aclrtMallocHost directly. torch_npu's copy kernels call record_event only for raw pointers
// its own allocator handed out (process_non_blocking_copy -> ptr_exist -> native npu_ptrs_,
// the same on 2.8, 2.9, 2.10 and master), and is_pinned() falls back to the same check.
// Holding native's DataPtr keeps the bytes registered there, so eager non_blocking copies
// from our tensors are exactly as protected as native ones (the record_event reaches us
// through the registry). Dropping the DataPtr hands the bytes back to native's cache;
// empty_cache() ends with native_->empty_cache() so host_empty_cache() reaches the system.
// DataPtrs are always destroyed outside our locks.

PinPoolHostAllocatorImpl::PinPoolHostAllocatorImpl(at::HostAllocator* native)
    : native_(native),
      large_threshold_(large_block_threshold() > 0 ? large_block_threshold() : SIZE_MAX),
      large_(new LargeBlocks()) {}

// ---------------------------------------------------------------------------------------
// Issue #14 hooks: the default pool for requests >= large_threshold_ (Note [Large blocks]).

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_default(size_t size) {
  return size >= large_threshold_ ? allocate_large(size) : Base::allocate(size);
}

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_large(size_t size) {
  const size_t rounded = round_large(size);
  if (PinBlock* block = large_->take(rounded)) {
    return {block->ptr_, block};
  }
  // No cached block fits: give back the idle ones first (they are rarely reused at another
  // size, and together they can be tens of GiB), then pin the new one.
  std::vector<c10::DataPtr> released;
  for (PinBlock* idle : large_->take_idle()) {
    released.push_back(take_raw(idle->ptr_));
    delete idle;
  }
  released.clear();
  // Registered like a default-pool block (no pool block): find_block gets it from the ctx.
  void* ptr = allocate_raw(rounded, /*pool_block=*/nullptr);
  PinBlock* block = large_->add(rounded, ptr);
  return {block->ptr_, block};
}

void PinPoolHostAllocatorImpl::free_default(PinBlock* block) {
  if (block->large_) {
    large_->put(block);
  } else {
    Base::free(block);
  }
}

void* PinPoolHostAllocatorImpl::allocate_raw(size_t size, PinBlock* pool_block) {
  c10::DataPtr data = native_->allocate(size);
  void* ptr = data.get();
  TORCH_CHECK(ptr != nullptr, "torch_npu's host allocator returned no memory for ", size,
              " bytes of pinned memory.");
  std::lock_guard<std::mutex> lock(backing_mutex_);
  backing_.emplace(ptr, std::make_pair(std::move(data), pool_block));
  return ptr;
}

c10::DataPtr PinPoolHostAllocatorImpl::take_raw(void* ptr) {
  std::lock_guard<std::mutex> lock(backing_mutex_);
  auto it = backing_.find(ptr);
  TORCH_INTERNAL_ASSERT(it != backing_.end(), "pinned block not in the backing store");
  c10::DataPtr data = std::move(it->second.first);
  backing_.erase(it);
  return data;
}

void PinPoolHostAllocatorImpl::allocate_host_memory(size_t size, void** ptr) {
  // The default pool's slow path: a good moment to give back what retiring pools hold.
  if (C10_UNLIKELY(pending_.load(std::memory_order_relaxed) != 0)) {
    process_pending();
  }
  *ptr = allocate_raw(size, /*pool_block=*/nullptr);
}

void PinPoolHostAllocatorImpl::free_block(PinBlock* block) {
  c10::DataPtr data = take_raw(block->ptr_);
  // `data` dies here, after backing_mutex_ was released.
}

void PinPoolHostAllocatorImpl::record_stream(std::optional<std::vector<Event>>& events,
                                             Stream stream) {
  if (!runtime_up()) {
    return;  // exiting: the runtime is gone, nothing is in flight any more
  }
  Event event = make_event(stream.device_index());
  event->record(stream);
  events->push_back(std::move(event));
}

bool PinPoolHostAllocatorImpl::query_event(Event& event) {
  // Like torch_npu's allocator: a runtime error while querying counts as completed, so a
  // broken device cannot wedge the host allocator.
  try {
    return event->query();
  } catch (const std::exception& e) {
    LOG(WARNING) << "torch_npu_pinpool: event query failed: " << e.what();
    return true;
  }
}

#if PINPOOL_HAS_ATEN_HOST_POOLS
Stream PinPoolHostAllocatorImpl::get_current_stream() const {
  return c10_npu::getCurrentNPUStream();
}

bool PinPoolHostAllocatorImpl::stream_is_capturing(Stream stream) const {
  return capture_info(stream).first != 0;
}
#endif

std::vector<Event> PinPoolHostAllocatorImpl::record_events(
    const ska::flat_hash_set<Stream>& streams) {
  std::vector<Event> events;
  if (!runtime_up()) {
    return events;
  }
  events.reserve(streams.size());
  for (const auto& stream : streams) {
    Event event = make_event(stream.device_index());
    event->record(stream);
    events.push_back(std::move(event));
  }
  return events;
}

// Like events_done, but polls until the events complete or kFenceWaitLimit passed. Polling,
// not NPUEvent::synchronize(): the record may still sit in torch_npu's task queue, and
// query() is the answer that accounts for that.
bool PinPoolHostAllocatorImpl::wait_events(std::vector<Event>& events) {
  const auto deadline = std::chrono::steady_clock::now() + kFenceWaitLimit;
  auto pause = std::chrono::microseconds(20);
  while (!events_done(events)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      TORCH_WARN_ONCE(
          "torch_npu_pinpool: a retiring graph pool's fence did not complete within ",
          kFenceWaitLimit.count(), " s; its pinned memory is given back by a later call.");
      return false;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  return true;
}

bool PinPoolHostAllocatorImpl::events_done(std::vector<Event>& events) {
  while (!events.empty()) {
    if (!query_event(events.back())) {
      return false;
    }
    events.pop_back();
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// allocate / free / record_event

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate(size_t size) {
  if (C10_LIKELY(captures_underway_.load(std::memory_order_relaxed) == 0)) {
    return allocate_default(size);  // issue #14 hook (was Base::allocate)
  }
  return allocate_during_capture(size);
}

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_during_capture(size_t size) {
  if (size == 0) {
    return {nullptr, nullptr};
  }
  const Stream stream = c10_npu::getCurrentNPUStream();
  GraphPool* pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pool = capture_pool_locked(stream);
  }
  // Other streams and threads keep using the default pool while a capture runs.
  if (pool == nullptr) {
    return allocate_default(size);  // issue #14 hook (was Base::allocate)
  }
  if (pending_.load(std::memory_order_relaxed) != 0) {
    process_pending();
  }
  return allocate_in_pool(*pool, size);
}

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_in_pool(GraphPool& pool,
                                                                    size_t size) {
  // Issue #14 hook: large requests are page-rounded, so a bucket can hold blocks of differing
  // sizes: take only one that holds the request (PyTorch PR 192722).
  const size_t rounded =
      size >= large_threshold_ ? round_large(size) : c10::llvm::PowerOf2Ceil(size);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& free_list = pool.free_blocks[size_index(rounded)];
    auto fits = std::find_if(free_list.begin(), free_list.end(),
                             [&](const PinBlock* b) { return b->size_ >= rounded; });
    if (fits != free_list.end()) {
      PinBlock* block = *fits;
      free_list.erase(fits);
      block->allocated_ = true;
      pool.bytes_in_use += block->size_;
      return {block->ptr_, block};
    }
  }
  // The capture holds a use of `pool`, so it stays alive while we allocate unlocked.
  auto block = std::make_unique<PinBlock>(rounded, nullptr, &pool);
  block->ptr_ = allocate_raw(rounded, block.get());
  block->allocated_ = true;
  std::lock_guard<std::mutex> lock(mutex_);
  pool.blocks.insert(block.get());
  pool.bytes_held += rounded;
  pool.bytes_in_use += rounded;
  PinBlock* raw = block.release();
  return {raw->ptr_, raw};
}

void PinPoolHostAllocatorImpl::free(void* ctx) {
  if (ctx == nullptr) {
    return;
  }
  auto* block = static_cast<PinBlock*>(ctx);
  if (C10_LIKELY(block->pool_ == nullptr &&
                 block->adopted_by_.load(std::memory_order_relaxed) == nullptr)) {
    free_default(block);  // issue #14 hook (was Base::free)
    return;
  }
  free_slow(block);
}

void PinPoolHostAllocatorImpl::free_slow(PinBlock* block) {
  if (block->pool_ == nullptr) {
    // An adopted default-pool block: its pool's graphs may still read it.
    bool to_base = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (block->adopted_by_.load() != nullptr) {
        block->free_deferred_ = true;
      } else {
        to_base = true;  // the pool drained in the meantime
      }
    }
    if (to_base) {
      free_default(block);  // issue #14 hook (was Base::free)
    }
    return;
  }

  // A pool block. Eager uses (streams_) must finish before anyone gets it again.
  ska::flat_hash_set<Stream> streams;
  {
    std::lock_guard<std::mutex> guard(block->mutex_);
    streams = std::move(block->streams_);
    block->streams_.clear();
  }
  std::vector<Event> events = record_events(streams);
  std::vector<c10::DataPtr> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated_ = false;
    block->pool_->bytes_in_use -= block->size_;
    if (!events.empty()) {
      pending_blocks_.push_back({std::move(events), block});
      update_pending_locked();
    } else {
      place_free_block_locked(block, released);
    }
  }
}

bool PinPoolHostAllocatorImpl::record_event(void* ptr, void* ctx, c10::Stream s) {
  if (C10_LIKELY(captures_underway_.load(std::memory_order_relaxed) == 0)) {
    if (Base::record_event(ptr, ctx, s)) {
      return true;
    }
    return record_use(ptr, ctx, Stream(Stream::UNCHECKED, s));
  }
  const Stream stream(Stream::UNCHECKED, s);
  PinBlock* block = find_block(ptr, ctx);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (GraphPool* pool = capture_pool_locked(stream)) {
      if (block == nullptr) {
        TORCH_WARN_ONCE(
            "torch_npu_pinpool: a pinned tensor allocated before torch_npu_pinpool was "
            "activated is used inside a graph capture; it is not protected from reuse. "
            "Import torch_npu_pinpool before pinning memory.");
        return false;
      }
      return record_captured_use(block, *pool);
    }
  }
  if (capture_info(stream).first != 0) {
    // Never put a capturing stream into streams_: an event recorded on it would be
    // captured too and "complete" at once. A capture we do not know of (begun before
    // activation, or by raw ACL) cannot be protected; say so once.
    TORCH_WARN_ONCE(
        "torch_npu_pinpool: a pinned tensor is used by a graph capture that was begun "
        "before torch_npu_pinpool was activated; its host memory is not protected. "
        "Import torch_npu_pinpool before capturing.");
    return false;
  }
  return Base::record_event(ptr, ctx, s) || record_use(ptr, ctx, stream);
}

// An eager use of a pool block or of a tensor some other allocator made.
bool PinPoolHostAllocatorImpl::record_use(void* ptr, void* ctx, Stream stream) {
  PinBlock* block = find_block(ptr, ctx);
  if (block == nullptr) {
    // Pinned before activation: its deleter is native's, so is its bookkeeping.
    return native_->record_event(ptr, ctx, stream.unwrap());
  }
  std::lock_guard<std::mutex> guard(block->mutex_);
  block->streams_.insert(stream);
  return true;
}

// Our block behind (ptr, ctx), or null. A pointer in the backing store is ours alone: native
// cannot hand those bytes to anybody else while we hold its DataPtr, so for a default-pool
// entry the tensor's ctx is our block.
PinBlock* PinPoolHostAllocatorImpl::find_block(void* ptr, void* ctx) {
  std::lock_guard<std::mutex> lock(backing_mutex_);
  auto it = backing_.find(ptr);
  if (it == backing_.end()) {
    return nullptr;
  }
  if (it->second.second != nullptr) {
    return it->second.second;  // a pool block
  }
  auto* block = static_cast<PinBlock*>(ctx);
  return (block != nullptr && block->ptr_ == ptr) ? block : nullptr;
}

// ---------------------------------------------------------------------------------------
// Note [Capture block lifetime]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A captured copy keeps the host *address*; every replay reads or writes the bytes there as
// they are at that moment, and the CPU rewrites them between replays. So a block that any
// captured operation uses
//   * is never handed to anyone outside its pool, and never handed out again at all (not
//     even inside the pool: two captured copies must never share a block) while any graph of
//     the pool exists - whether it was allocated inside the capture (pool block,
//     used_by_capture_) or before it (default-pool block, adopted_by_ = the capture's pool;
//     if its tensor dies while adopted, the base free waits for the pool's retirement);
//   * is given back only after every replay that may read it has finished: retirement
//     records one event per stream the pool's graphs were replayed on (never on a capturing
//     stream - it would be captured; retirement waits until that stream stops capturing)
//     and releases the blocks when those events complete.
// Blocks allocated in a capture and freed unused are reused within the pool. When a pool's
// graphs read another pool's blocks, the reader holds a use of that pool until it drains.

bool PinPoolHostAllocatorImpl::record_captured_use(PinBlock* block, GraphPool& pool) {
  if (block->pool_ != nullptr) {
    block->used_by_capture_ = true;
    if (block->pool_ != &pool) {
      add_dependency_locked(pool, block->pool_);
    }
    return true;
  }
  GraphPool* owner = block->adopted_by_.load();
  if (owner == nullptr) {
    block->adopted_by_.store(&pool);
    pool.adopted.push_back(block);
  } else if (owner != &pool) {
    add_dependency_locked(pool, owner);
  }
  return true;
}

void PinPoolHostAllocatorImpl::add_dependency_locked(GraphPool& pool, GraphPool* other) {
  if (std::find(pool.depends_on.begin(), pool.depends_on.end(), other) != pool.depends_on.end()) {
    return;
  }
  if (other->retired) {
    TORCH_WARN_ONCE(
        "torch_npu_pinpool: a graph captured a pinned tensor that belongs to a graph pool "
        "already released; keep the graph that made the tensor alive while capturing.");
    return;
  }
  other->uses++;
  pool.depends_on.push_back(other);
}

// ---------------------------------------------------------------------------------------
// Capture registry

GraphPool* PinPoolHostAllocatorImpl::capture_pool_locked(Stream stream) {
  const c10::Stream s = stream.unwrap();
  for (auto& capture : captures_) {
    if (capture.filter(s)) {
      return capture.pool;
    }
  }
  return nullptr;
}

GraphPool* PinPoolHostAllocatorImpl::pool_for_id_locked(MempoolId id) {
  auto it = pools_.find(id);
  return it == pools_.end() ? nullptr : it->second;
}

uint64_t PinPoolHostAllocatorImpl::begin_capture(MempoolId pool_id,
                                                 CaptureFilter filter) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool anonymous = pool_id.first == 0 && pool_id.second == 0;
  GraphPool* pool = anonymous ? nullptr : pool_for_id_locked(pool_id);
  if (pool == nullptr) {
    pool = new GraphPool();
    pool->id = pool_id;
    if (anonymous) {
      anonymous_pools_.push_back(pool);
    } else {
      pools_.emplace(pool_id, pool);
    }
  }
  TORCH_CHECK(!pool->capturing, "torch_npu_pinpool: a graph capture into memory pool (",
              pool_id.first, ", ", pool_id.second,
              ") is already underway. Captures that share a pool must run one after another: "
              "end the other capture first, or capture into a different pool.");
  pool->capturing = true;
  pool->uses++;  // the capture's use; it becomes the graph's use at capture end
  const uint64_t token = ++seq_;
  captures_.push_back({token, pool, std::move(filter), std::this_thread::get_id()});
  captures_underway_.fetch_add(1, std::memory_order_relaxed);
  return token;
}

void PinPoolHostAllocatorImpl::unregister_capture_locked(std::vector<Capture>::iterator it) {
  it->pool->capturing = false;
  captures_.erase(it);
  captures_underway_.fetch_sub(1, std::memory_order_relaxed);
}

void PinPoolHostAllocatorImpl::end_capture(MempoolId pool_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(captures_.begin(), captures_.end(),
                         [&](const Capture& c) { return c.pool->id == pool_id; });
  if (it == captures_.end()) {
    // Already dropped: a retried capture_end after a failed one (torch_npu calls
    // end_allocate_to_pool before it checks the runtime's answer).
    return;
  }
  unregister_capture_locked(it);
  ended_.push_back({++seq_, {pool_id, std::this_thread::get_id()}});
  if (ended_.size() > 64) {
    ended_.erase(ended_.begin(), ended_.begin() + 32);
  }
}

void PinPoolHostAllocatorImpl::end_capture_token(uint64_t token, MempoolId bind_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(captures_.begin(), captures_.end(),
                         [&](const Capture& c) { return c.token == token; });
  TORCH_CHECK(it != captures_.end(), "torch_npu_pinpool: capture ", token,
              " is not registered (ended twice?).");
  GraphPool* pool = it->pool;
  unregister_capture_locked(it);
  auto anon = std::find(anonymous_pools_.begin(), anonymous_pools_.end(), pool);
  if (anon != anonymous_pools_.end()) {
    // <= 2.10: NPUGraph::pool() only answers after capture_end; bind the pool to it now.
    anonymous_pools_.erase(anon);
    TORCH_CHECK(pools_.find(bind_id) == pools_.end(), "torch_npu_pinpool: memory pool (",
                bind_id.first, ", ", bind_id.second, ") is already bound.");
    pool->id = bind_id;
    pools_.emplace(bind_id, pool);
  }
}

// Captures this thread registered after `seq` whose capture never started (or is over
// without a graph): drop the registration and the use it held.
int PinPoolHostAllocatorImpl::abort_captures_since(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  int aborted = 0;
  for (auto it = captures_.begin(); it != captures_.end();) {
    if (it->token > seq && it->thread == std::this_thread::get_id()) {
      GraphPool* pool = it->pool;
      unregister_capture_locked(it);
      release_use_locked(pool);
      aborted++;
      it = captures_.begin();
    } else {
      ++it;
    }
  }
  return aborted;
}

std::vector<MempoolId> PinPoolHostAllocatorImpl::ended_since(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<MempoolId> ids;
  for (const auto& [when, what] : ended_) {
    if (when > seq && what.second == std::this_thread::get_id()) {
      ids.push_back(what.first);
    }
  }
  return ids;
}

// Captures this thread registered after `seq` that are still underway.
std::vector<uint64_t> PinPoolHostAllocatorImpl::captures_since(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint64_t> tokens;
  for (const auto& c : captures_) {
    if (c.token > seq && c.thread == std::this_thread::get_id()) {
      tokens.push_back(c.token);
    }
  }
  return tokens;
}

// The capture is over without a graph (its end failed): drop the registration and its use.
void PinPoolHostAllocatorImpl::abort_capture(uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(captures_.begin(), captures_.end(),
                         [&](const Capture& c) { return c.token == token; });
  if (it == captures_.end()) {
    return;
  }
  GraphPool* pool = it->pool;
  unregister_capture_locked(it);
  release_use_locked(pool);
}

void PinPoolHostAllocatorImpl::release_pool(MempoolId pool_id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    GraphPool* pool = pool_for_id_locked(pool_id);
    if (pool == nullptr) {
      return;  // a pool this allocator never saw (graph captured before activation)
    }
    release_use_locked(pool);
  }
  // Fence the replay streams now, so the memory comes back as soon as they are done.
  process_pending();
}

void PinPoolHostAllocatorImpl::note_replay(MempoolId pool_id) {
  const Stream stream = c10_npu::getCurrentNPUStream();
  std::lock_guard<std::mutex> lock(mutex_);
  if (GraphPool* pool = pool_for_id_locked(pool_id)) {
    pool->replay_streams.insert(stream);
  }
}

// A pool whose last use goes away retires: its id is erased at once (so it can be captured
// into again), its blocks are given back once the fence says no replay can still read them.
void PinPoolHostAllocatorImpl::release_use_locked(GraphPool* pool) {
  TORCH_INTERNAL_ASSERT(pool->uses > 0, "memory pool released more often than used");
  if (--pool->uses > 0) {
    return;
  }
  auto it = pools_.find(pool->id);
  if (it != pools_.end() && it->second == pool) {
    pools_.erase(it);
  }
  auto anon = std::find(anonymous_pools_.begin(), anonymous_pools_.end(), pool);
  if (anon != anonymous_pools_.end()) {
    anonymous_pools_.erase(anon);
  }
  pool->retired = true;
  retiring_.push_back(pool);
  update_pending_locked();
}

void PinPoolHostAllocatorImpl::update_pending_locked() {
  pending_.store(static_cast<int>(retiring_.size() + pending_blocks_.size()),
                 std::memory_order_relaxed);
}

// Where a pool block goes once nothing in flight uses it.
void PinPoolHostAllocatorImpl::place_free_block_locked(PinBlock* block,
                                                       std::vector<c10::DataPtr>& released) {
  GraphPool* pool = block->pool_;
  if (pool->drained) {
    pool->blocks.erase(block);
    pool->bytes_held -= block->size_;
    released.push_back(take_raw(block->ptr_));
    delete block;
    forget_pool_if_empty_locked(pool);
  } else if (!block->used_by_capture_) {
    pool->free_blocks[size_index(block->size_)].push_back(block);
  }
  // else: held for the pool's graphs until the pool retires.
}

void PinPoolHostAllocatorImpl::forget_pool_if_empty_locked(GraphPool* pool) {
  if (!pool->drained || !pool->blocks.empty()) {
    return;
  }
  drained_.erase(std::remove(drained_.begin(), drained_.end(), pool), drained_.end());
  delete pool;
}

// The fence completed: no replay can read the pool's blocks any more.
void PinPoolHostAllocatorImpl::drain_locked(GraphPool* pool,
                                            std::vector<c10::DataPtr>& released,
                                            std::vector<PinBlock*>& base_frees) {
  pool->drained = true;
  for (auto& list : pool->free_blocks) {
    list.clear();
  }
  std::vector<PinBlock*> idle;
  for (PinBlock* block : pool->blocks) {
    if (!block->allocated_) {
      idle.push_back(block);
    }
  }
  for (PinBlock* block : idle) {
    pool->blocks.erase(block);
    pool->bytes_held -= block->size_;
    released.push_back(take_raw(block->ptr_));
    delete block;
  }
  for (PinBlock* block : pool->adopted) {
    block->adopted_by_.store(nullptr);
    if (block->free_deferred_) {
      block->free_deferred_ = false;
      base_frees.push_back(block);
    }
  }
  pool->adopted.clear();
  for (GraphPool* other : pool->depends_on) {
    release_use_locked(other);
  }
  pool->depends_on.clear();
  retiring_.erase(std::remove(retiring_.begin(), retiring_.end(), pool), retiring_.end());
  drained_.push_back(pool);
  forget_pool_if_empty_locked(pool);
}

// Never silently skipped: a caller that finds another thread inside leaves process_again_
// set, and that thread runs another pass before it leaves (so a pool retired by release_pool
// while another thread processes - a GC finalizer, say - gets its fence at once).
void PinPoolHostAllocatorImpl::process_pending(bool wait) {
  process_again_.store(true);
  for (;;) {
    std::unique_lock<std::mutex> serial(process_mutex_, std::defer_lock);
    if (wait) {
      serial.lock();
    } else if (!serial.try_lock()) {
      return;  // the thread inside sees process_again_ after its pass
    }
    if (wait) {  // this caller's own pass, even if another thread consumed the request
      process_again_.store(false);
      process_pending_pass(/*wait=*/true);
      wait = false;
    }
    while (process_again_.exchange(false)) {
      process_pending_pass(/*wait=*/false);
    }
    serial.unlock();
    if (!process_again_.load()) {
      return;
    }
  }
}

void PinPoolHostAllocatorImpl::process_pending_pass(bool wait) {
  std::vector<c10::DataPtr> released;  // destroyed last, with no lock of ours held
  std::vector<PinBlock*> base_frees;

  // Pool blocks freed after eager use.
  std::vector<PendingBlock> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(pending_blocks_);
  }
  std::vector<PendingBlock> not_ready;
  std::vector<PinBlock*> ready;
  for (auto& item : blocks) {
    if (events_done(item.events)) {
      ready.push_back(item.block);
    } else {
      not_ready.push_back(std::move(item));
    }
  }

  // Retiring pools: fence the replay streams, then wait for the fence.
  std::vector<std::pair<GraphPool*, ska::flat_hash_set<Stream>>> to_fence;
  std::vector<GraphPool*> fenced;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* block : ready) {
      place_free_block_locked(block, released);
    }
    for (auto& item : not_ready) {
      pending_blocks_.push_back(std::move(item));
    }
    for (GraphPool* pool : retiring_) {
      if (!pool->fence_recorded) {
        to_fence.emplace_back(pool, pool->replay_streams);
      } else {
        fenced.push_back(pool);
      }
    }
  }
  // Only this thread (process_mutex_) touches fences, so they are used unlocked here.
  for (auto& [pool, streams] : to_fence) {
    const bool any_capturing = std::any_of(streams.begin(), streams.end(), [](const Stream& s) {
      return capture_info(s).first != 0;
    });
    if (any_capturing) {
      continue;  // try again once that capture is over
    }
    pool->fence = record_events(streams);
    pool->fence_recorded = true;
    fenced.push_back(pool);
  }
  std::vector<GraphPool*> done;
  for (GraphPool* pool : fenced) {
    if (wait ? wait_events(pool->fence) : events_done(pool->fence)) {
      done.push_back(pool);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (GraphPool* pool : done) {
      drain_locked(pool, released, base_frees);
    }
    update_pending_locked();
  }
  for (PinBlock* block : base_frees) {
    free_default(block);  // issue #14 hook (was Base::free)
  }
}

// ---------------------------------------------------------------------------------------
// empty_cache / stats / introspection

void PinPoolHostAllocatorImpl::empty_cache() {
  // Deterministic: fence what retired and wait for the fences (pools whose replay stream is
  // capturing stay retiring), so graph gone + host_empty_cache() gives the bytes back.
  process_pending(/*wait=*/true);
  Base::empty_cache();
  // Pool blocks allocated in a capture and freed unused: no graph reads them.
  std::vector<c10::DataPtr> released;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, pool] : pools_) {
      for (auto& list : pool->free_blocks) {
        for (PinBlock* block : list) {
          pool->blocks.erase(block);
          pool->bytes_held -= block->size_;
          released.push_back(take_raw(block->ptr_));
          delete block;
        }
        list.clear();
      }
    }
  }
  for (PinBlock* block : large_->take_idle()) {  // issue #14 hook
    released.push_back(take_raw(block->ptr_));
    delete block;
  }
  released.clear();
  native_->empty_cache();
}

void PinPoolHostAllocatorImpl::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

at::HostStats PinPoolHostAllocatorImpl::stats() {
  if (pending_.load(std::memory_order_relaxed) != 0) {
    process_pending();
  }
  at::HostStats stats = Base::getStats();
#if PINPOOL_ATEN_IN_USE_BYTES_MISCOUNTED
  // In-use bytes of the default pool from the per-bucket block counts (see version_shim.h):
  // a bucket holds one size, 2^index (blocks are PowerOf2Ceil, the index Log2_64_Ceil).
  // Read without the bucket locks (private to ATen): a snapshot, like the rest of stats.
  // `peak` and `freed` of this stat stay as ATen counts them.
  int64_t in_use_bytes = 0;
#if PINPOOL_HOST_STATS_2_10
  const auto& in_use_counts = stats_.active_bucket_stats;
  c10::CachingAllocator::Stat& in_use_stat = stats.active_bytes;
#else
  const auto& in_use_counts = stats_.allocation_bucket_stats;
  c10::CachingAllocator::Stat& in_use_stat = stats.allocated_bytes;
#endif
  for (size_t i = 0; i < in_use_counts.size() && i < 63; ++i) {
    in_use_bytes += in_use_counts[i].current * (int64_t{1} << i);
  }
  in_use_stat.current = in_use_bytes;
#endif
  // Graph-pool blocks are host memory this allocator holds: count them like ATen counts
  // its own (current values; peaks are best effort, as in ATen).
  int64_t blocks = 0, bytes = 0, active_blocks = 0, active_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto add = [&](GraphPool* pool) {
      for (PinBlock* block : pool->blocks) {
        blocks += 1;
        bytes += static_cast<int64_t>(block->size_);
        if (block->allocated_) {
          active_blocks += 1;
          active_bytes += static_cast<int64_t>(block->size_);
        }
      }
    };
    for (auto& [id, pool] : pools_) add(pool);
    for (GraphPool* pool : anonymous_pools_) add(pool);
    for (GraphPool* pool : retiring_) add(pool);
    for (GraphPool* pool : drained_) add(pool);
  }
  {  // issue #14 hook: large default-pool blocks
    const LargeBlocks::Stats large = large_->stats();
    blocks += large.blocks;
    bytes += large.bytes;
    active_blocks += large.active_blocks;
    active_bytes += large.active_bytes;
  }
  auto fold = [](c10::CachingAllocator::Stat& stat, int64_t amount) {
    stat.current += amount;
    stat.peak = std::max(stat.peak, stat.current);
  };
#if PINPOOL_HOST_STATS_2_10
  fold(stats.allocations, blocks);
  fold(stats.allocated_bytes, bytes);
  fold(stats.active_requests, active_blocks);
  fold(stats.active_bytes, active_bytes);
#else
  fold(stats.segment, blocks);
  fold(stats.reserved_bytes, bytes);
  fold(stats.allocation, active_blocks);
  fold(stats.allocated_bytes, active_bytes);
#endif
  return stats;
}

std::vector<PoolInfo> PinPoolHostAllocatorImpl::pool_info() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PoolInfo> out;
  auto describe = [&](GraphPool* pool) {
    out.push_back({pool->id, pool->uses - (pool->capturing ? 1 : 0), pool->capturing,
                   pool->retired, pool->blocks.size(), pool->bytes_held, pool->bytes_in_use,
                   pool->adopted.size()});
  };
  for (auto& [id, pool] : pools_) describe(pool);
  for (GraphPool* pool : anonymous_pools_) describe(pool);
  for (GraphPool* pool : retiring_) describe(pool);
  for (GraphPool* pool : drained_) describe(pool);
  return out;
}

// ---------------------------------------------------------------------------------------
// The registered interface

namespace {

std::atomic<PinPoolHostAllocator*> g_allocator{nullptr};

void pinpool_deleter(void* ctx) {
  auto& impl = g_allocator.load(std::memory_order_relaxed)->impl();
  // Like torch_npu's own deleter: never hold the GIL while freeing (event records go
  // through the task queue).
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS impl.free(ctx);
    Py_END_ALLOW_THREADS
  } else {
    impl.free(ctx);
  }
}

}  // namespace

PinPoolHostAllocator::PinPoolHostAllocator(at::HostAllocator* native)
    : impl_(new PinPoolHostAllocatorImpl(native)) {}

at::DataPtr PinPoolHostAllocator::allocate(size_t size) {
  auto [ptr, ctx] = impl_->allocate(size);
  return {ptr, ctx, &pinpool_deleter, at::DeviceType::CPU};
}

void PinPoolHostAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  impl_->copy_data(dest, src, count);
}

bool PinPoolHostAllocator::record_event(void* ptr, void* ctx, c10::Stream stream) {
  return impl_->record_event(ptr, ctx, stream);
}

void PinPoolHostAllocator::empty_cache() {
  // It may wait for fences: not with the GIL held (event records go through the task queue).
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS impl_->empty_cache();
    Py_END_ALLOW_THREADS
  } else {
    impl_->empty_cache();
  }
}

at::HostStats PinPoolHostAllocator::get_stats() { return impl_->stats(); }

void PinPoolHostAllocator::reset_accumulated_stats() { impl_->resetAccumulatedStats(); }

void PinPoolHostAllocator::reset_peak_stats() { impl_->resetPeakStats(); }

#if PINPOOL_HAS_ATEN_HOST_POOLS
// torch_npu >= 2.11 calls these from NPUGraph::capture_begin / capture_end / reset.
void PinPoolHostAllocator::begin_allocate_to_pool(MempoolId pool_id,
                                                  CaptureFilter filter) {
  impl_->begin_capture(pool_id, std::move(filter));
}

void PinPoolHostAllocator::end_allocate_to_pool(MempoolId pool_id) {
  impl_->end_capture(pool_id);
}

void PinPoolHostAllocator::release_pool(MempoolId pool_id) {
  impl_->release_pool(pool_id);
}
#endif

bool activate() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (g_allocator.load() != nullptr) {
    return false;
  }
  at::HostAllocator* native = at::getHostAllocator(at::kPrivateUse1);
  TORCH_CHECK(native != nullptr,
              "torch_npu_pinpool: torch_npu's host allocator is not registered; import "
              "torch_npu before activating torch_npu_pinpool.");
  configure_native_rounding();  // issue #14: torch_npu pins large blocks at their size
  auto* ours = new PinPoolHostAllocator(native);  // leaked on purpose
  g_allocator.store(ours);
  // torch_npu registered with priority 0; 1 wins and keeps a later priority-0 registration
  // (a second torch_npu load) from silently replacing us.
  at::setHostAllocator(at::kPrivateUse1, ours, /*priority=*/1);
  return true;
}

PinPoolHostAllocator* active_allocator() { return g_allocator.load(); }

}  // namespace torch_npu_pinpool
