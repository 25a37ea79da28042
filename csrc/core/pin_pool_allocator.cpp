// The eager allocator (Note [Fast path]), its ATen hooks, and its registration.
#include "core/pin_pool_allocator.h"

#include <Python.h>
#include <pthread.h>

#include <atomic>

#include "core/large_blocks.h"
#include "runtime/fork_gate.h"

namespace torch_npu_pinpool {

// Note [Backing store]
// ~~~~~~~~~~~~~~~~~~~~
// Pinned bytes come from torch_npu's host allocator (native_): its copy kernels record a
// non_blocking copy's event, and is_pinned() says true, only for pointers it handed out. A block
// holds native's DataPtr (destroyed outside our locks); empty_cache() ends with native's.

namespace {
std::atomic<AllocatorObserver*> g_observer{nullptr};  // Note [Observer hooks]
}  // namespace

void set_allocator_observer(AllocatorObserver* observer) {
  g_observer.store(observer, std::memory_order_relaxed);
}

PinPoolHostAllocatorImpl::PinPoolHostAllocatorImpl(at::HostAllocator* native)
    : native_(native),
      large_threshold_(large_block_threshold()),
      large_(new LargeBlocks(&own_stats_)),
      observer_(g_observer.load(std::memory_order_relaxed)),
      graphs_(observer_) {}

namespace {
thread_local void* t_unbound = nullptr;  // pinned by allocate_host_memory, not yet bound
}  // namespace

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_eager(size_t size) {
  // Settle what waits on its copies first, as ATen processes its events before it searches.
  if (C10_UNLIKELY(fences_.pending())) {
    process_pending();
  }
  if (C10_UNLIKELY(size > large_threshold_) && pins_exact_now()) {
    return allocate_large(size);
  }
  auto out = Base::allocate(size);
  // Not out.first: the pin's Base::allocate threw after allocate_host_memory.
  if (C10_UNLIKELY(t_unbound != nullptr) && std::exchange(t_unbound, nullptr) == out.first) {
    blocks_.bind(out.first, static_cast<PinBlock*>(out.second));  // Note [Block map]
  }
  if (out.second != nullptr) {
    static_cast<PinBlock*>(out.second)->set_state(BlockState::kInUse);  // Note [Block states]
  }
  return out;
}

// Note [Large blocks]
std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate_large(size_t size) {
  const LargeBlocks::Take take = large_->take(round_large(size));
  if (take.hit != nullptr) {
    return {take.hit->ptr_, take.hit};
  }
  if (take.give_back != nullptr) {
    c10::DataPtr released = take_raw(take.give_back->ptr_);  // unpinned before the next pin
    delete take.give_back;
  }
  give_back_idle_large(large_cache_limit());
  auto block = std::make_unique<PinBlock>(take.pin_size, /*pool=*/nullptr, /*large=*/true);
  try {
    block->ptr_ = allocate_raw(take.pin_size, block.get());
  } catch (const c10::Error&) {
    give_back_idle_large(0);
    native_->empty_cache();
    block->ptr_ = allocate_raw(take.pin_size, block.get());
  }
  large_->add(block.get());
  return {block->ptr_, block.release()};
}

void PinPoolHostAllocatorImpl::give_back_idle_large(size_t keep_bytes) {
  std::vector<c10::DataPtr> released;  // destroyed after the loop, no lock of ours held
  for (PinBlock* idle : large_->take_idle(keep_bytes)) {
    released.push_back(take_raw(idle->ptr_));
    delete idle;
  }
}

// A large block with copies in flight waits as kAwaitingCopies (settle_eager_freed), so that
// LargeBlocks holds only blocks it may hand out and never asks the runtime under its lock.
void PinPoolHostAllocatorImpl::free_eager(PinBlock* block) {
  if (!block->large_) {
    block->set_state(BlockState::kFree);
    Base::free(block);
    return;
  }
  UseFence fence(block);
  if (fence.empty()) {
    block->set_state(BlockState::kFree);
    large_->put(block);
    return;
  }
  fences_.add_awaiting(block, std::move(fence));
}

void* PinPoolHostAllocatorImpl::allocate_raw(size_t size, PinBlock* block) {
  const auto start = std::chrono::steady_clock::now();
  c10::DataPtr data = native_->allocate(size);
  void* ptr = data.get();
  TORCH_CHECK(ptr != nullptr, "torch_npu's host allocator returned no memory for ", size,
              " bytes of pinned memory.");
  blocks_.insert(std::move(data), size, block);
  add_host_time(stats_.host_alloc_time, start);
  return ptr;
}

c10::DataPtr PinPoolHostAllocatorImpl::take_raw(void* ptr) {
  const auto start = std::chrono::steady_clock::now();
  c10::DataPtr data = blocks_.take(ptr);
  if (C10_UNLIKELY(forked_child())) {
    (void)data.release_context();  // Note [Forked children]: leaked, never freed here
  }
  add_host_time(stats_.host_free_time, start);
  return data;
}

void PinPoolHostAllocatorImpl::allocate_host_memory(size_t size, void** ptr) {
  *ptr = allocate_raw(size, /*block=*/nullptr);
  t_unbound = *ptr;
}

void PinPoolHostAllocatorImpl::free_block(PinBlock* block) { take_raw(block->ptr_); }

// Pins and unpins are timed as torch_npu times its own (Note [Stats of our own blocks]).
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
    return;
  }
  events->push_back(record_on(stream));
}

