// Device memory, pinned/registered host memory, the allocation registry, memcpy and memset.
//
// Device memory lives on the host heap (the simulated device shares the address space), so ops
// dereference device pointers directly. Every allocation is registered with a process-unique id so
// that a task can tell "the memory I was given is gone" (freed) from "it is still the same
// allocation" -- see Note [Range checks] in state.h.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <set>

#include "device_access.h"
#include "state.h"

namespace simcann {

// The sync-API capture rule. Source: hicann/runtime src/runtime/feature/aclgraph/
// context_aclgraph.cc (Context::IsCaptureModeSupport) and api_impl.cc (MemCopySync, MemSetSync
// call CHECK_CAPTURE_MODE_SUPPORT_AND_RETURN): with the thread's exchange mode RELAXED the call
// is allowed; with GLOBAL it is refused while a GLOBAL capture is active in the context or this
// thread began a THREAD_LOCAL one; with THREAD_LOCAL it is refused while this thread began a
// GLOBAL or THREAD_LOCAL capture.
// Implemented in capture.cpp, which owns the capture state.
aclError check_sync_mode_impl(const char* api);

namespace {

aclError check_sync_mode(const char* api) { return check_sync_mode_impl(api); }

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> live;  // by base address
  uint64_t next_id = 1;
  int64_t device_bytes = 0;
  int64_t host_bytes = 0;  // pinned (aclrtMallocHost*) only; registered memory is the user's
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked: see config()
  return *r;
}

// Note [Range checks] (state.h): the allocations that running tasks use, by id, one entry per
// use. Lock order: mu, then the registry's.
struct InUse {
  std::mutex mu;
  std::condition_variable cv;  // notified when a use ends
  std::multiset<uint64_t> ids;
};

InUse& in_use() {
  static InUse* u = new InUse();  // leaked: see config()
  return *u;
}

// The ids of every live allocation overlapping [p, p + n): each mapping of a reservation a range
// runs on through, and whatever a pageable range overlaps. Caller holds reg.mu.
void overlapping_locked(Registry& reg, uintptr_t p, size_t n, std::vector<uint64_t>* out) {
  const uintptr_t end = p + (n == 0 ? 1 : n);
  auto it = reg.live.upper_bound(p);
  if (it != reg.live.begin()) {
    auto prev = std::prev(it);
    if (prev->second.base + prev->second.size > p) it = prev;
  }
  for (; it != reg.live.end() && it->second.base < end; ++it) out->push_back(it->second.id);
}

// A free's half of Note [Range checks]: with the in-use mutex held by `gate`, waits until no
// running task uses the allocation based at `base` (if there is one). The caller takes it out of
// the registry before releasing `gate`, so no task can start using it in between.
void wait_unused(std::unique_lock<std::mutex>& gate, uintptr_t base) {
  InUse& u = in_use();
  Registry& reg = registry();
  u.cv.wait(gate, [&] {
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.live.find(base);
    return it == reg.live.end() || u.ids.count(it->second.id) == 0;
  });
}

// The allocation holding [p, p + n). A range may run on through adjacent mappings of one
// virtual-memory reservation (torch_npu's expandable blocks span segments); it then resolves to
// the first of them.
bool find_locked(Registry& reg, uintptr_t p, size_t n, Allocation* out) {
  auto it = reg.live.upper_bound(p);
  if (it == reg.live.begin()) return false;
  --it;
  const Allocation& a = it->second;
  const uintptr_t want = p + (n == 0 ? 1 : n);
  if (p < a.base) return false;
  uintptr_t end = a.base + a.size;
  for (auto next = std::next(it); want > end && a.reservation != 0 && next != reg.live.end() &&
                                  next->second.base == end &&
                                  next->second.reservation == a.reservation;
       ++next) {
    end = next->second.base + next->second.size;
  }
  if (want > end) return false;
  if (out) *out = a;
  return true;
}

uint64_t device_total_bytes() {
  // Ascend910B2 / 910_93xx: 64 GiB HBM per device (die).
  return 64ULL << 30;
}

// Allocates and registers `size` bytes of `kind`; nullptr if the host heap is exhausted, or, for
// device memory, with *full set if the device's memory would be exceeded. The check is made under
// the registry's lock, with the add: before, device_malloc read device_bytes without it, a data
// race with another thread's add (ThreadSanitizer, test/consumers/test_vllm_patterns.py sleep /
// wake on 2.10, plugin on and off), and two threads could both take the last bytes.
void* add(size_t size, MemKind kind, size_t align, bool* full = nullptr) {
  size_t rounded = ((size == 0 ? 1 : size) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) return nullptr;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  if (kind == MemKind::kDevice &&
      static_cast<uint64_t>(reg.device_bytes) + size > device_total_bytes()) {
    std::free(p);
    if (full != nullptr) *full = true;
    return nullptr;
  }
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.size = size == 0 ? 1 : size;
  a.kind = kind;
  a.id = reg.next_id++;
  a.device = device_or_default();
  reg.live[a.base] = a;
  (kind == MemKind::kDevice ? reg.device_bytes : reg.host_bytes) += static_cast<int64_t>(a.size);
  return p;
}

// Removes the allocation based at p (of one of `kinds`); false if there is none.
bool remove(void* p, MemKind kind, bool release) {
  Registry& reg = registry();
  {
    // No running task uses it, and none can start before it is gone (Note [Range checks]); a task
    // using other memory does not delay the free.
    std::unique_lock<std::mutex> gate(in_use().mu);
    wait_unused(gate, reinterpret_cast<uintptr_t>(p));
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.live.find(reinterpret_cast<uintptr_t>(p));
    if (it == reg.live.end() || it->second.kind != kind) return false;
    if (kind == MemKind::kDevice) reg.device_bytes -= static_cast<int64_t>(it->second.size);
    if (kind == MemKind::kPinned) reg.host_bytes -= static_cast<int64_t>(it->second.size);
    reg.live.erase(it);
  }
  if (release) std::free(p);
  return true;
}

constexpr size_t kDeviceAlign = 512;
// Pinned host memory comes in whole pages (the driver pins pages), and torch_npu registers what
// aclrtMallocHostWithCfg returned, which aclrtHostRegister* require to be 4 KiB aligned. The
// page is the kernel's: 4 KiB on x86-64, often 64 KiB on aarch64 (Kunpeng) kernels.
size_t host_align() {
  static const size_t align = std::max<size_t>(4096, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  return align;
}

aclError device_malloc(void** devPtr, size_t size, const char* api) {
  if (devPtr == nullptr || size == 0) {
    set_error("simcann: %s: null output pointer or zero size", api);
    return ACL_ERROR_INVALID_PARAM;
  }
  bool full = false;
  *devPtr = add(size, MemKind::kDevice, kDeviceAlign, &full);
  if (full) {
    set_error("simcann: %s: out of device memory (%zu bytes requested)", api, size);
    return ACL_ERROR_RT_MEMORY_ALLOCATION;
  }
  if (*devPtr == nullptr) {
    set_error("simcann: %s: host heap exhausted", api);
    return ACL_ERROR_RT_MEMORY_ALLOCATION;
  }
  log("%s(%zu) -> %p", api, size, *devPtr);
  return ACL_SUCCESS;
}

aclError host_malloc(void** hostPtr, size_t size, const char* api) {
  if (hostPtr == nullptr || size == 0) {
    set_error("simcann: %s: null output pointer or zero size", api);
    return ACL_ERROR_INVALID_PARAM;
  }
  Config& c = config();
  int64_t n = ++c.n_malloc_host;
  if (c.fail_malloc_host_at.load() > 0 && n == c.fail_malloc_host_at.load()) {
    set_error("simcann: %s: injected failure (SIMCANN_FAIL_MALLOC_HOST_AT=%lld)", api,
              static_cast<long long>(n));
    *hostPtr = nullptr;
    return ACL_ERROR_RT_MEMORY_ALLOCATION;
  }
  *hostPtr = add(size, MemKind::kPinned, host_align());
  if (*hostPtr == nullptr) {
    set_error("simcann: %s: host heap exhausted", api);
    return ACL_ERROR_RT_MEMORY_ALLOCATION;
  }
  log("%s(%zu) -> %p", api, size, *hostPtr);
  return ACL_SUCCESS;
}

bool host_side(const void* p, size_t n) { return !is_device_ptr(p, n); }

// Fills the implied directions of `kind` (DEFAULT: from the registry).
void directions(aclrtMemcpyKind kind, const void* dst, const void* src, size_t n, bool* dst_host,
                bool* src_host) {
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST: *dst_host = *src_host = true; break;
    case ACL_MEMCPY_HOST_TO_DEVICE: *dst_host = false; *src_host = true; break;
    case ACL_MEMCPY_DEVICE_TO_HOST: *dst_host = true; *src_host = false; break;
    case ACL_MEMCPY_DEVICE_TO_DEVICE: *dst_host = *src_host = false; break;
    default:
      *dst_host = host_side(dst, n);
      *src_host = host_side(src, n);
  }
}


aclError check_copy_args(void* dst, size_t destMax, const void* src, size_t count,
                         const char* api) {
  if ((dst == nullptr || src == nullptr) && count > 0) {
    set_error("simcann: %s: null pointer", api);
    return ACL_ERROR_INVALID_PARAM;
  }
  if (count > destMax) {
    set_error("simcann: %s: count %zu > destMax %zu", api, count, destMax);
    return ACL_ERROR_INVALID_PARAM;
  }
  return ACL_SUCCESS;
}

}  // namespace

