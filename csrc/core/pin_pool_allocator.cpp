// The eager allocator: ATen's CachingHostAllocatorImpl runs the default pool (Note [Fast
// path]); this file adds the backing store, the ATen hooks, stats, empty_cache, and the object
// registered in ATen's host-allocator registry. Graph pools: graph_pools.cpp; captures and
// graphs: capture_registry.cpp.
#include "core/pin_pool_allocator.h"

#include "core/large_blocks.h"

#include <Python.h>
#include <pthread.h>
#include <c10/util/Exception.h>
#include <torch_npu/csrc/core/npu/NPUStream.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

namespace torch_npu_pinpool {

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
      large_(new LargeBlocks(&own_stats_)),
      observer_(audit_observer()) {}

// ---------------------------------------------------------------------------------------
// Note [Block map]
// ~~~~~~~~~~~~~~~~
// block_map_ is the one place that says which blocks are ours: every block this allocator
// hands out - default-pool blocks of ATen's Base, large blocks, graph-pool blocks - by its
// start address, with its size, its block and the torch_npu DataPtr behind it. A lookup takes
// the raw address a copy used, which may lie anywhere inside a block (a view), and never a ctx:
// torch_npu's copy kernels pass the ctx of the tensor's own storage, which for an alias of a
// pinned tensor (torch.from_numpy(t.numpy()), DLPack, torch.frombuffer) belongs to the alias -
// a PyObject*, an ATenDLMTensor*, a from_blob context - and must never be read as a block.
// Base makes its blocks after allocate_host_memory returns, so a default-pool entry gets its
// block on the way out of Base::allocate (bind_base_block); until then it maps to no block.

namespace {
// The pointer allocate_host_memory just pinned on this thread, until Base::allocate returns
// its block (Note [Block map]).
thread_local void* t_unbound = nullptr;
}  // namespace

// The default pool for requests >= large_threshold_: Note [Large blocks] (large_blocks.h).
std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_eager(size_t size) {
  if (size >= large_threshold_) {
    return allocate_large(size);
  }
  auto out = Base::allocate(size);
  if (C10_UNLIKELY(t_unbound != nullptr)) {
    bind_base_block(out.first, out.second);
  }
  if (out.second != nullptr) {
    static_cast<PinBlock*>(out.second)->set_state(BlockState::kInUse);  // Note [Block states]
  }
  return out;
}

void PinPoolHostAllocatorImpl::bind_base_block(void* ptr, void* ctx) {
  void* const fresh = std::exchange(t_unbound, nullptr);
  if (fresh != ptr) {
    return;  // the pin's Base::allocate threw after allocate_host_memory: no block was made
  }
  std::lock_guard<std::mutex> lock(map_mutex_);
  block_map_.at(reinterpret_cast<uintptr_t>(ptr)).block = static_cast<PinBlock*>(ctx);
}

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_large(size_t size) {
  const size_t rounded = round_large(size);
  PinBlock* block = large_->take(rounded);
  if (block == nullptr) {
    block = pin_large(rounded);
  }
  return {block->ptr_, block};
}

PinBlock* PinPoolHostAllocatorImpl::pin_large(size_t rounded) {
  auto block = std::make_unique<PinBlock>(rounded, /*pool=*/nullptr, /*large=*/true);
  give_back_idle_large(large_cache_limit());  // idle blocks above the cap: Note [Large blocks]
  const auto start = std::chrono::steady_clock::now();
  try {
    block->ptr_ = allocate_raw(rounded, block.get());
  } catch (const c10::Error&) {
    give_back_idle_large(0);  // the pin failed: every idle block goes back, then once more
    native_->empty_cache();
    block->ptr_ = allocate_raw(rounded, block.get());
  }
  add_host_time(stats_.host_alloc_time, start);  // Note [Stats of our own blocks]
  large_->add(block.get());
  return block.release();
}

// Gives back idle large blocks, oldest first, until at most `keep_bytes` stay idle.
void PinPoolHostAllocatorImpl::give_back_idle_large(size_t keep_bytes) {
  std::vector<c10::DataPtr> released;  // destroyed after the loop, no lock of ours held
  for (PinBlock* idle : large_->take_idle(keep_bytes)) {
    const auto start = std::chrono::steady_clock::now();
    released.push_back(take_raw(idle->ptr_));
    add_host_time(stats_.host_free_time, start);
    delete idle;
  }
}

void PinPoolHostAllocatorImpl::free_eager(PinBlock* block) {
  block->set_state(BlockState::kFree);
  if (block->large_) {
    large_->put(block);
  } else {
    Base::free(block);
  }
}

void* PinPoolHostAllocatorImpl::allocate_raw(size_t size, PinBlock* block) {
  c10::DataPtr data = native_->allocate(size);
  void* ptr = data.get();
  TORCH_CHECK(ptr != nullptr, "torch_npu's host allocator returned no memory for ", size,
              " bytes of pinned memory.");
  std::lock_guard<std::mutex> lock(map_mutex_);
  block_map_.emplace(reinterpret_cast<uintptr_t>(ptr), MappedBlock{std::move(data), size, block});
  return ptr;
}

c10::DataPtr PinPoolHostAllocatorImpl::take_raw(void* ptr) {
  std::lock_guard<std::mutex> lock(map_mutex_);
  auto it = block_map_.find(reinterpret_cast<uintptr_t>(ptr));
  TORCH_INTERNAL_ASSERT(it != block_map_.end(), "pinned block not in the block map");
  c10::DataPtr data = std::move(it->second.data);
  block_map_.erase(it);
  return data;
}

// Our block that holds the address `ptr` (its start or any byte inside), or null.
PinBlock* PinPoolHostAllocatorImpl::find_block(const void* ptr) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(map_mutex_);
  auto it = block_map_.upper_bound(addr);
  if (it == block_map_.begin()) {
    return nullptr;
  }
  --it;
  return addr < it->first + it->second.size ? it->second.block : nullptr;
}