bool PinPoolHostAllocatorImpl::query_event(Event& event) { return event_done(event); }

#if PINPOOL_HAS_ATEN_HOST_POOLS
Stream PinPoolHostAllocatorImpl::get_current_stream() const { return current_stream(); }

bool PinPoolHostAllocatorImpl::stream_is_capturing(Stream stream) const {
  return stream_capturing(stream);
}
#endif

std::pair<void*, void*> PinPoolHostAllocatorImpl::allocate(size_t size) {
  auto out = C10_LIKELY(!graphs_.capture_underway()) ? allocate_eager(size)
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
  if (C10_UNLIKELY(observer_ != nullptr)) {  // before another thread may get the block
    observer_->tensor_freed(block->ptr_);
  }
  if (C10_LIKELY(block->pool_ == nullptr && block->state() == BlockState::kInUse &&
                 !graphs_.capture_underway())) {
    free_eager(block);
    return;
  }
  free_under_lock(block);
}

bool PinPoolHostAllocatorImpl::record_event(void* ptr, void* ctx, c10::Stream stream) {
  if (C10_UNLIKELY(observer_ != nullptr)) {  // before ATen's event: Note [Completion probes]
    PinBlock* block = blocks_.find(ptr);
    if (block != nullptr && !stream_capturing(stream)) {  // captured: replays are checked
      observer_->used_by_copy(block->ptr_, block->size_, stream);
    }
  }
  if (C10_LIKELY(!graphs_.capture_underway())) {
    return Base::record_event(ptr, ctx, stream) || record_eager_use(ptr, ctx, stream);
  }
  PinBlock* block = blocks_.find(ptr);
  {
    std::lock_guard<std::mutex> lock(graphs_.mutex());
    if (CapturedGraph* graph = graphs_.capturing_on(stream)) {
      return record_captured_use(block, *graph);
    }
  }
  if (stream_capturing(stream)) {  // a capture we do not know: never into streams_
    TORCH_WARN_ONCE(
        "torch_npu_pinpool: a pinned tensor is used by a graph capture that was begun "
        "before torch_npu_pinpool was activated; its host memory is not protected. "
        "Import torch_npu_pinpool before capturing.");
    return false;
  }
  return Base::record_event(ptr, ctx, stream) || record_eager_use(ptr, ctx, stream);
}

// An eager use of a block Base does not list (a pool, large or captured block) or not ours.
bool PinPoolHostAllocatorImpl::record_eager_use(void* ptr, void* ctx, Stream stream) {
  PinBlock* block = blocks_.find(ptr);
  if (block == nullptr) {
    return native_->record_event(ptr, ctx, stream);
  }
  std::lock_guard<std::mutex> guard(block->mutex_);
  block->streams_.insert(stream);
  return true;
}

UseFence::UseFence(PinBlock* block) {
  {
    std::lock_guard<std::mutex> guard(block->mutex_);
    unfenced_.assign(block->streams_.begin(), block->streams_.end());
    block->streams_.clear();
  }
  record();
}

bool UseFence::record() {
  if (!unfenced_.empty() && !runtime_up()) {
    unfenced_.clear();  // exiting: nothing is in flight any more
  }
  std::vector<Stream> still;
  for (const Stream& stream : unfenced_) {
    Event event = stream_capturing(stream) ? nullptr : try_record_on(stream);
    if (event == nullptr) {
      still.push_back(stream);
    } else {
      events_.push_back(std::move(event));
    }
  }
  unfenced_.swap(still);
  return unfenced_.empty();
}

void PinPoolHostAllocatorImpl::empty_cache() {
  process_pending(/*own_pass=*/true);
  mark_graph_held_emptied();  // what torch_npu's own empty_cache would unpin
  Base::empty_cache();
  give_back_idle_large(0);  // their DataPtrs die before native's empty_cache
  if (!forked_child()) {    // Note [Forked children]
    native_->empty_cache();
  }
}