bool find_allocation(const void* p, size_t n, Allocation* out) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return find_locked(reg, reinterpret_cast<uintptr_t>(p), n, out);
}

bool is_device_ptr(const void* p, size_t n) {
  Allocation a;
  return find_allocation(p, n, &a) && a.kind == MemKind::kDevice;
}

bool is_pinned_host_ptr(const void* p, size_t n) {
  Allocation a;
  return find_allocation(p, n, &a) && a.kind != MemKind::kDevice;
}

CheckedRange resolve_range(const MemRange& r) {
  CheckedRange c;
  c.range = r;
  Allocation a;
  if (r.size > 0 && find_allocation(r.ptr, r.size, &a)) c.alloc_id = a.id;
  return c;
}

namespace {
// Returns false (and reports a violation) if some range's memory is gone: the task must not run.
bool check_ranges(const char* what, const std::vector<CheckedRange>& ranges) {
  bool ok = true;
  for (const CheckedRange& c : ranges) {
    if (c.alloc_id == 0) continue;  // pageable host memory: nothing to check against
    Allocation a;
    bool live = find_allocation(c.range.ptr, c.range.size, &a);
    if (live && a.id == c.alloc_id) continue;
    violation("%s %s %s memory [%p, +%zu) that was freed since the task was %s%s", what,
              c.range.write ? "writes" : "reads", c.range.host ? "host" : "device", c.range.ptr,
              c.range.size, "enqueued/captured",
              live ? " (the address now belongs to another allocation; the task runs on it)"
                   : " (the task is not run)");
    if (!live) ok = false;
  }
  return ok;
}
}  // namespace