// ---------------------------------------------------------------------------------------
// ATen hooks

void PinPoolHostAllocatorImpl::allocate_host_memory(size_t size, void** ptr) {
  // The default pool's slow path: a good moment to give back what dead graphs hold.
  if (C10_UNLIKELY(pending_.load(std::memory_order_relaxed) != 0)) {
    process_pending();
  }
  // Timed like torch_npu's allocate_host_memory times aclrtMallocHost, so host_alloc_time.count
  // == num_host_alloc as natively: ATen's base never times anything, each subclass does (our own
  // blocks too: Note [Stats of our own blocks]).
  const auto start = std::chrono::steady_clock::now();
  *ptr = allocate_raw(size, /*block=*/nullptr);  // Base makes the block: bind_base_block
  t_unbound = *ptr;
  add_host_time(stats_.host_alloc_time, start);
}

void PinPoolHostAllocatorImpl::free_block(PinBlock* block) {
  // Timed like torch_npu's free_block times aclrtFreeHost (host_free_time.count ==
  // num_host_free). The bytes go back to native's cache here, to the system in empty_cache().
  const auto start = std::chrono::steady_clock::now();
  {
    c10::DataPtr data = take_raw(block->ptr_);
    // `data` dies here, after map_mutex_ was released.
  }
  add_host_time(stats_.host_free_time, start);
}

// Adds the microseconds since `start` to one of ATen's timing stats, under the lock ATen's
// getStats() / reset_*() read them with.
void PinPoolHostAllocatorImpl::add_host_time(c10::CachingAllocator::DurationStat& stat,
                                             std::chrono::steady_clock::time_point start) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  std::lock_guard<std::mutex> lock(stats_.timing_mutex_);
  stat.increase(us.count());
}

void PinPoolHostAllocatorImpl::record_stream(std::optional<std::vector<Event>>& events,
                                             Stream stream) {
  if (!runtime_up()) {
    return;  // exiting: the runtime is gone, nothing is in flight any more
  }
  events->push_back(record_on(stream));
}

bool PinPoolHostAllocatorImpl::query_event(Event& event) { return event_done(event); }

#if PINPOOL_HAS_ATEN_HOST_POOLS
Stream PinPoolHostAllocatorImpl::get_current_stream() const {
  return c10_npu::getCurrentNPUStream();
}

