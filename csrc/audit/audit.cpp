// The audit's record (audit.h): per kind the hazards counted, per block and graph the facts they
// are judged from, and the checks of written_while_queued in flight.
#include "audit/audit.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <c10/util/flat_hash_map.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "audit/completion_probe.h"

namespace torch_npu_pinpool {

// ---------------------------------------------------------------------------------------
// Note [What written_while_queued sees]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A race the program has: it changed the bytes of a pinned block between the enqueue of an H2D
// copy or a replay that reads them and the moment the device had read them. At enqueue the
// audit takes a checksum of the bytes read (the copy's host tensor, or every H2D source of the
// graph); a completion probe (Note [Completion probes]) takes it again when the device is done
// and holds the stream until then, so the program's own event or synchronize after the work
// cannot let it rewrite the bytes before the second checksum. Different checksums: reported.
// No false positives is the rule, so a read is *not checked* (counted as unchecked) when
// something other than the host may legitimately change those bytes meanwhile:
//   * a device write into the block is queued or running (a D2H copy, a replay that writes it,
//     a use of unknown direction: Note [Copy direction]) - at enqueue, or enqueued before the
//     completion (the block's write epoch moved);
//   * the graph being replayed writes the block itself (vllm-ascend's KV offload: D2H into the
//     buffer, a host function edits it, H2D back);
//   * the process launched a host function on an NPU stream (torch_npu.npu._launch_host_func /
//     _launch_host_func_pending, seen by a Python hook): a host function writes host memory in
//     stream order, which may be exactly right; every read enqueued afterwards is unchecked;
//   * the runtime has no aclrtLaunchHostFunc, or a probe failed.
// D2H destinations are never checked: the device writing them is the point. A rewrite that
// leaves the bytes as they were is no change. What a checksum can miss: Note [Bounded checksums].

// Note [Bounded checksums]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A range of at most kFullChecksumBytes (1 MiB) is hashed whole: only a hash collision (about
// 2^-64) hides a change. A larger one is sampled: kSampleWindows windows of kSampleWindowBytes
// spread evenly from its first to its last byte (1 MiB per check however large the range), so
// a change confined to the bytes between windows is missed - e.g. in a 64 MiB buffer 1/64 of
// the bytes are looked at. The hash is a 4-lane multiply-xor over 8-byte words (a few GB/s).
namespace {
constexpr size_t kFullChecksumBytes = size_t{1} << 20;
constexpr size_t kSampleWindowBytes = 4096;
constexpr size_t kSampleWindows = kFullChecksumBytes / kSampleWindowBytes;

// Reads memory the device or another thread may be changing: that is what is being measured.
__attribute__((no_sanitize("thread"))) uint64_t hash_bytes(const uint8_t* p, size_t n,
                                                           uint64_t seed) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t lane[4] = {seed ^ 0x243F6A8885A308D3ull, seed ^ 0x13198A2E03707344ull,
                      seed ^ 0xA4093822299F31D0ull, seed ^ 0x082EFA98EC4E6C89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lane[k] = (lane[k] ^ w) * kMul;
      lane[k] ^= lane[k] >> 29;
    }
  }
  uint64_t h = n;
  for (int k = 0; k < 4; ++k) {
    h = (h ^ lane[k]) * kMul;
  }
  for (; i < n; ++i) {
    h = (h ^ p[i]) * kMul;
  }
  return h ^ (h >> 31);
}

uint64_t checksum(const uint8_t* p, size_t n) {
  if (n <= kFullChecksumBytes) {
    return hash_bytes(p, n, 0);
  }
  uint64_t h = n;
  const size_t last = n - kSampleWindowBytes;
  for (size_t w = 0; w < kSampleWindows; ++w) {
    const size_t offset = last * w / (kSampleWindows - 1);
    h = hash_bytes(p + offset, kSampleWindowBytes, h);
  }
  return h;
}

thread_local CopyScope::HostSide t_copy;

std::atomic<Audit*> g_audit{nullptr};

// Shapes of each kind; the report's `affects` table keys on these names.
constexpr const char* kPinnedInCapture = "pinned inside the capture";
constexpr const char* kPinnedBeforeFreedInCapture = "pinned before the capture, freed inside it";
constexpr const char* kPinnedBeforeFreedAfter = "pinned before the capture, freed after it";
constexpr const char* kCaptureBlock = "a capture-time block a stream used";
constexpr const char* kFailedCapturePool = "the pool of a capture whose capture_end failed";
constexpr const char* kReleasedPool = "a pool id whose graphs were all released";
constexpr const char* kPageableCopy = "a pageable CPU tensor in a captured copy";
constexpr const char* kCopyRace = "an H2D copy";
constexpr const char* kReplayRace = "a replay";

}  // namespace