RangesInUse::RangesInUse(const char* what, const std::vector<CheckedRange>& ranges) {
  if (ranges.empty()) return;
  InUse& u = in_use();
  std::lock_guard<std::mutex> gate(u.mu);
  ok_ = check_ranges(what, ranges);
  if (!ok_) return;
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    for (const CheckedRange& c : ranges) {
      if (c.range.size > 0) {
        overlapping_locked(reg, reinterpret_cast<uintptr_t>(c.range.ptr), c.range.size, &ids_);
      }
    }
  }
  for (uint64_t id : ids_) u.ids.insert(id);
}

RangesInUse::~RangesInUse() {
  if (ids_.empty()) return;
  InUse& u = in_use();
  {
    std::lock_guard<std::mutex> gate(u.mu);
    for (uint64_t id : ids_) u.ids.erase(u.ids.find(id));
  }
  u.cv.notify_all();
}

aclError runtime_device_malloc(void** devPtr, size_t size, const char* api) {
  return device_malloc(devPtr, size, api);
}

void runtime_device_free(void* devPtr) { remove(devPtr, MemKind::kDevice, true); }

// Read under the registry's lock, like every other access to it (see add()).
// ---- virtual memory (vmm.cpp keeps reservations and physical handles; the registry holds the
// mapped ranges and counts the physical bytes) ----

bool vmm_account(bool device, int64_t delta) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  if (device && delta > 0 &&
      static_cast<uint64_t>(reg.device_bytes + delta) > device_total_bytes()) {
    return false;
  }
  (device ? reg.device_bytes : reg.host_bytes) += delta;
  return true;
}