bool PinPoolHostAllocatorImpl::stream_is_capturing(Stream stream) const {
  return in_capture(stream);
}
#endif

// ---------------------------------------------------------------------------------------
// allocate / free / record_event: Note [Fast path]

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate(size_t size) {
  auto out = C10_LIKELY(captures_underway_.load(std::memory_order_relaxed) == 0)
                 ? allocate_eager(size)
                 : allocate_during_capture(size);
  if (C10_UNLIKELY(observer_ != nullptr) && out.first != nullptr) {
    observer_->allocated(out.first);
  }
  return out;
}

void PinPoolHostAllocatorImpl::free(void* ctx) {
  if (ctx == nullptr) {
    return;
  }
  auto* block = static_cast<PinBlock*>(ctx);
  if (C10_LIKELY(block->pool_ == nullptr && block->state() == BlockState::kInUse &&
                 captures_underway_.load(std::memory_order_relaxed) == 0)) {
    free_eager(block);
    return;
  }
  free_under_lock(block);  // its use fence may need a capturing stream: Note [Eager-use fences]
}

bool PinPoolHostAllocatorImpl::record_event(void* ptr, void* ctx, c10::Stream s) {
  if (C10_UNLIKELY(observer_ != nullptr)) {  // before ATen's event: Note [Completion probes]
    if (PinBlock* block = find_block(ptr)) {
      observer_->used_by_copy(block->ptr_, block->size_, Stream(Stream::UNCHECKED, s));
    }
  }
  if (C10_LIKELY(captures_underway_.load(std::memory_order_relaxed) == 0)) {
    if (Base::record_event(ptr, ctx, s)) {
      return true;
    }
    return record_eager_use(ptr, ctx, Stream(Stream::UNCHECKED, s));
  }
  const Stream stream(Stream::UNCHECKED, s);
  PinBlock* block = find_block(ptr);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (CapturedGraph* graph = capturing_graph_locked(stream)) {
      return record_captured_use(block, *graph);
    }
  }
  if (in_capture(stream)) {
    // Never put a capturing stream into streams_: an event recorded on it would be
    // captured too and "complete" at once. A capture we do not know of (begun before
    // activation, or by raw ACL) cannot be protected; say so once.
    TORCH_WARN_ONCE(
        "torch_npu_pinpool: a pinned tensor is used by a graph capture that was begun "
        "before torch_npu_pinpool was activated; its host memory is not protected. "
        "Import torch_npu_pinpool before capturing.");
    return false;
  }
  return Base::record_event(ptr, ctx, s) || record_eager_use(ptr, ctx, stream);
}

// An eager use of a pool block, of a captured default-pool block ATen no longer lists, or of
// a tensor some other allocator made.
bool PinPoolHostAllocatorImpl::record_eager_use(void* ptr, void* ctx, Stream stream) {
  PinBlock* block = find_block(ptr);
  if (block == nullptr) {
    // Pinned before activation: its deleter is native's, so is its bookkeeping.
    return native_->record_event(ptr, ctx, stream.unwrap());
  }
  std::lock_guard<std::mutex> guard(block->mutex_);
  block->streams_.insert(stream);
  return true;
}

// ---------------------------------------------------------------------------------------
// empty_cache / stats

void PinPoolHostAllocatorImpl::empty_cache() {
  // Deterministic: fence what died and wait for the fences (graphs whose replay stream is
  // capturing stay pending), so graph gone + host_empty_cache() gives the bytes back. A live
  // pool's free blocks stay its own (Note [Pool lifetime]).
  process_pending(/*wait=*/true);
  Base::empty_cache();
  give_back_idle_large(0);  // their DataPtrs die before native's empty_cache
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
  const auto& in_use_counts = PINPOOL_ATEN_DEFAULT_POOL_BUCKET_STATS(active_bucket_stats);
  c10::CachingAllocator::Stat& in_use_stat = stats.active_bytes;
#else
  const auto& in_use_counts = PINPOOL_ATEN_DEFAULT_POOL_BUCKET_STATS(allocation_bucket_stats);
  c10::CachingAllocator::Stat& in_use_stat = stats.allocated_bytes;
#endif
  for (size_t i = 0; i < in_use_counts.size() && i < 63; ++i) {
    in_use_bytes += in_use_counts[i].current * (int64_t{1} << i);
  }
  in_use_stat.current = in_use_bytes;
#endif
  own_stats_.add_to(stats);  // graph-pool and large blocks: Note [Stats of our own blocks]
  return stats;
}