const char* hazard_name(Hazard kind) {
  switch (kind) {
    case Hazard::kRecycledByNative:
      return "recycled_by_native";
    case Hazard::kLeakedByNative:
      return "leaked_by_native";
    case Hazard::kReleasedPoolRecapture:
      return "released_pool_recapture";
    case Hazard::kPageableCopyInCapture:
      return "pageable_copy_in_capture";
    case Hazard::kWrittenWhileQueued:
      return "written_while_queued";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------
// The record
//
// Note [Bounded audit state]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A server runs for days: the record stays within a bound that does not grow with the number of
// copies, replays or pins, only with what is alive or with the program's code:
//   * per block: one BlockFacts (~64 B) while its tensor lives, or a check of it is in flight,
//     or a live graph's captured copy uses it. It is forgotten when its tensor dies
//     (tensor_freed) with none of that left, else when the last of it ends (finish_check): at
//     most the blocks the allocator hands out at once plus those still queued - a block is
//     reused only once its copies completed, so a forgotten block comes back as a new one. Only
//     a block whose probe failed stays (it counts as written for good: rare, and bounded by the
//     allocator's blocks);
//   * per graph: one GraphFacts while the graph lives (graph_died erases it);
//   * per kind: counts and at most kMaxSites sites; shapes are a fixed set;
//   * sites (audit_sites.cpp): one string per (file, line) that pinned, copied or replayed, and
//     one cached entry per code object met on the way: bounded by the program's code;
//   * released and failed pool ids: at most kMaxRememberedPools each (the oldest go first: a
//     capture into a pool id forgotten so is not counted, never counted wrongly);
//   * checks in flight: one per queued copy or replay (the runtime's own queue bounds them).
// audit_sizes() (the binding) shows each of these; test/pinpool/test_audit_server.py checks
// they stay flat over a long copy loop that keeps pinning new blocks.
constexpr size_t kMaxRememberedPools = 1024;

template <typename T>
void remember(std::vector<T>& list, const T& value) {
  if (list.size() >= kMaxRememberedPools) {
    list.erase(list.begin());
  }
  list.push_back(value);
}

namespace {
struct BlockFacts {
  SiteId alloc_site{kNoSite};
  uint32_t device_writes{0};    // queued copies / replays that write it and have not finished
  uint32_t reads_in_flight{0};  // checks of reads of it waiting for their copy / replay
  bool freed{false};            // its tensor died (Note [Bounded audit state])
  uint64_t write_epoch{0};      // device writes ever enqueued into it
  // Sampled mode only (Note [Sampled device writes]):
  uint64_t settled_epoch{0};     // device writes up to this epoch are known to have run
  std::vector<Stream> writers;   // streams that wrote it since it was last settled
  std::vector<Event> settle;     // recorded on `writers` once a sampled read found it unsettled
  uint64_t settle_epoch{0};      // the write epoch `settle` covers
  bool stream_used{false};       // a pool block a stream used since it was last free
  const void* pool{nullptr};     // its graph pool, once a captured copy used it
  std::vector<uint64_t> graphs;  // graphs whose captured copies used it (some may be dead)
};

struct HostRange {
  const uint8_t* ptr;
  size_t len;
  void* block;
};

struct GraphFacts {
  c10::DeviceIndex device{-1};
  std::vector<HostRange> reads;    // H2D sources
  std::vector<void*> writes;       // blocks it writes (D2H, or a use of unknown direction)
  uint64_t unknown_reads{0};       // H2D sources whose bytes are unknown (not contiguous)
  std::vector<const void*> pools;  // graph pools of the pool blocks its captured copies used
};

struct Tally {
  uint64_t count{0};
  uint64_t bytes{0};
  std::vector<SiteId> sites;
  std::map<std::string, uint64_t> shapes;
};

}  // namespace

// One check of written_while_queued: a copy or replay in flight.
struct Audit::Check {
  struct Read {
    HostRange range;
    uint64_t sum;
    uint64_t write_epoch;  // of its block at enqueue
    SiteId alloc_site;
  };
  bool replay{false};
  SiteId site{kNoSite};  // where the copy / replay was enqueued
  std::vector<Read> reads;
  std::vector<void*> writes;  // blocks whose device_writes this work holds
};

struct Audit::State {
  ska::flat_hash_map<void*, BlockFacts> blocks;
  ska::flat_hash_map<uint64_t, GraphFacts> graphs;
  ska::flat_hash_map<uint64_t, bool> live_graphs;  // graphs not dead -> capturing
  // Note [Released pools]: graph pools a stream used a capture-time block of, and the released
  // ids of such pools (torch_npu >= 2.11 would still list them).
  ska::flat_hash_set<const void*> pools_with_used_blocks;
  std::vector<MempoolId> released_pools;
  // Note [Failed captures]: pools of failed captures (until released) and their ids (for good).
  ska::flat_hash_set<const void*> failed_pools;
  std::vector<MempoolId> failed_ids;
  Tally tallies[kHazardKinds];
  CheckCounts counts;
};

ReplayCheck::~ReplayCheck() {
  if (check_ != nullptr) {
    Audit::drop_check(check_);  // the replay raised: nothing was enqueued
  }
}

Audit::Audit(std::vector<std::string> library_dirs, std::string cwd, uint32_t sample)
    : state_(new State()),
      sites_(make_sites(std::move(library_dirs), std::move(cwd))),
      sample_(std::max<uint32_t>(sample, 1)) {}

void Audit::enable(std::vector<std::string> library_dirs, std::string cwd, uint32_t sample) {
  static std::once_flag once;
  std::call_once(once, [&] {
    // Leaked with the allocator.
    g_audit.store(new Audit(std::move(library_dirs), std::move(cwd), sample));
  });
}

// Note [Sampled checks]
// ~~~~~~~~~~~~~~~~~~~~~
// TORCH_NPU_PINPOOL_REPORT_SAMPLE=N compares one H2D copy or replay in N (a process-wide count:
// the 1st, the N+1st, ...); the others cost one atomic increment - no site, no checksum, no
// probe. Device writes are still tracked on every copy and replay (a sampled read must know
// whether a device write overlapped it), and every other kind is counted as without sampling.
// A race that happens on every step is reported within N steps of its first; one that happens
// on a fraction f of the steps, after about N / f steps.
bool Audit::sampled_out() {
  if (sample_ == 1) {
    return false;
  }
  if (sample_tick_.fetch_add(1, std::memory_order_relaxed) % sample_ == 0) {
    return false;
  }
  skipped_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Note [Sampled device writes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Without sampling, every device write into a block (a D2H copy, a replay that writes it) holds
// a completion probe, and the block counts as written until it ran. With sampling that would put
// a host function behind every D2H copy of a serving step, so a device write costs no runtime
// call: it moves the block's write epoch and names its stream (`writers`). A sampled read of a
// block whose writes are not known to have run asks the runtime instead, outside the lock, and
// before an H2D copy is enqueued (before_read, from the copy_ wrapper), so that its own stream
// is not busy with it yet:
//   * every writer stream idle (not capturing, nothing queued: aclrtStreamQuery): every write
//     enqueued so far ran - the usual bounce buffer, written, synchronized, edited, read back;
//   * else the events an earlier sampled read recorded on the writers complete: the writes up
//     to the epoch they cover ran;
//   * else it records such events (none on a capturing stream) for the next sampled read.
// The read is checked when every write into the block ran, and not checked otherwise (a write
// may be in flight). A read of a block no device wrote costs nothing more.
namespace {
void add_writer(BlockFacts& facts, const Stream& stream) {
  facts.write_epoch += 1;
  if (std::find(facts.writers.begin(), facts.writers.end(), stream) == facts.writers.end()) {
    facts.writers.push_back(stream);
  }
}

// Whether every one of `writers` has run all its work (false for a capturing stream).
bool streams_idle(const std::vector<Stream>& writers) {
  for (const Stream& stream : writers) {
    if (capture_info(stream).status != CaptureStatus::kNone) {
      return false;
    }
    try {
      if (!stream.query()) {
        return false;
      }
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

// One event on each of `writers`, or none when one is capturing or a record fails.
void record_settle(const std::vector<Stream>& writers, std::vector<Event>& events) {
  for (const Stream& stream : writers) {
    Event event =
        capture_info(stream).status == CaptureStatus::kNone ? try_record_on(stream) : nullptr;
    if (event == nullptr) {
      events.clear();
      return;
    }
    events.push_back(std::move(event));
  }
}
}  // namespace

// Before an H2D copy is enqueued (its stream is not yet busy with it): when it may be the next
// sampled read, its block's writes are settled now (Note [Sampled device writes]).
void Audit::before_read(void* block) {
  if (sample_ > 1 && sample_tick_.load(std::memory_order_relaxed) % sample_ == 0) {
    writes_settled(block);
  }
}

bool Audit::writes_settled(void* block) {
  std::vector<Event> events;
  std::vector<Stream> writers;
  uint64_t now = 0;
  uint64_t covered = 0;  // the epoch `events` cover
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = state_->blocks.find(block);
    if (it == state_->blocks.end() || it->second.write_epoch == it->second.settled_epoch) {
      return true;
    }
    BlockFacts& facts = it->second;
    now = facts.write_epoch;
    covered = facts.settle_epoch;
    events = std::exchange(facts.settle, {});
    writers = facts.writers;
  }
  uint64_t ran = 0;  // device writes up to this epoch ran
  if (streams_idle(writers)) {
    ran = now;
  } else if (!events.empty() && events_done(events)) {
    ran = covered;
  }
  if (ran != now && events.empty()) {
    record_settle(writers, events);
    covered = now;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = state_->blocks.find(block);
  if (it == state_->blocks.end()) {
    return true;
  }
  BlockFacts& facts = it->second;
  facts.settled_epoch = std::max(facts.settled_epoch, ran);
  if (facts.settled_epoch == facts.write_epoch) {
    facts.writers.clear();
    facts.settle.clear();
  } else if (!events.empty() && facts.settle.empty()) {
    facts.settle = std::move(events);
    facts.settle_epoch = covered;
  }
  return facts.settled_epoch == facts.write_epoch;
}

Audit* Audit::get() { return g_audit.load(std::memory_order_relaxed); }

void Audit::add(Hazard kind, const char* shape, uint64_t bytes, std::initializer_list<SiteId> sites,
                uint64_t count) {
  Tally& tally = state_->tallies[static_cast<int>(kind)];
  tally.count += count;
  tally.bytes += bytes;
  tally.shapes[shape] += count;
  add_sites(kind, sites);
}

void Audit::add_sites(Hazard kind, const std::vector<SiteId>& sites) {
  auto& list = state_->tallies[static_cast<int>(kind)].sites;
  for (SiteId site : sites) {
    if (site != kNoSite && list.size() < kMaxSites &&
        std::find(list.begin(), list.end(), site) == list.end()) {
      list.push_back(site);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Copies: Note [Copy direction]

CopyScope::CopyScope(const at::Tensor& self, const at::Tensor& src) : saved_(t_copy) {
  const bool to_device = src.is_cpu() && !self.is_cpu();
  const bool to_host = self.is_cpu() && !src.is_cpu();
  HostSide side;
  if (to_device || to_host) {
    const at::Tensor& host = to_device ? src : self;
    side.ptr = static_cast<const uint8_t*>(host.data_ptr());
    side.len = host.is_contiguous() ? host.nbytes() : 0;
    side.to_device = to_device;
    Audit* audit = Audit::get();
    if (to_device && audit != nullptr && host.has_storage()) {
      audit->before_read(host.storage().data_ptr().get());
    }
  }
  t_copy = side;
}

CopyScope::~CopyScope() { t_copy = saved_; }

at::Tensor& Audit::observe_copy(at::Tensor& self, const at::Tensor& src,
                                c10::function_ref<at::Tensor&()> copy) {
  CopyScope scope(self, src);
  return copy();
}

namespace {
// The copy this thread is running, if its host bytes lie in `block`.
CopyScope::HostSide copy_in(void* block, size_t block_size) {
  const CopyScope::HostSide side = t_copy;
  const auto* base = static_cast<const uint8_t*>(block);
  if (side.ptr == nullptr || side.ptr < base || side.ptr >= base + block_size ||
      side.len > static_cast<size_t>(base + block_size - side.ptr)) {
    return {};
  }
  return side;
}
}  // namespace

void Audit::allocated(void* block) {
  const SiteId site = site_here();
  std::lock_guard<std::mutex> lock(mutex_);
  BlockFacts& facts = state_->blocks[block];
  facts.alloc_site = site;
  facts.freed = false;
}

void Audit::tensor_freed(void* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = state_->blocks.find(block);
  if (it != state_->blocks.end()) {
    it->second.freed = true;
    forget_if_idle(block);
  }
}

// Note [Bounded audit state]: drops the block's record once nothing in it is needed any more.
void Audit::forget_if_idle(void* block) {
  auto it = state_->blocks.find(block);
  if (it == state_->blocks.end()) {
    return;
  }
  BlockFacts& facts = it->second;
  if (!facts.freed || facts.device_writes > 0 || facts.reads_in_flight > 0 || facts.stream_used ||
      facts.pool != nullptr) {
    return;
  }
  auto& users = facts.graphs;
  users.erase(std::remove_if(users.begin(), users.end(),
                             [&](uint64_t graph) { return state_->live_graphs.count(graph) == 0; }),
              users.end());
  if (users.empty()) {
    state_->blocks.erase(it);
  }
}

void Audit::used_by_copy(void* block, size_t block_size, const Stream& stream) {
  const CopyScope::HostSide side = copy_in(block, block_size);
  if (side.ptr == nullptr || !side.to_device) {
    device_write(block, stream);
    return;
  }
  if (sampled_out()) {
    return;
  }
  const bool settled = sample_ == 1 || writes_settled(block);
  uint64_t epoch = 0;
  SiteId alloc_site = kNoSite;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    BlockFacts& facts = state_->blocks[block];
    if (side.len == 0 || !settled || facts.device_writes > 0 || host_functions_.load() ||
        !probes_available()) {
      state_->counts.unchecked += 1;
      return;
    }
    epoch = facts.write_epoch;
    alloc_site = facts.alloc_site;
    facts.reads_in_flight += 1;
  }
  auto check = std::make_unique<Check>();
  const HostRange range{side.ptr, side.len, block};
  check->reads.push_back({range, checksum(range.ptr, range.len), epoch, alloc_site});
  check->site = site_here();
  in_flight_.fetch_add(1);
  if (launch_probe(stream, &Audit::finish_check, check.get())) {
    check.release();
  } else {
    finish_check(check.release(), /*completed=*/false);
  }
}

// A device write (D2H, or unknown direction): tracked until it ran, never checked itself. With
// sampling: Note [Sampled device writes].
void Audit::device_write(void* block, const Stream& stream) {
  if (sample_ > 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    add_writer(state_->blocks[block], stream);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    BlockFacts& facts = state_->blocks[block];
    facts.device_writes += 1;
    facts.write_epoch += 1;
  }
  auto check = std::make_unique<Check>();
  check->writes.push_back(block);
  in_flight_.fetch_add(1);
  if (launch_probe(stream, &Audit::finish_check, check.get())) {
    check.release();
  } else {
    finish_check(check.release(), /*completed=*/false);  // the block stays written for good
  }
}

void Audit::used_by_capture(void* block, size_t block_size, const void* pool, uint64_t graph,
                            c10::DeviceIndex device) {
  const CopyScope::HostSide side = copy_in(block, block_size);
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint64_t>& users = state_->blocks[block].graphs;
  if (std::find(users.begin(), users.end(), graph) == users.end()) {
    users.push_back(graph);
  }
  GraphFacts& facts = state_->graphs[graph];
  if (pool != nullptr) {
    BlockFacts& used = state_->blocks[block];
    used.stream_used = true;
    used.pool = pool;
    state_->pools_with_used_blocks.insert(pool);
    if (std::find(facts.pools.begin(), facts.pools.end(), pool) == facts.pools.end()) {
      facts.pools.push_back(pool);
    }
  }
  facts.device = device;
  if (side.ptr != nullptr && side.to_device) {
    if (side.len == 0) {
      facts.unknown_reads += 1;
    } else {
      facts.reads.push_back({side.ptr, side.len, block});
    }
    return;
  }
  if (std::find(facts.writes.begin(), facts.writes.end(), block) == facts.writes.end()) {
    facts.writes.push_back(block);
  }
}

// ---------------------------------------------------------------------------------------
// Hazards the plugin prevented

void Audit::freed(void* block, size_t block_size, bool pool_block) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto facts = state_->blocks.find(block);
  if (facts == state_->blocks.end()) {
    return;  // no captured copy used it
  }
  std::vector<uint64_t>& users = facts->second.graphs;
  bool graph_lives = false;
  bool graph_capturing = false;
  users.erase(std::remove_if(users.begin(), users.end(),
                             [&](uint64_t graph) {
                               auto it = state_->live_graphs.find(graph);
                               if (it == state_->live_graphs.end()) {
                                 return true;  // dead: forgotten
                               }
                               graph_lives = true;
                               graph_capturing |= it->second;
                               return false;
                             }),
              users.end());
  if (!graph_lives) {
    return;
  }
  const char* shape = pool_block        ? kPinnedInCapture
                      : graph_capturing ? kPinnedBeforeFreedInCapture
                                        : kPinnedBeforeFreedAfter;
  add(Hazard::kRecycledByNative, shape, block_size, {facts->second.alloc_site});
}

void Audit::pool_block_settled(void* block, size_t block_size) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = state_->blocks.find(block);
  if (it == state_->blocks.end()) {
    return;
  }
  BlockFacts& facts = it->second;
  if (facts.stream_used) {
    facts.stream_used = false;
    if (state_->failed_pools.count(facts.pool) == 0) {  // else: counted with its failed capture
      add(Hazard::kLeakedByNative, kCaptureBlock, block_size, {facts.alloc_site});
    }
  }
}

// Note [Failed captures]
// ~~~~~~~~~~~~~~~~~~~~~~
// torch_npu >= 2.11 hands a capture's pool to ATen's host private pools at capture_begin
// (begin_allocate_to_pool: the pool id's use count goes up) and gives the use back only in
// NPUGraph::reset after a *successful* capture_end. So when capture_end fails (the runtime
// refused the model: a stream never joined back, an invalidated capture), reset and the graph's
// death release nothing: the pool id stays listed with a use for good, and every block in it -
// used by a stream or not, pinned by the failed capture or by a later capture into the same id -
// stays pinned until the process exits; a later capture into that id works (measured on 2.14:
// docs/problem.md, "A capture that fails"). The plugin lets the failed graph go and gives the
// pool back. Counted when the plugin lets the graph go (graph_end_failed, before the graph's
// death releases anything): the blocks and bytes the pool held then, once; a block of that pool
// a stream used is not counted again when it settles, and the pool's release is no
// released_pool_recapture (natively it is never released, so a capture into its id works), nor
// is any later release of that id. A capture that raised inside `with torch.npu.graph` but
// whose capture_end succeeded (e.g. an illegal synchronize, refused with 107027 while the
// capture goes on) is an ordinary capture: its blocks are the other shapes'.
void Audit::capture_failed(const void* pool, MempoolId id, uint64_t blocks, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  State& state = *state_;
  std::vector<SiteId> sites;
  state.failed_pools.insert(pool);
  for (auto& [block, facts] : state.blocks) {
    if (facts.pool == pool) {
      facts.stream_used = false;  // counted below, with its pool
      sites.push_back(facts.alloc_site);
    }
  }
  if (id != MempoolId{0, 0} &&
      std::find(state.failed_ids.begin(), state.failed_ids.end(), id) == state.failed_ids.end()) {
    remember(state.failed_ids, id);
  }
  if (blocks == 0) {
    return;
  }
  add(Hazard::kLeakedByNative, kFailedCapturePool, bytes, {}, blocks);
  std::sort(sites.begin(), sites.end());
  add_sites(Hazard::kLeakedByNative, sites);
}

// Note [Released pools]
// ~~~~~~~~~~~~~~~~~~~~~~
// torch_npu >= 2.11 (ATen's host private pools) fails a capture into a pool id it still lists
// with use count 0 (create_or_incref_pool_under_lock: INTERNAL ASSERT use_count > 0). Its
// release_pool leaves the pool listed, and its empty_cache (torch.npu.graph runs one on entry)
// erases a released pool only once the pool holds no block - while a capture-time block a stream
// used never leaves it (leaked_by_native). So a capture into a released id is counted when that
// pool had such a block: then torch_npu alone fails it whatever ran in between (measured:
// docs/problem.md, defect 2). A released pool without one is not counted (torch_npu alone
// asserts there too only if no empty_cache ran between, e.g. capture_begin called directly:
// not reported). A released id is forgotten once captured into again: a new pool.
void Audit::pool_released(MempoolId id, const void* pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  State& state = *state_;
  std::vector<void*> left;
  for (auto& [block, facts] : state.blocks) {
    if (facts.pool == pool) {
      facts.pool = nullptr;  // the pool goes; its address may be a new pool's next
      left.push_back(block);
    }
  }
  for (void* block : left) {
    forget_if_idle(block);
  }
  const bool failed = state.failed_pools.erase(pool) > 0 ||
                      std::find(state.failed_ids.begin(), state.failed_ids.end(), id) !=
                          state.failed_ids.end();  // Note [Failed captures]: never released
  if (state.pools_with_used_blocks.erase(pool) > 0 && id != MempoolId{0, 0} && !failed) {
    remember(state.released_pools, id);
  }
}

void Audit::capture_into(MempoolId id) {
  const SiteId site = site_here();
  std::lock_guard<std::mutex> lock(mutex_);
  auto& released = state_->released_pools;
  auto it = std::find(released.begin(), released.end(), id);
  if (it != released.end()) {
    released.erase(it);
    add(Hazard::kReleasedPoolRecapture, kReleasedPool, 0, {site});
  }
}

void Audit::graph_capturing(uint64_t graph, bool capturing) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_->live_graphs[graph] = capturing;
}

void Audit::graph_died(uint64_t graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_->graphs.erase(graph);
  state_->live_graphs.erase(graph);
}

void Audit::note_pageable_copy(size_t bytes) {
  const SiteId site = site_here();
  std::lock_guard<std::mutex> lock(mutex_);
  add(Hazard::kPageableCopyInCapture, kPageableCopy, bytes, {site});
}

void Audit::note_host_function() { host_functions_.store(true); }

// ---------------------------------------------------------------------------------------
// Replays

std::unique_ptr<ReplayCheck> Audit::replay_begin(uint64_t graph) {
  std::vector<void*> read_blocks;
  c10::DeviceIndex device = -1;
  bool skip = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = state_->graphs.find(graph);
    if (it == state_->graphs.end()) {
      return nullptr;  // no pinned memory in this graph
    }
    device = it->second.device;
    skip = sampled_out();
    if (skip && it->second.writes.empty()) {
      return nullptr;  // left out, and nothing to note
    }
    if (!skip && sample_ > 1) {
      for (const HostRange& range : it->second.reads) {
        read_blocks.push_back(range.block);
      }
    }
  }
  // NPUGraph::replay runs on the current stream of the capture device (Note [Replay fences]).
  const Stream stream = current_stream(device);
  std::vector<void*> unsettled;  // Note [Sampled device writes]: asked outside the lock
  for (void* block : read_blocks) {
    if (!writes_settled(block)) {
      unsettled.push_back(block);
    }
  }
  auto check = std::make_unique<Check>();
  check->replay = true;
  if (!enqueue_replay(graph, skip, stream, unsettled, *check)) {
    return nullptr;
  }
  for (Check::Read& read : check->reads) {
    read.sum = checksum(read.range.ptr, read.range.len);
  }
  if (!check->reads.empty()) {
    check->site = site_here();
  }
  in_flight_.fetch_add(1);
  return std::make_unique<ReplayCheck>(check.release(), stream);
}

// The reads `check` compares and the writes it holds (false: nothing to wait for). mutex_ taken.
bool Audit::enqueue_replay(uint64_t graph, bool skip, const Stream& stream,
                           const std::vector<void*>& unsettled, Check& check) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = state_->graphs.find(graph);
  if (it == state_->graphs.end()) {
    return false;
  }
  const GraphFacts& facts = it->second;
  if (!skip) {
    state_->counts.unchecked += facts.unknown_reads;
  }
  for (const HostRange& range : facts.reads) {
    if (skip) {
      break;
    }
    const bool written_by_graph =
        std::find(facts.writes.begin(), facts.writes.end(), range.block) != facts.writes.end();
    const bool settled =
        std::find(unsettled.begin(), unsettled.end(), range.block) == unsettled.end();
    BlockFacts& block = state_->blocks[range.block];
    if (written_by_graph || !settled || block.device_writes > 0 || host_functions_.load() ||
        !probes_available()) {
      state_->counts.unchecked += 1;
      continue;
    }
    block.reads_in_flight += 1;
    check.reads.push_back({range, 0, block.write_epoch, block.alloc_site});
  }
  for (void* block : facts.writes) {
    BlockFacts& written = state_->blocks[block];
    if (sample_ > 1) {
      add_writer(written, stream);  // Note [Sampled device writes]
    } else {
      written.device_writes += 1;
      written.write_epoch += 1;
      check.writes.push_back(block);
    }
  }
  return !check.reads.empty() || !check.writes.empty();
}

void Audit::replay_end(std::unique_ptr<ReplayCheck> replay) {
  if (replay == nullptr) {
    return;
  }
  void* check = replay->release();
  if (!launch_probe(replay->stream(), &Audit::finish_check, check)) {
    finish_check(check, /*completed=*/false);
  }
}

// ---------------------------------------------------------------------------------------
// Completion (a runtime thread): Note [What written_while_queued sees]

// completed == false: the probe failed, the work may still run or be running: its reads are
// unchecked and the blocks it writes stay "being written" for good (their reads are never checked
// again), since nothing tells when it ends.
void Audit::finish_check(void* arg, bool completed) {
  std::unique_ptr<Check> check(static_cast<Check*>(arg));
  Audit* audit = get();
  if (!completed) {
    check->writes.clear();
  }
  const bool look = completed && !audit->closing_.load();
  std::vector<uint64_t> sums;
  if (look) {
    for (const Check::Read& read : check->reads) {
      sums.push_back(checksum(read.range.ptr, read.range.len));
    }
  }
  {
    std::lock_guard<std::mutex> lock(audit->mutex_);
    State& state = *audit->state_;
    bool compared = false;
    for (size_t i = 0; i < check->reads.size(); ++i) {
      const Check::Read& read = check->reads[i];
      BlockFacts& block = state.blocks[read.range.block];  // kept while the read is in flight
      block.reads_in_flight -= 1;
      if (!look || block.write_epoch != read.write_epoch) {
        state.counts.unchecked += 1;
        continue;
      }
      compared = true;
      if (sums[i] != read.sum) {
        audit->add(Hazard::kWrittenWhileQueued, check->replay ? kReplayRace : kCopyRace,
                   read.range.len, {check->site, read.alloc_site});
      }
    }
    if (compared) {
      (check->replay ? state.counts.replays : state.counts.copies) += 1;
    }
    for (void* block : check->writes) {
      BlockFacts& written = state.blocks[block];
      if (written.device_writes > 0) {
        written.device_writes -= 1;
      }
    }
    for (const Check::Read& read : check->reads) {
      audit->forget_if_idle(read.range.block);
    }
    for (void* block : check->writes) {
      audit->forget_if_idle(block);
    }
  }
  audit->in_flight_.fetch_sub(1);
}

// The work of `arg` was never enqueued (the replay raised before it).
void Audit::drop_check(void* arg) {
  auto* check = static_cast<Check*>(arg);
  Audit* audit = get();
  {
    std::lock_guard<std::mutex> lock(audit->mutex_);
    for (const Check::Read& read : check->reads) {
      audit->state_->blocks[read.range.block].reads_in_flight -= 1;
      audit->forget_if_idle(read.range.block);
    }
  }
  check->reads.clear();  // nothing was read: neither checked nor unchecked
  finish_check(check, /*completed=*/true);
}

// ---------------------------------------------------------------------------------------
// The report

std::vector<HazardTally> Audit::tallies(double wait_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(wait_s * 1e6));
  while (in_flight_.load() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<HazardTally> out;
  std::vector<std::vector<SiteId>> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int k = 0; k < kHazardKinds; ++k) {
      const Tally& tally = state_->tallies[k];
      HazardTally t;
      t.kind = static_cast<Hazard>(k);
      t.count = tally.count;
      t.bytes = tally.bytes;
      t.shapes.assign(tally.shapes.begin(), tally.shapes.end());
      out.push_back(std::move(t));
      ids.push_back(tally.sites);
    }
  }
  for (size_t k = 0; k < out.size(); ++k) {
    out[k].sites = site_names(ids[k]);
  }
  return out;
}

AuditSizes Audit::sizes() {
  AuditSizes out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out.blocks = state_->blocks.size();
    out.graphs = state_->graphs.size();
    out.remembered_pools = state_->released_pools.size() + state_->failed_ids.size();
  }
  out.in_flight = in_flight_.load();
  std::tie(out.sites, out.code_objects) = site_sizes();
  return out;
}

CheckCounts Audit::check_counts() {
  std::lock_guard<std::mutex> lock(mutex_);
  CheckCounts counts = state_->counts;
  counts.pending = in_flight_.load();
  counts.skipped = skipped_.load();
  return counts;
}

}  // namespace torch_npu_pinpool
