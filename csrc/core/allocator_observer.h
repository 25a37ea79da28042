// AllocatorObserver: all the allocator tells the audit report (audit.h), and all it knows of it.
//
// Note [Audit hooks]
// ~~~~~~~~~~~~~~~~~~
// The report is enabled once, before the allocator is made (from TORCH_NPU_PINPOOL_REPORT at
// activation); the allocator keeps `AllocatorObserver* const observer_`, null when the report is
// off or compiled out (setup.py: TORCH_NPU_PINPOOL_AUDIT=0 builds without audit.cpp,
// audit_sites.cpp and completion_probe.cpp, and PINPOOL_AUDIT is 0). Off, the eager fast paths
// pay one load of that pointer where allocate / record_event already branch; every other call
// sits on a slow path and costs a null test there. Calls marked "locked" come under the
// allocator's mutex_ and take only the audit's own mutex (lock order: allocator, then audit);
// the others come with no lock of the allocator held, and may take the GIL.
#pragma once

#include "runtime/npu_runtime.h"
#include "runtime/version_shim.h"

#include <cstddef>
#include <cstdint>

#ifndef PINPOOL_AUDIT
#define PINPOOL_AUDIT 1
#endif

namespace torch_npu_pinpool {

class AllocatorObserver {
 public:
  virtual ~AllocatorObserver() = default;
  // A block handed out at `block` (its start).
  virtual void allocated(void* block) = 0;
  // An eager copy on `stream` uses `block`; before ATen records its event.
  virtual void used_by_copy(void* block, size_t block_size, const Stream& stream) = 0;
  // Locked: a captured copy of `graph` (capturing on `device`) uses `block`; `pool`: the graph
  // pool that owns the block, null for a default-pool block.
  virtual void used_by_capture(void* block, size_t block_size, const void* pool, uint64_t graph,
                               c10::DeviceIndex device) = 0;
  // Locked: the tensor of `block` died.
  virtual void freed(void* block, size_t block_size, bool pool_block) = 0;
  // Locked: a pool block became free after its graphs were done with it.
  virtual void pool_block_settled(void* block, size_t block_size) = 0;
  // Locked: `graph` starts (or resumes) capturing, or stops.
  virtual void graph_capturing(uint64_t graph, bool capturing) = 0;
  // Locked: `graph` died (reset, garbage collection, or a capture that ended without a graph).
  virtual void graph_died(uint64_t graph) = 0;
  // A capture into pool id `id` begins.
  virtual void capture_into(MempoolId id) = 0;
  // Locked: a capture into `pool` (id `id`), holding `blocks` blocks of `bytes`, failed at
  // capture_end and its graph is let go.
  virtual void capture_failed(const void* pool, MempoolId id, uint64_t blocks,
                              uint64_t bytes) = 0;
  // Locked: the last graph of `pool` died; its id is erased.
  virtual void pool_released(MempoolId id, const void* pool) = 0;
};

#if PINPOOL_AUDIT
AllocatorObserver* audit_observer();  // audit.cpp: null unless the report is on
#else
inline AllocatorObserver* audit_observer() { return nullptr; }
#endif

}  // namespace torch_npu_pinpool