void PinPoolHostAllocatorImpl::reset_accumulated_stats() {
  resetAccumulatedStats();
  own_stats_.reset_accumulated();
}

void PinPoolHostAllocatorImpl::reset_peak_stats() {
  resetPeakStats();
  own_stats_.reset_peak();
}

// ---------------------------------------------------------------------------------------
// The registered interface

namespace {

std::atomic<PinPoolHostAllocator*> g_allocator{nullptr};

// Runs `fn` with the GIL released if this thread holds it: event records go through
// torch_npu's task queue, whose thread may need the GIL.
template <typename Fn>
void without_gil(Fn&& fn) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS fn();
    Py_END_ALLOW_THREADS
  } else {
    fn();
  }
}

void pinpool_deleter(void* ctx) {
  auto& impl = g_allocator.load(std::memory_order_relaxed)->impl();
  without_gil([&] { impl.free(ctx); });  // like torch_npu's own deleter
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
  without_gil([&] { impl_->empty_cache(); });  // it may wait for fences
}

at::HostStats PinPoolHostAllocator::get_stats() { return impl_->stats(); }

void PinPoolHostAllocator::reset_accumulated_stats() { impl_->reset_accumulated_stats(); }

void PinPoolHostAllocator::reset_peak_stats() { impl_->reset_peak_stats(); }

#if PINPOOL_HAS_ATEN_HOST_POOLS
// torch_npu >= 2.11 calls these from NPUGraph::capture_begin / capture_end / reset.
void PinPoolHostAllocator::begin_allocate_to_pool(MempoolId pool_id, CaptureFilter filter) {
  impl_->begin_allocate_to_pool(pool_id, std::move(filter));
}

void PinPoolHostAllocator::end_allocate_to_pool(MempoolId pool_id) {
  impl_->end_allocate_to_pool(pool_id);
}

void PinPoolHostAllocator::release_pool(MempoolId pool_id) {
  without_gil([&] { impl_->release_pool(pool_id); });
}
#endif

namespace {
std::mutex& activation_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::atomic<bool> g_registered{false};

// Note [Forked children]: registered once, with the allocator.
void on_fork_child() {
  note_forked_child();
  if (PinPoolHostAllocator* ours = g_allocator.load()) {
    ours->impl().forget_captures();
  }
}

PinPoolHostAllocator* prepare_locked() {
  if (PinPoolHostAllocator* ours = g_allocator.load()) {
    return ours;
  }
  at::HostAllocator* native = at::getHostAllocator(at::kPrivateUse1);
  TORCH_CHECK(native != nullptr,
              "torch_npu_pinpool: torch_npu's host allocator is not registered; import "
              "torch_npu before activating torch_npu_pinpool.");
  auto* ours = new PinPoolHostAllocator(native);  // leaked on purpose
  g_allocator.store(ours);
  pthread_atfork(nullptr, nullptr, &on_fork_child);
  return ours;
}
}  // namespace

PinPoolHostAllocator* prepare() {
  std::lock_guard<std::mutex> lock(activation_mutex());
  return prepare_locked();
}

bool activate() {
  std::lock_guard<std::mutex> lock(activation_mutex());
  if (g_registered.load()) {
    return false;
  }
  PinPoolHostAllocator* ours = prepare_locked();
  configure_native_rounding();  // Note [Large blocks]: torch_npu pins large blocks unrounded
  // torch_npu registered with priority 0; 1 wins and keeps a later priority-0 registration
  // (a second torch_npu load) from silently replacing us.
  at::setHostAllocator(at::kPrivateUse1, ours, /*priority=*/1);
  g_registered.store(true);
  return true;
}

bool is_registered() { return g_registered.load(); }

PinPoolHostAllocator* active_allocator() { return g_allocator.load(); }

}  // namespace torch_npu_pinpool
