// The one place that knows how torch / torch_npu differ between 2.8 and 2.15.
//
// Everything is detected from the headers of the torch and torch_npu the extension is
// built against (no configure step): torch's version macros for ATen's host-allocator
// API, `__has_include` for where the torch_npu wheel keeps the ACL headers.
#pragma once

#include <torch/version.h>

#include <utility>

#define PINPOOL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if !PINPOOL_TORCH_AT_LEAST(2, 8)
#error "torch_npu_pinpool needs torch >= 2.8 (ATen's host allocator registry)."
#endif

// 2.11 gave CachingHostAllocatorImpl private pools, which changed its surface:
//   * process_events() -> process_events(BlockPool&),
//   * get_current_stream() / stream_is_capturing() became virtual hooks,
//   * at::HostAllocator grew begin_allocate_to_pool / end_allocate_to_pool /
//     release_pool, which torch_npu >= 2.11 calls from NPUGraph.
// We use none of ATen's pools (see Note [Why our own pools] in pin_pool_allocator.h); the
// macro only decides which virtuals we override.
#define PINPOOL_HAS_ATEN_HOST_POOLS PINPOOL_TORCH_AT_LEAST(2, 11)

// 2.14 changed ATen's host allocator again, in ways that need no macro here (read in the
// torch 2.14.0 wheel, ATen/core/CachingHostAllocator.h; docs/matrix.md has the lines):
//   * process_events(BlockPool&) -> process_events(BlockPool&, const shared_ptr<GatheredContext>&)
//     (the memory-history context): we override neither it nor
//     process_events_for_specific_size;
//   * HostBlock::allocated_ became std::atomic<bool>: our plain `= true` / `if (allocated_)` on
//     our own graph-pool and large blocks are seq_cst stores and loads, under our locks as before;
//   * at::HostAllocator grew record_history / get_segments / get_traces /
//     record_external_(un)register with no-op defaults. torch_npu 2.14 has no host
//     memory-history API (only CUDA wires it to Python), so nothing calls them on PrivateUse1
//     and we keep the defaults.
// torch_npu 2.14.0's own headers (host allocator, NPUGraph, graph utils) are identical to 2.13.0's.

// torch_npu >= 2.14's NPUGraph::capture_begin refuses a capture itself when its expandable host
// allocator is in use, i.e. when pin_memory_expandable_segments is on *in effect* (torch_npu
// turns it off on a CANN or driver without the feature). Older releases capture regardless, and
// keep that decision where the plugin cannot read it (NPUAllocatorConfig is not exported), so
// the plugin refuses on the variable's text there.
#define PINPOOL_NPU_REFUSES_EXPANDABLE_CAPTURE PINPOOL_TORCH_AT_LEAST(2, 14)

