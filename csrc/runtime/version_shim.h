// The one place that knows how torch / torch_npu 2.8 - 2.15 differ, detected from the headers
// built against. Changes that need no macro: docs/matrix.md.
#pragma once

#include <torch/version.h>

#include <utility>

#define PINPOOL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if !PINPOOL_TORCH_AT_LEAST(2, 8)
#error "torch_npu_pinpool needs torch >= 2.8 (ATen's host allocator registry)."
#endif

// 2.11: get_current_stream / stream_is_capturing are virtual, and at::HostAllocator has
// begin_allocate_to_pool / end_allocate_to_pool / release_pool (Note [Why our own pools]).
#define PINPOOL_HAS_ATEN_HOST_POOLS PINPOOL_TORCH_AT_LEAST(2, 11)

// 2.13: c10's allocator config has pinned_max_round_threshold / pinned_max_cached_size, which
// let torch_npu pin a large request exactly (Note [Exact backing store]).
#define PINPOOL_HAS_PINNED_LIMITS PINPOOL_TORCH_AT_LEAST(2, 13)

// torch_npu >= 2.14 refuses a capture itself while pin_memory_expandable_segments is in effect.
#define PINPOOL_NPU_REFUSES_EXPANDABLE_CAPTURE PINPOOL_TORCH_AT_LEAST(2, 14)

// 2.15: the per-bucket stats moved from stats_ into each BlockPool, and Base::free() retires a
// block whose record_stream threw instead of letting the exception out.
#if PINPOOL_TORCH_AT_LEAST(2, 15)
#define PINPOOL_ATEN_DEFAULT_POOL_BUCKET_STATS(name) (default_pool_.name)
#else
#define PINPOOL_ATEN_DEFAULT_POOL_BUCKET_STATS(name) (stats_.name)
#endif
#define PINPOOL_ATEN_RETIRES_ON_FAILED_RECORD PINPOOL_TORCH_AT_LEAST(2, 15)

// ATen's free list has no call that unpins one block (Note [Emptied while graphs held it]):
// 2.13+ Base::free unpins a block above the virtual pinned_max_cached_size() instead of caching
// it; 2.10 keeps its free lists and block set in fields (Note [Private fields]) emptied as
// Base::empty_cache does. Before 2.10 (other stats) and in 2.11 / 2.12: no way, it stays cached.
#define PINPOOL_ATEN_FREE_UNPINS_ABOVE_CACHED_SIZE PINPOOL_TORCH_AT_LEAST(2, 13)
#define PINPOOL_ATEN_FLAT_FREE_LISTS \
  (PINPOOL_TORCH_AT_LEAST(2, 10) && !PINPOOL_TORCH_AT_LEAST(2, 11))

// HostStats fields: held / in use are allocations, allocated_bytes / active_requests,
// active_bytes from 2.10; segment, reserved_bytes / allocation, allocated_bytes before.
#define PINPOOL_HOST_STATS_2_10 PINPOOL_TORCH_AT_LEAST(2, 10)

// ATen 2.8 - 2.12 count a block handed back by process_events_for_specific_size(-1) as size_ + 1
// bytes in use for good; 2.8 / 2.9's bucket counts are right, so stats() rebuilds from them.
#define PINPOOL_ATEN_IN_USE_BYTES_MISCOUNTED !PINPOOL_TORCH_AT_LEAST(2, 10)

// setup.py puts torch_npu's ACL include roots on the path (include/ or third_party/acl/inc/).
#if !__has_include(<acl/acl.h>)
#error \
    "ACL headers not found: build against an installed torch_npu (pip install --no-build-isolation .)."
#endif

namespace torch_npu_pinpool {
// c10::MempoolId_t only moved into c10 in torch 2.9.
using MempoolId = std::pair<unsigned long long, unsigned long long>;
}  // namespace torch_npu_pinpool