void vmm_register_mapping(uintptr_t base, size_t size, bool device, int dev, uint64_t reservation) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  Allocation a;
  a.base = base;
  a.size = size;
  a.kind = device ? MemKind::kDevice : MemKind::kPinned;
  a.id = reg.next_id++;
  a.device = dev;
  a.reservation = reservation;
  reg.live[a.base] = a;
}

bool vmm_block_of(const void* p, uintptr_t* base, size_t* size, bool* listed) {
  Allocation a;
  if (!find_allocation(p, 1, &a)) return false;  // n = 1: the block itself, not its neighbours
  *base = a.base;
  *size = a.size;
  *listed = a.kind != MemKind::kRegistered;
  return true;
}

void vmm_unregister_mapping(uintptr_t base) {
  Registry& reg = registry();
  // Like a free: waits for a running task using this mapping only (Note [Range checks]).
  std::unique_lock<std::mutex> gate(in_use().mu);
  wait_unused(gate, base);
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.live.erase(base);
}

int64_t host_bytes_live() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.host_bytes;
}
int64_t device_bytes_live() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.device_bytes;
}

// Note [Sync copies]: aclrtMemcpy / aclrtMemset run on the calling thread right away. They are
// not ordered after queued stream work (torch_npu synchronizes the stream first itself).
aclError sync_copy(void* dst, const void* src, size_t n, bool dst_host, bool src_host,
                   const char* api) {
  std::vector<CheckedRange> ranges{resolve_range({src, n, false, src_host}),
                                   resolve_range({dst, n, true, dst_host})};
  RangesInUse use(api, ranges);  // Note [Range checks]
  if (!use.ok()) return ACL_ERROR_INVALID_PARAM;
  device_copy(dst, src, n);
  return ACL_SUCCESS;
}


}  // namespace simcann

using namespace simcann;

extern "C" {

// Source: hicann/runtime docs/zh/api_ref/11-01_device_memory_malloc_and_free.md.
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy) {
  SIMCANN_API();
  return device_malloc(devPtr, size, "aclrtMalloc");
}

ACL_FUNC_VISIBILITY aclError aclrtMallocAlign32(void** devPtr, size_t size,
                                                aclrtMemMallocPolicy) {
  SIMCANN_API();
  return device_malloc(devPtr, size, "aclrtMallocAlign32");
}

ACL_FUNC_VISIBILITY aclError aclrtMallocCached(void** devPtr, size_t size,
                                               aclrtMemMallocPolicy) {
  SIMCANN_API();
  return device_malloc(devPtr, size, "aclrtMallocCached");
}

ACL_FUNC_VISIBILITY aclError aclrtMallocWithCfg(void** devPtr, size_t size,
                                                aclrtMemMallocPolicy, aclrtMallocConfig*) {
  SIMCANN_API();
  return device_malloc(devPtr, size, "aclrtMallocWithCfg");
}

ACL_FUNC_VISIBILITY aclError aclrtFree(void* devPtr) {
  SIMCANN_API();
  if (devPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (!remove(devPtr, MemKind::kDevice, true)) {
    set_error("simcann: aclrtFree(%p): not the base of a live device allocation", devPtr);
    return ACL_ERROR_INVALID_PARAM;
  }
  return ACL_SUCCESS;
}

// Source: hicann/runtime docs/zh/api_ref/11-02_host_memory_management.md. No capture
// restriction (facts note; context_aclgraph.cc has no capture check on host allocation).
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void** hostPtr, size_t size) {
  SIMCANN_API();
  return host_malloc(hostPtr, size, "aclrtMallocHost");
}

ACL_FUNC_VISIBILITY aclError aclrtMallocHostWithCfg(void** ptr, uint64_t size,
                                                    aclrtMallocConfig*) {
  SIMCANN_API();
  return host_malloc(ptr, static_cast<size_t>(size), "aclrtMallocHostWithCfg");
}