// 2.15 (torch 2.15.0; no torch_npu 2.15 yet: ci/lib/compile_check.sh builds every unit against
// torch 2.15.0's headers with torch_npu 2.14.0's; read in the torch 2.15.0 wheel,
// ATen/core/CachingHostAllocator.h, against 2.14.0's; docs/matrix.md has the lines):
//   * Per-pool stats: the four per-bucket stats (active_bucket_stats, active_bytes_bucket_stats,
//     allocation_bucket_stats, allocated_bytes_bucket_stats) moved from HostStatsStaged
//     (`stats_`) into each BlockPool, guarded by that pool's free_list_[i].mutex_; getStats()
//     adds up every pool's. PINPOOL_ATEN_DEFAULT_POOL_BUCKET_STATS(name) names the default
//     pool's on every release (`default_pool_.name` from 2.15, `stats_.name` before): the only
//     reader, stats() rebuilding the in-use bytes, compiles on 2.8 / 2.9 only.
//     stats_.allocations / allocated_bytes stay, now under the new stats_.allocations_mutex_;
//     stats_.timing_mutex_ and host_alloc_time / host_free_time (which we add to) are unchanged.
//   * Locks: getStats() / reset_*() take instance_mutex_ (shared) and each pool's bucket mutex
//     in turn (no longer blocks_mutex_); a block given back to the system takes blocks_mutex_
//     before the bucket mutex (releasing it last); empty_cache() erasing a private pool holds
//     that pool's bucket mutex together with default_pool_'s; stats_.allocations_mutex_ is
//     innermost. Our hooks that ATen calls under those locks (free_block under blocks_mutex_ +
//     a bucket mutex, as on 2.14) take only our map_mutex_ / timing_mutex_ and never call back
//     into ATen; we call Base::getStats() / Base::empty_cache() holding none of our locks. So
//     no new lock order for us: nothing to shim, noted here.
//   * Retire on a failed record: Base::free() catches an exception from record_stream() (ours
//     records a fence on the stream) and leaves the block's event_count_ raised - the block is
//     never reused or given back (a TORCH_WARN_ONCE) - where up to 2.14 the exception left
//     free() and, from ~StorageImpl (noexcept), terminated the process. Only default-pool
//     blocks go through Base::free(); graph-pool and large blocks are ours.
//     PINPOOL_ATEN_RETIRES_ON_FAILED_RECORD says which of the two a build has.
//   * begin_allocate_to_pool / end_allocate_to_pool / release_pool / record_history: same
//     signatures (parameter names commented out only).
#define PINPOOL_ATEN_POOL_BUCKET_STATS PINPOOL_TORCH_AT_LEAST(2, 15)
#if PINPOOL_ATEN_POOL_BUCKET_STATS
#define PINPOOL_ATEN_DEFAULT_POOL_BUCKET_STATS(name) (default_pool_.name)
#else
#define PINPOOL_ATEN_DEFAULT_POOL_BUCKET_STATS(name) (stats_.name)
#endif
#define PINPOOL_ATEN_RETIRES_ON_FAILED_RECORD PINPOOL_TORCH_AT_LEAST(2, 15)

// HostStats field names: 2.10 has allocations / allocated_bytes (held) and
// active_requests / active_bytes (in use); 2.8 and 2.9 have segment / reserved_bytes (held)
// and allocation / allocated_bytes (in use).
#define PINPOOL_HOST_STATS_2_10 PINPOOL_TORCH_AT_LEAST(2, 10)

// ATen 2.8 - 2.12 miscount the in-use bytes (2.8/2.9 `allocated_bytes`, 2.10 `active_bytes`):
// process_events_for_specific_size(-1) - how process_events() and empty_cache() hand back a
// block whose events completed - calls `<in-use bytes>_bucket_stats[index].decrease(size)`
// with size == -1, so each such block stays counted as size_ + 1 bytes in use for good. The
// per-bucket block counts are right on 2.8 / 2.9, so the in-use bytes are rebuilt from them
// there. On 2.10 - 2.12 the bucket counts carry the same miscount, so nothing here can rebuild
// the figure: it stays ATen's, as with torch_npu alone. 2.13 and 2.14 decrease by
// block->size_ (maybe_cache_block).
#define PINPOOL_ATEN_IN_USE_BYTES_MISCOUNTED !PINPOOL_TORCH_AT_LEAST(2, 10)

// torch_npu moved the ACL headers inside its wheel: include/acl/ (2.10.0.post6 - 2.14; also
// still under third_party/ there) versus only include/third_party/acl/inc/acl/ (2.8.x, 2.9.x,
// whose acl_rt.h is C++ only, and 2.10.0 - 2.10.0.post4: a move inside the 2.10 line, read in
// the wheels, docs/matrix.md "Builds inside a line"). setup.py puts both roots that exist on
// the include path, include/ first, as the root of <acl/...>; this check turns a
// wrong build environment into a readable error instead of a cascade.
#if !__has_include(<acl/acl.h>)
#error "ACL headers not found: build against an installed torch_npu (pip install --no-build-isolation .)."
#endif

namespace torch_npu_pinpool {
// A graph memory pool id, as torch_npu's NPUGraph makes them. Spelled out because
// c10::MempoolId_t (the same std::pair) only moved into c10 in torch 2.9, and
// c10::MempoolIdHash in 2.10.
using MempoolId = std::pair<unsigned long long, unsigned long long>;
}  // namespace torch_npu_pinpool