at::HostStats PinPoolHostAllocatorImpl::stats() {
  if (fences_.pending()) {
    process_pending();
  }
  at::HostStats stats = Base::getStats();
#if PINPOOL_ATEN_IN_USE_BYTES_MISCOUNTED
  // Rebuilt from the per-bucket counts (bucket i holds blocks of 2^i bytes), read unlocked.
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
  own_stats_.add_to(stats);
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

// In the lock order (Note [Lock order]), each tried for kForkWait (Note [Fork gate]); the fork
// then goes on with the rest untaken, as it would without these handlers.
std::array<std::mutex*, 5> PinPoolHostAllocatorImpl::fork_locks() {
  return {&process_mutex_, &graphs_.mutex(), &fences_.mutex(), &blocks_.mutex(), &large_->mutex()};
}

void PinPoolHostAllocatorImpl::lock_for_fork() {
  fork_locked_ = 0;
  for (std::mutex* lock : fork_locks()) {
    if (!poll_until([lock] { return lock->try_lock(); },
                    std::chrono::steady_clock::now() + kForkWait)) {
      return;
    }
    fork_locked_++;
  }
}

// A child forked while another thread's pass held process_mutex_ past the bound has that mutex
// locked by a thread it lacks: it runs no pass from then on (process_pending only tries the lock),
// rather than hang in host_empty_cache(). Its runtime is down, so a pass would give nothing back
// that the child needs; what waits for a pass stays pinned, as the inherited graphs do.
void PinPoolHostAllocatorImpl::unlock_in_forked_child() {
  passes_orphaned_.store(fork_locked_ == 0, std::memory_order_relaxed);
  unlock_after_fork();
}

void PinPoolHostAllocatorImpl::unlock_after_fork() {
  const auto locks = fork_locks();
  while (fork_locked_ > 0) {
    locks[--fork_locked_]->unlock();
  }
}

namespace {
std::atomic<PinPoolHostAllocator*> g_allocator{nullptr};

// Event records go through torch_npu's task queue, whose thread may need the GIL. A Pass either
// way (Note [Fork gate]).
template <typename Fn>
void without_gil(Fn&& fn) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    Py_BEGIN_ALLOW_THREADS {
      ForkGate::Pass pass;
      fn();
    }
    Py_END_ALLOW_THREADS
  } else {
    ForkGate::Pass pass;
    fn();
  }
}

void pinpool_deleter(void* ctx) {
  auto& impl = g_allocator.load(std::memory_order_relaxed)->impl();
  without_gil([&] { impl.free(ctx); });
}

std::mutex& activation_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::atomic<bool> g_registered{false};

// Note [Forked children]: a fork happens with no thread in a Pass (Note [Fork gate]) and none of
// our locks held by another thread.
void on_fork_prepare() {
  if (PinPoolHostAllocator* ours = g_allocator.load()) {
    ForkGate::close(kForkWait);
    ours->impl().lock_for_fork();
  }
}

void on_fork_parent() {
  if (PinPoolHostAllocator* ours = g_allocator.load()) {
    ours->impl().unlock_after_fork();
    ForkGate::open();
  }
}

void on_fork_child() {
  note_forked_child();
  if (PinPoolHostAllocator* ours = g_allocator.load()) {
    ours->impl().unlock_in_forked_child();
    ours->impl().forget_captures();
    ForkGate::open_in_child();
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
  ForkGate::start();
  auto* ours = new PinPoolHostAllocator(native);  // leaked on purpose
  g_allocator.store(ours);
  pthread_atfork(&on_fork_prepare, &on_fork_parent, &on_fork_child);
  return ours;
}
}  // namespace

at::DataPtr PinPoolHostAllocator::allocate(size_t size) {
  ForkGate::Pass pass;
  auto [ptr, ctx] = impl_->allocate(size);
  return {ptr, ctx, &pinpool_deleter, at::DeviceType::CPU};
}

void PinPoolHostAllocator::empty_cache() {
  without_gil([&] { impl_->empty_cache(); });
}

#if PINPOOL_HAS_ATEN_HOST_POOLS
void PinPoolHostAllocator::release_pool(MempoolId pool_id) {
  without_gil([&] { impl_->release_pool(pool_id); });
}
#endif

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
  // Priority 1 beats torch_npu's 0, also a later one (a second torch_npu load).
  at::setHostAllocator(at::kPrivateUse1, ours, /*priority=*/1);
  g_registered.store(true);
  return true;
}

bool is_registered() { return g_registered.load(); }

PinPoolHostAllocator* active_allocator() { return g_allocator.load(); }

}  // namespace torch_npu_pinpool
