// The host_memory_stats() figures of the blocks ATen's Base never sees: graph-pool blocks and
// large blocks, which this allocator pins and gives back itself.
//
// Note [Stats of our own blocks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every key of host_memory_stats() means what it means natively, for every block the plugin
// holds (docs/usage.md): a block pinned here counts as ATen's add_allocated_block counts one
// (held and in use, num_host_alloc, one host_alloc_time sample), one handed out again or freed
// as ATen's free lists count it (in use), one given back as ATen's destroy path (held,
// num_host_free, one host_free_time sample). So the running totals (`.allocated`, `.freed`)
// and the current figures are exact; the peaks are added to Base's, as ATen adds its per-bucket
// peaks ("the best approximation we can get after the fact").
#pragma once

#include "runtime/version_shim.h"

#include <ATen/core/CachingHostAllocator.h>

#include <cstdint>
#include <mutex>

namespace torch_npu_pinpool {

class OwnBlockStats {
 public:
  void pinned(size_t bytes) { step(held_blocks_, held_bytes_, +1, bytes), handed_out(bytes); }
  void handed_out(size_t bytes) { step(used_blocks_, used_bytes_, +1, bytes); }
  void freed(size_t bytes) { step(used_blocks_, used_bytes_, -1, bytes); }
  void given_back(size_t bytes) { step(held_blocks_, held_bytes_, -1, bytes); }

  // Adds these figures to Base's (the field names differ before torch 2.10: version_shim.h).
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
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* stat : {&held_blocks_, &held_bytes_, &used_blocks_, &used_bytes_}) {
      stat->reset_accumulated();
    }
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* stat : {&held_blocks_, &held_bytes_, &used_blocks_, &used_bytes_}) {
      stat->reset_peak();
    }
  }

 private:
  using Stat = c10::CachingAllocator::Stat;

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