// Same doc: "aclrtFreeHost frees the memory immediately; it does not synchronize the device or
// any stream and does not wait for tasks using the memory". Queued/captured tasks that still use
// it are caught by the range check (reported as violations); only a task running over it holds
// the free until it ends, and no other task does (Note [Range checks]).
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void* hostPtr) {
  SIMCANN_API();
  if (hostPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (!remove(hostPtr, MemKind::kPinned, true)) {
    set_error("simcann: aclrtFreeHost(%p): not the base of a live pinned allocation", hostPtr);
    return ACL_ERROR_INVALID_PARAM;
  }
  return ACL_SUCCESS;
}

// Same doc: aclrtFreeHostWithDevSync synchronizes the device, then frees.
ACL_FUNC_VISIBILITY aclError aclrtFreeHostWithDevSync(void* hostPtr) {
  SIMCANN_API();
  aclError e = sync_device(device_or_default(), -1);
  if (e != ACL_SUCCESS) return e;
  return aclrtFreeHost(hostPtr);
}

// Host registration. Sources: hicann/runtime docs/api_docs/aclrtHostRegister.md and
// aclrtHostRegisterV2.md ("Host内存地址需4K页对齐": ptr must be 4 KiB page aligned; memory from
// aclrtMallocHost may be registered, and on kernels > 5.10 malloc'ed pageable memory too),
// aclrtHostUnregister.md (pairs with aclrtHostRegister); the error codes are the runtime's
// (include/acl/error_codes/rt_error_codes.h): ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED 507910
// ("host memory range already registered"), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED 507911 ("host
// memory has not been registered"). What the docs leave open, modelled strictly and said here:
//   * a range overlapping a registration (or device memory, or straddling a pinned allocation)
//     is refused: 507910 for a registration, 100000 otherwise;
//   * aclrtHostUnregister does not wait for queued tasks (like aclrtFreeHost, 11-02 doc). A
//     queued or captured copy of malloc'ed memory that was unregistered meanwhile finds its
//     allocation gone at run time: a violation (Note [Range checks]), as after a free. Pinned
//     memory stays pinned when unregistered, so its copies are unaffected;
//   * aclrtFreeHost of registered pinned memory frees it (the registration goes with it).
namespace {
constexpr aclError kAlreadyRegistered = 507910;  // ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED
constexpr aclError kNotRegistered = 507911;      // ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
constexpr uintptr_t kHostPage = 4096;
}  // namespace

ACL_FUNC_VISIBILITY aclError aclrtHostRegister(void* ptr, uint64_t size, aclrtHostRegisterType,
                                               void** devPtr) {
  SIMCANN_API();
  if (ptr == nullptr || size == 0) return ACL_ERROR_INVALID_PARAM;
  const auto base = reinterpret_cast<uintptr_t>(ptr);
  if (base % kHostPage != 0) {
    set_error("simcann: aclrtHostRegister(%p): the address must be 4 KiB page aligned", ptr);
    return ACL_ERROR_INVALID_PARAM;
  }
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  // Overlap with any allocation or registration: the first one at or before the range end.
  auto it = reg.live.lower_bound(base + size);
  if (it != reg.live.begin()) {
    --it;
    Allocation& a = it->second;
    if (a.base + a.size > base) {
      const bool inside = base >= a.base && base + size <= a.base + a.size;
      if (a.kind == MemKind::kRegistered || (a.kind == MemKind::kPinned && a.registered)) {
        set_error("simcann: aclrtHostRegister(%p, %llu): range already registered", ptr,
                  static_cast<unsigned long long>(size));
        return kAlreadyRegistered;
      }
      if (a.kind == MemKind::kPinned && inside && base == a.base) {
        a.registered = true;  // pinned memory mapped for the device; still one allocation
        if (devPtr) *devPtr = ptr;
        return ACL_SUCCESS;
      }
      set_error("simcann: aclrtHostRegister(%p, %llu): overlaps %s memory it does not match",
                ptr, static_cast<unsigned long long>(size),
                a.kind == MemKind::kDevice ? "device" : "pinned");
      return ACL_ERROR_INVALID_PARAM;
    }
  }
  Allocation a;
  a.base = base;
  a.size = size;
  a.kind = MemKind::kRegistered;
  a.id = reg.next_id++;
  a.device = device_or_default();
  reg.live[a.base] = a;
  if (devPtr) *devPtr = ptr;  // one address space: the device address is the host address
  return ACL_SUCCESS;
}

// aclrtHostRegisterV2.md: flag ACL_HOST_REG_MAPPED (0x2) and / or ACL_HOST_REG_PINNED
// (0x10000000); same address rules as aclrtHostRegister.
ACL_FUNC_VISIBILITY aclError aclrtHostRegisterV2(void* ptr, uint64_t size, uint32_t) {
  SIMCANN_API();
  void* dev = nullptr;
  return aclrtHostRegister(ptr, size, ACL_HOST_REGISTER_MAPPED, &dev);
}

ACL_FUNC_VISIBILITY aclError aclrtHostUnregister(void* ptr) {
  SIMCANN_API();
  if (ptr == nullptr) return ACL_ERROR_INVALID_PARAM;
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.live.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != reg.live.end() && it->second.kind == MemKind::kPinned && it->second.registered) {
      it->second.registered = false;
      return ACL_SUCCESS;
    }
  }
  if (!remove(ptr, MemKind::kRegistered, false)) {
    set_error("simcann: aclrtHostUnregister(%p): not registered", ptr);
    return kNotRegistered;
  }
  return ACL_SUCCESS;
}

