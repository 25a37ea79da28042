// Note [Stats of our own blocks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Graph-pool and large blocks, which ATen's Base never sees, count in host_memory_stats() as
// ATen counts its own: pinned (held, in use, num_host_alloc, host_alloc_time), handed out or
// freed (in use), given back (held, num_host_free, host_free_time). Peaks add to Base's.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

#include "runtime/version_shim.h"

namespace torch_npu_pinpool {

class OwnBlockStats {
 public:
  void pinned(size_t bytes) { step(held_blocks_, held_bytes_, +1, bytes), handed_out(bytes); }
  void handed_out(size_t bytes) { step(used_blocks_, used_bytes_, +1, bytes); }
  void freed(size_t bytes) { step(used_blocks_, used_bytes_, -1, bytes); }
  void given_back(size_t bytes) { step(held_blocks_, held_bytes_, -1, bytes); }

  void add_to(at::HostStats& stats) const {
    std::lock_guard<std::mutex> lock(mutex_);
#if PINPOOL_HOST_STATS_2_10
    add(stats.allocations, held_blocks_);
    add(stats.allocated_bytes, held_bytes_);
    add(stats.active_requests, used_blocks_);
    add(stats.active_bytes, used_bytes_);
#else
    add(stats.segment, held_blocks_);
    add(stats.reserved_bytes, held_bytes_);
    add(stats.allocation, used_blocks_);
    add(stats.allocated_bytes, used_bytes_);
#endif
    stats.num_host_alloc += held_blocks_.allocated;
    stats.num_host_free += held_blocks_.freed;
  }

  void reset_accumulated() {
    each([](Stat& stat) { stat.reset_accumulated(); });
  }
  void reset_peak() {
    each([](Stat& stat) { stat.reset_peak(); });
  }

 private:
  using Stat = c10::CachingAllocator::Stat;

  template <typename Fn>
  void each(Fn fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Stat* stat : {&held_blocks_, &held_bytes_, &used_blocks_, &used_bytes_}) {
      fn(*stat);
    }
  }

  void step(Stat& blocks, Stat& bytes, int sign, size_t size) {
    const auto amount = static_cast<int64_t>(size);
    std::lock_guard<std::mutex> lock(mutex_);
    if (sign > 0) {
      blocks.increase(1);
      bytes.increase(amount);
    } else {
      blocks.decrease(1);
      bytes.decrease(amount);
    }
  }

  static void add(Stat& into, const Stat& ours) {
    into.current += ours.current;
    into.peak += ours.peak;
    into.allocated += ours.allocated;
    into.freed += ours.freed;
  }

  mutable std::mutex mutex_;
  Stat held_blocks_, held_bytes_, used_blocks_, used_bytes_;
};

}  // namespace torch_npu_pinpool
