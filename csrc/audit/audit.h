// The audit report (TORCH_NPU_PINPOOL_REPORT): what the plugin saw that torch_npu's own allocator
// would have got wrong, and host writes that raced a queued copy or replay, with the lines of
// the user's code. This header is what the report's binding calls; audit.cpp owns the record,
// audit_sites.cpp the Python stack (sites), completion_probe.h the runtime mechanism that checks
// a copy at its completion.
//
// The allocator and the copy kernel wrapper reach it through AllocatorObserver and CopyObserver
// only (Note [Observer hooks], core/allocator_observer.h), which the binding installs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "copy/copy_observer.h"
#include "core/allocator_observer.h"
#include "runtime/npu_runtime.h"
#include "runtime/version_shim.h"

namespace at {
class Tensor;
}

namespace torch_npu_pinpool {

using SiteId = uint32_t;
constexpr SiteId kNoSite = 0;

// The hazard kinds of the report, in its order.
enum class Hazard : int {
  kRecycledByNative = 0,
  kLeakedByNative,
  kReleasedPoolRecapture,
  kPageableCopyInCapture,
  kWrittenWhileQueued,
};
constexpr int kHazardKinds = 5;
const char* hazard_name(Hazard kind);

// Note [Copy direction]
// ~~~~~~~~~~~~~~~~~~~~~
// record_event tells the allocator a block and a stream, not what the copy does with it. With
// the report on, the copy_ kernel wrapper (pageable_copy_guard.cpp) runs torch_npu's kernel in
// observe_copy, which opens a CopyScope around it: it notes, for this thread, the host side of
// the copy - which bytes (contiguous host tensors only) and whether the device reads them (H2D)
// or writes them (D2H).
// A record_event inside the scope whose block holds those bytes knows its copy; any other use
// (no scope: torch < 2.10, another copy path, a non-contiguous view) is taken as a device write
// of the whole block, which is never checked and makes checks of the block's reads wait.
class CopyScope {
 public:
  CopyScope(const at::Tensor& self, const at::Tensor& src);
  ~CopyScope();
  CopyScope(const CopyScope&) = delete;
  CopyScope& operator=(const CopyScope&) = delete;

  struct HostSide {
    const uint8_t* ptr{nullptr};  // null: no copy_ in progress on this thread
    size_t len{0};                // 0: the bytes are unknown (not contiguous)
    bool to_device{false};
  };

 private:
  HostSide saved_;
};

struct HazardTally {
  Hazard kind;
  uint64_t count{0};
  uint64_t bytes{0};
  std::vector<std::string> sites;  // the user's frames, deduplicated, at most kMaxSites
  std::vector<std::pair<std::string, uint64_t>> shapes;  // shape -> count (affects)
};

// How much of written_while_queued could be checked.
struct CheckCounts {
  uint64_t copies{0};     // H2D copies whose bytes were compared at completion
  uint64_t replays{0};    // replays whose pinned inputs were compared at completion
  uint64_t unchecked{0};  // H2D reads that could not be (Note [What written_while_queued sees])
  uint64_t pending{0};    // checks still waiting for their copy / replay
  uint64_t skipped{0};    // H2D copies and replays left out by sampling (Note [Sampled checks])
};

// The size of the audit's own record (Note [Bounded audit state]): what audit_sizes() shows.
struct AuditSizes {
  uint64_t blocks{0};            // per-block records
  uint64_t graphs{0};            // per-graph records (captured reads and writes)
  uint64_t sites{0};             // interned (file, line) sites
  uint64_t code_objects{0};      // code objects whose file is cached
  uint64_t remembered_pools{0};  // released and failed pool ids remembered
  uint64_t in_flight{0};         // checks waiting for their copy / replay
};

// A replay's check between Audit::replay_begin and replay_end; dropped without replay_end (the
// replay raised), it is undone.
class ReplayCheck {
 public:
  ReplayCheck(void* check, Stream stream) : check_(check), stream_(stream) {}
  ~ReplayCheck();
  ReplayCheck(const ReplayCheck&) = delete;
  ReplayCheck& operator=(const ReplayCheck&) = delete;
  void* release() { return std::exchange(check_, nullptr); }
  const Stream& stream() const { return stream_; }

 private:
  void* check_;
  Stream stream_;
};

class Audit final : public AllocatorObserver, public CopyObserver {
 public:
  static constexpr size_t kMaxSites = 10;