// The device address of registered host memory (vllm-ascend's UVA path reads pinned tensors
// through it from kernels). Source: cann/runtime docs/api_docs/aclrtHostGetDevicePointer.md
// (9.0.0; CANN 8.5 API reference aclcppdevg_03_2129): pHost is "the host memory address
// registered and mapped through aclrtHostRegister / aclrtHostRegisterV2", pDevice the device
// address it is mapped to, flag reserved and fixed at 0; the mapped address "cannot be used for
// memory operations, e.g. memory copies". What the docs leave open, modelled strictly and said
// here: pHost must be the address a registration began at (an interior pointer or memory that
// is pinned but not registered: 507911, ACL_ERROR_HOST_MEMORY_NOT_REGISTERED); flag != 0 or a
// null argument: 100000. One address space: the device address is the host address (as
// aclrtHostRegister's devPtr above), so a kernel reading it reads the host bytes as they are
// when it runs. The copy restriction is not checked.
ACL_FUNC_VISIBILITY aclError aclrtHostGetDevicePointer(void* pHost, void** pDevice,
                                                       uint32_t flag) {
  SIMCANN_API();
  if (pHost == nullptr || pDevice == nullptr || flag != 0) {
    set_error("simcann: aclrtHostGetDevicePointer(%p, %p, %u): null argument or flag != 0 "
              "(reserved, fixed at 0)",
              pHost, static_cast<void*>(pDevice), flag);
    return ACL_ERROR_INVALID_PARAM;
  }
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.live.find(reinterpret_cast<uintptr_t>(pHost));
  if (it == reg.live.end() ||
      !(it->second.kind == MemKind::kRegistered ||
        (it->second.kind == MemKind::kPinned && it->second.registered))) {
    set_error("simcann: aclrtHostGetDevicePointer(%p): not the start of a registered range "
              "(aclrtHostRegister / aclrtHostRegisterV2)",
              pHost);
    return kNotRegistered;
  }
  *pDevice = pHost;
  return ACL_SUCCESS;
}

// Source: hicann/runtime docs/zh/api_ref/11-05_unified_addressing.md (aclrtPointerGetAttributes:
// HOST for memory from aclrtMallocHost / registered, DEVICE for device memory, UNREGISTERED for
// other host memory). Interior pointers answer like their allocation.
ACL_FUNC_VISIBILITY aclError aclrtPointerGetAttributes(const void* ptr,
                                                       aclrtPtrAttributes* attributes) {
  SIMCANN_API();
  if (ptr == nullptr || attributes == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::memset(attributes, 0, sizeof(*attributes));
  Allocation a;
  attributes->pageSize = 4096;
  if (!find_allocation(ptr, 1, &a)) {
    attributes->location.type = ACL_MEM_LOCATION_TYPE_UNREGISTERED;
    return ACL_SUCCESS;
  }
  attributes->location.type =
      a.kind == MemKind::kDevice ? ACL_MEM_LOCATION_TYPE_DEVICE : ACL_MEM_LOCATION_TYPE_HOST;
  attributes->location.id = static_cast<uint32_t>(a.device);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr, size_t* free, size_t* total) {
  SIMCANN_API();
  uint64_t t = device_total_bytes();
  uint64_t used = static_cast<uint64_t>(device_bytes_live());
  if (total) *total = t;
  if (free) *free = used > t ? 0 : t - used;
  return ACL_SUCCESS;
}

// Source: hicann/runtime docs/zh/api_ref/11-03_memory_copy_and_set.md (aclrtMemcpy is
// synchronous) + the capture-mode rule above.
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                                         aclrtMemcpyKind kind) {
  SIMCANN_API();
  aclError e = check_copy_args(dst, destMax, src, count, "aclrtMemcpy");
  if (e == ACL_SUCCESS) e = check_sync_mode("aclrtMemcpy");
  if (e != ACL_SUCCESS) return e;
  bool dh = true, sh = true;
  directions(kind, dst, src, count, &dh, &sh);
  return sync_copy(dst, src, count, dh, sh, "aclrtMemcpy");
}