  // Turns the report on (once; before activate()). Frames of files under `library_dirs`
  // (torch, torch_npu, this package) are not the user's; sites under `cwd` are shown relative.
  // `sample`: compare one H2D copy / replay in `sample` (Note [Sampled checks]); 1: every one.
  static void enable(std::vector<std::string> library_dirs, std::string cwd, uint32_t sample);
  static Audit* get();  // null unless enabled

  // --- sites (audit_sites.cpp): the innermost frame of the calling thread outside the
  // library dirs. Takes the GIL: never call it while holding a lock.
  SiteId site_here();

  // --- AllocatorObserver (Note [Observer hooks]): what the allocator tells the report.
  void allocated(void* block) override;
  void tensor_freed(void* block) override;  // Note [Bounded audit state]
  void used_by_copy(void* block, size_t block_size, const Stream& stream) override;
  void used_by_capture(void* block, size_t block_size, const void* pool, uint64_t graph,
                       c10::DeviceIndex device) override;
  // recycled_by_native when a graph that uses the block lives.
  void freed(void* block, size_t block_size, bool pool_block) override;
  void pool_block_settled(void* block, size_t block_size) override;  // leaked_by_native
  void graph_capturing(uint64_t graph, bool capturing) override;
  void graph_died(uint64_t graph) override;
  void capture_into(MempoolId id) override;  // released_pool_recapture (Note [Released pools])
  // leaked_by_native: Note [Failed captures].
  void capture_failed(const void* pool, MempoolId id, uint64_t blocks, uint64_t bytes) override;
  void pool_released(MempoolId id, const void* pool) override;  // Note [Released pools]

  // --- CopyObserver: what the copy kernel wrapper tells the report.
  at::Tensor& observe_copy(at::Tensor& self, const at::Tensor& src,
                           c10::function_ref<at::Tensor&()> copy) override;  // in a CopyScope
  void note_pageable_copy(size_t bytes) override;
  void before_read(void* block);  // an H2D copy from `block` is about to be enqueued (CopyScope)

  // --- the hooks on NPUGraph
  void note_host_function();

  // --- replays (the NPUGraph.replay hook): begin before torch_npu's replay (GIL held), end
  // after it (GIL released); a ReplayCheck dropped without end() undoes begin().
  std::unique_ptr<ReplayCheck> replay_begin(uint64_t graph);
  void replay_end(std::unique_ptr<ReplayCheck> check);

  // --- the report: every kind, in order. wait: give queued checks up to `wait_s` seconds.
  std::vector<HazardTally> tallies(double wait_s);
  CheckCounts check_counts();
  AuditSizes sizes();
  // No check reads host memory after this (the process is exiting).
  void close() { closing_.store(true); }

  // Internal: a completion probe finished (a ProbeFn, completion_probe.h), or a check whose
  // work never ran is dropped.
  static void finish_check(void* check, bool completed);
  static void drop_check(void* check);

  struct State;  // audit.cpp
  struct Sites;  // audit_sites.cpp

 private:
  Audit(std::vector<std::string> library_dirs, std::string cwd, uint32_t sample);
  static Sites* make_sites(std::vector<std::string> library_dirs, std::string cwd);
  std::pair<uint64_t, uint64_t> site_sizes();  // (sites, code objects); GIL taken
  struct Check;                                // audit.cpp
  bool sampled_out();                          // Note [Sampled checks]
  void device_write(void* block, const Stream& stream);
  bool writes_settled(void* block);  // Note [Sampled device writes]; no lock held
  bool enqueue_replay(uint64_t graph, bool skip, const Stream& stream,
                      const std::vector<void*>& unsettled, Check& check);
  void forget_if_idle(void* block);  // mutex_ held; Note [Bounded audit state]
  void add(Hazard kind, const char* shape, uint64_t bytes, std::initializer_list<SiteId> sites,
           uint64_t count = 1);
  void add_sites(Hazard kind, const std::vector<SiteId>& sites);
  std::vector<std::string> site_names(const std::vector<SiteId>& ids);

  // Leaked with the audit (host functions may run while the process exits).
  State* const state_;  // guarded by mutex_
  Sites* const sites_;  // guarded by the GIL
  std::mutex mutex_;
  std::atomic<bool> host_functions_{false};
  std::atomic<bool> closing_{false};
  std::atomic<uint64_t> in_flight_{0};
  const uint32_t sample_;
  std::atomic<uint64_t> sample_tick_{0};
  std::atomic<uint64_t> skipped_{0};  // left out by sampling
};

}  // namespace torch_npu_pinpool