ACL_FUNC_VISIBILITY aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value,
                                         size_t count) {
  SIMCANN_API();
  if (devPtr == nullptr || count > maxCount) {
    set_error("simcann: aclrtMemset: null pointer or count > maxCount");
    return ACL_ERROR_INVALID_PARAM;
  }
  aclError e = check_sync_mode("aclrtMemset");
  if (e != ACL_SUCCESS) return e;
  std::vector<CheckedRange> ranges{resolve_range({devPtr, count, true, host_side(devPtr, count)})};
  RangesInUse use("aclrtMemset", ranges);  // Note [Range checks]
  if (!use.ok()) return ACL_ERROR_INVALID_PARAM;
  device_fill(devPtr, value, count);
  return ACL_SUCCESS;
}

// Asynchronous copy: runs on the stream's worker (or is captured). Pageable host memory on a
// capturing stream is refused with ACL_ERROR_RT_PARAM_INVALID (107000) -- facts note, "CANN
// runtime semantics"; the capture stays active.
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src,
                                              size_t count, aclrtMemcpyKind kind,
                                              aclrtStream stream) {
  SIMCANN_API();
  aclError e = check_copy_args(dst, destMax, src, count, "aclrtMemcpyAsync");
  if (e != ACL_SUCCESS) return e;
  bool dh = true, sh = true;
  directions(kind, dst, src, count, &dh, &sh);
  if (capture_status(stream) != ACL_MODEL_RI_CAPTURE_STATUS_NONE) {
    if ((sh && !is_pinned_host_ptr(src, count)) || (dh && !is_pinned_host_ptr(dst, count))) {
      set_error(
          "simcann: aclrtMemcpyAsync on a capturing stream with pageable (unregistered) host "
          "memory (src %p, dst %p, %zu bytes): rule 107000",
          src, dst, count);
      return ACL_ERROR_RT_PARAM_INVALID;
    }
  }
  std::vector<MemRange> ranges{{src, count, false, sh}, {dst, count, true, dh}};
  return enqueue(
      stream, "aclrtMemcpyAsync",
      [dst, src, count] {
        device_copy(dst, src, count);
        return ACL_SUCCESS;
      },
      std::move(ranges));
}

ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value,
                                              size_t count, aclrtStream stream) {
  SIMCANN_API();
  if (devPtr == nullptr || count > maxCount) {
    set_error("simcann: aclrtMemsetAsync: null pointer or count > maxCount");
    return ACL_ERROR_INVALID_PARAM;
  }
  bool host = host_side(devPtr, count);
  if (host && capture_status(stream) != ACL_MODEL_RI_CAPTURE_STATUS_NONE &&
      !is_pinned_host_ptr(devPtr, count)) {
    set_error("simcann: aclrtMemsetAsync on a capturing stream with pageable host memory");
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  return enqueue(
      stream, "aclrtMemsetAsync",
      [devPtr, value, count] {
        device_fill(devPtr, value, count);
        return ACL_SUCCESS;
      },
      {MemRange{devPtr, count, true, host}});
}

// Same as aclrtMemcpyAsync (torch_npu uses it for D2H when the CANN / driver versions allow).
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsyncWithCondition(void* dst, size_t destMax,
                                                           const void* src, size_t count,
                                                           aclrtMemcpyKind kind,
                                                           aclrtStream stream) {
  SIMCANN_API();
  return aclrtMemcpyAsync(dst, destMax, src, count, kind, stream);
}

// Batched copies (hicann docs/zh/api_ref/11-03_memory_copy_and_set.md, aclrtMemcpyBatch[Async]):
// numBatches independent copies; the attrs only describe locations, which the registry knows.
static aclError check_batch(void** dsts, size_t* destMaxs, void** srcs, size_t* sizes,
                            size_t n, size_t* failIndex, const char* api) {
  if (failIndex) *failIndex = SIZE_MAX;
  if (n > 0 && (dsts == nullptr || destMaxs == nullptr || srcs == nullptr || sizes == nullptr)) {
    set_error("simcann: %s: null array", api);
    return ACL_ERROR_INVALID_PARAM;
  }
  for (size_t i = 0; i < n; ++i) {
    aclError e = check_copy_args(dsts[i], destMaxs[i], srcs[i], sizes[i], api);
    if (e != ACL_SUCCESS) {
      if (failIndex) *failIndex = i;
      return e;
    }
  }
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtMemcpyBatch(void** dsts, size_t* destMax, void** srcs,
                                              size_t* sizes, size_t numBatches,
                                              aclrtMemcpyBatchAttr*, size_t*, size_t,
                                              size_t* failIndex) {
  SIMCANN_API();
  aclError e = check_batch(dsts, destMax, srcs, sizes, numBatches, failIndex, "aclrtMemcpyBatch");
  if (e == ACL_SUCCESS) e = check_sync_mode("aclrtMemcpyBatch");
  for (size_t i = 0; e == ACL_SUCCESS && i < numBatches; ++i) {
    e = sync_copy(dsts[i], srcs[i], sizes[i], host_side(dsts[i], sizes[i]),
                  host_side(srcs[i], sizes[i]), "aclrtMemcpyBatch");
    if (e != ACL_SUCCESS && failIndex) *failIndex = i;
  }
  return e;
}

ACL_FUNC_VISIBILITY aclError aclrtMemcpyBatchAsync(void** dsts, size_t* destMax, void** srcs,
                                                   size_t* sizes, size_t numBatches,
                                                   aclrtMemcpyBatchAttr*, size_t*, size_t,
                                                   size_t* failIndex, aclrtStream stream) {
  SIMCANN_API();
  aclError e =
      check_batch(dsts, destMax, srcs, sizes, numBatches, failIndex, "aclrtMemcpyBatchAsync");
  if (e != ACL_SUCCESS) return e;
  bool capturing = capture_status(stream) != ACL_MODEL_RI_CAPTURE_STATUS_NONE;
  std::vector<MemRange> ranges;
  std::vector<std::array<uintptr_t, 3>> copies;
  for (size_t i = 0; i < numBatches; ++i) {
    bool dh = host_side(dsts[i], sizes[i]), sh = host_side(srcs[i], sizes[i]);
    if (capturing && ((sh && !is_pinned_host_ptr(srcs[i], sizes[i])) ||
                      (dh && !is_pinned_host_ptr(dsts[i], sizes[i])))) {
      set_error("simcann: aclrtMemcpyBatchAsync on a capturing stream with pageable host memory "
                "(batch %zu): rule 107000",
                i);
      if (failIndex) *failIndex = i;
      return ACL_ERROR_RT_PARAM_INVALID;
    }
    ranges.push_back({srcs[i], sizes[i], false, sh});
    ranges.push_back({dsts[i], sizes[i], true, dh});
    copies.push_back({reinterpret_cast<uintptr_t>(dsts[i]), reinterpret_cast<uintptr_t>(srcs[i]),
                      sizes[i]});
  }
  return enqueue(
      stream, "aclrtMemcpyBatchAsync",
      [copies] {
        for (const auto& c : copies) {
          void* dst = reinterpret_cast<void*>(c[0]);
          device_copy(dst, reinterpret_cast<const void*>(c[1]), c[2]);
        }
        return ACL_SUCCESS;
      },
      std::move(ranges));
}

int64_t simcann_host_bytes_live() { return host_bytes_live(); }
// aclrtMallocHost* calls that passed the argument checks (injected failures included): the
// runtime pins a workload cost.
int64_t simcann_host_malloc_calls() { return config().n_malloc_host.load(); }
int64_t simcann_device_bytes_live() { return device_bytes_live(); }

}  // extern "C"

namespace simcann {
// At exit: one line about memory still allocated (SIMCANN_REPORT_LEAKS=1 or SIMCANN_TRACE=1).
struct LeakReporter {
  ~LeakReporter() {
    if (!config().report_leaks && !config().trace) return;
    std::fprintf(stderr,
                 "simcann: at exit: %lld bytes pinned host, %lld bytes device still allocated\n",
                 static_cast<long long>(host_bytes_live()),
                 static_cast<long long>(device_bytes_live()));
  }
};
static LeakReporter g_leak_reporter;
}  // namespace simcann
