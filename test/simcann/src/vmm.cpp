// Virtual memory management: aclrtReserveMemAddress / aclrtReleaseMemAddress (address space),
// aclrtMallocPhysical / aclrtFreePhysical (physical handles), aclrtMapMem / aclrtUnmapMem,
// aclrtMemGetAllocationGranularity. torch_npu's expandable segments use them: the device
// allocator (`expandable_segments:True`) and the pinned host allocator
// (`pin_memory_expandable_segments:True`, CachingHostAllocator.cpp ExpandableSegment: reserve
// 72 GiB, map 20 MiB segments of pinned host memory, ACL_MEM_LOCATION_TYPE_HOST).
//
// Model. A reservation is address space reserved with mmap(PROT_NONE); a physical handle is a
// memfd of its size (host or device memory alike: the simulated device shares the address space);
// aclrtMapMem maps the memfd at the address (MAP_SHARED | MAP_FIXED), so the bytes are the
// handle's and survive unmap / remap; aclrtUnmapMem puts PROT_NONE back. A mapping is registered
// as pinned host (or device) memory, so copies, capture rules, pointer attributes and the task
// range checks treat it like aclrtMallocHost (aclrtMalloc) memory; unmapping it while tasks still
// use it is reported like a free (SIMCANN VIOLATION). Physical bytes count in
// simcann_{host,device}_bytes_live from aclrtMallocPhysical until released (free and unmapped);
// device handles against the device's 64 GiB (207001 ACL_ERROR_RT_MEMORY_ALLOCATION, which
// torch_npu treats as out of memory).
//
// Rules (hicann/runtime docs/zh/api_ref/11-04_virtual_memory_management.md, "the doc" below, and
// src/acl/aclrt_impl/memory.cpp, the ACL layer's checks, which return 100000
// ACL_ERROR_INVALID_PARAM):
//   reserve: virPtr non-null, size > 0, flags 0 or 1 (memory.cpp); alignment
//            "当前只能设置为0" (doc); expectPtr, if given, must be free address space.
//   malloc physical: handle / prop non-null, size > 0, flags 0, handleType NONE, allocationType
//            PINNED, location not UNREGISTERED / MANAGED, DDR attributes only for host memory
//            (memory.cpp aclrtMallocPhysicalImpl).
//   map:     virPtr / handle non-null, size > 0, flags 0 (memory.cpp); size equal to the handle's
//            and offset 0 (doc); the range inside one reservation, not overlapping a mapping; one
//            reservation never bound to physical memory of two devices (doc).
//   unmap:   virPtr the start of a mapping. free physical: while mapped, the memory is released
//            only at the unmap (doc). release address: nothing may still be mapped in it (doc).
// What the driver returns for the map / unmap / release refusals is not in the open runtime
// source; they return 107000 ACL_ERROR_RT_PARAM_INVALID here. Stale or unknown handles and
// addresses: 107000 too. Not modelled: aclrtMemMapNoAccess, access flags (aclrtMemSetAccess),
// shareable handles / IPC, aclrtMemRetainAllocationHandle, aclrtMemGetAddressRange (still stubs).
//
// Compiled WITHOUT the ACL headers (like reslimit_api.cpp): the wheels of 2.9 and older do not
// declare every type used here. aclrtPhysicalMemProp's C layout (acl_rt.h) is mirrored below.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000  // Linux >= 4.17; older kernels treat it as a hint
#endif

namespace simcann {
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void set_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int device_or_default();
// memory.cpp
bool vmm_account(bool device, int64_t delta);
void vmm_register_mapping(uintptr_t base, size_t size, bool device, int dev, uint64_t reservation);
void vmm_unregister_mapping(uintptr_t base);

namespace {

constexpr int kOk = 0;
constexpr int kInvalidParam = 100000;     // ACL_ERROR_INVALID_PARAM
constexpr int kRtParamInvalid = 107000;   // ACL_ERROR_RT_PARAM_INVALID
constexpr int kRtMemoryAlloc = 207001;    // ACL_ERROR_RT_MEMORY_ALLOCATION
constexpr size_t kHugeGranularity = 2u << 20;  // doc: ACL_MEM_HUGE / ACL_HBM_MEM_HUGE "2M粒度"

// acl_rt.h: aclrtMemLocationType, aclrtMemAttr, aclrtMemHandleType, aclrtMemAllocationType.
constexpr int kLocHost = 0, kLocDevice = 1, kLocHostNuma = 4;
constexpr int kDdrMemHuge = 2, kDdrMemNormal = 3, kDdrP2pHuge = 6, kDdrP2pNormal = 7;
constexpr int kHandleTypeNone = 0, kAllocPinned = 0;

struct MemLocation {  // aclrtMemLocation
  uint32_t id;
  int type;
};
struct PhysicalMemProp {  // aclrtPhysicalMemProp
  int handleType;
  int allocationType;
  int memAttr;
  MemLocation location;
  uint64_t reserve;
};

struct Physical {
  size_t size = 0;
  bool device = false;
  int dev = 0;
  int fd = -1;
  int mappings = 0;
  bool freed = false;  // aclrtFreePhysical called; released once unmapped
};

struct Mapping {
  size_t size = 0;
  Physical* phys = nullptr;
  uint64_t reservation = 0;
};

struct Reservation {
  uintptr_t base = 0;
  size_t size = 0;
  uint64_t id = 0;
  int mapped_dev = -1;  // the device whose memory it maps, -1: none / host
};

struct Vmm {
  std::mutex mu;
  std::map<uintptr_t, Reservation> reservations;  // by base
  std::map<uintptr_t, Mapping> mappings;           // by base
  std::map<Physical*, bool> handles;               // every handle ever made (never deleted)
  uint64_t next_reservation = 1;
};

Vmm& vmm() {
  static Vmm* v = new Vmm();  // leaked on purpose: used from static destructors
  return *v;
}

int refuse(int code, const char* api, const char* why) {
  set_error("simcann: %s: %s", api, why);
  log("%s -> %d (%s)", api, code, why);
  return code;
}

// The reservation holding [p, p + n), or nullptr.
Reservation* reservation_of(Vmm& v, uintptr_t p, size_t n) {
  auto it = v.reservations.upper_bound(p);
  if (it == v.reservations.begin()) return nullptr;
  --it;
  Reservation& r = it->second;
  return p >= r.base && p + n <= r.base + r.size ? &r : nullptr;
}

bool overlaps_mapping(Vmm& v, uintptr_t p, size_t n) {
  auto it = v.mappings.lower_bound(p + n);
  if (it == v.mappings.begin()) return false;
  --it;
  return it->first + it->second.size > p;
}

// Releases a freed handle's memory once nothing maps it.
void maybe_release(Physical* ph) {
  if (!ph->freed || ph->mappings > 0 || ph->fd < 0) return;
  close(ph->fd);
  ph->fd = -1;
  vmm_account(ph->device, -static_cast<int64_t>(ph->size));
}

}  // namespace
}  // namespace simcann

using namespace simcann;

#define SIMCANN_EXPORT extern "C" __attribute__((visibility("default")))

SIMCANN_EXPORT int aclrtReserveMemAddress(void** virPtr, size_t size, size_t alignment,
                                          void* expectPtr, uint64_t flags) {
  const char* api = "aclrtReserveMemAddress";
  log("%s size=%zu", api, size);
  if (virPtr == nullptr || size == 0) return refuse(kInvalidParam, api, "null virPtr or size 0");
  if (flags > 1) return refuse(kInvalidParam, api, "flags must be 0 (or 1, for compatibility)");
  if (alignment != 0) return refuse(kInvalidParam, api, "alignment must be 0");
  const size_t rounded = (size + kHugeGranularity - 1) / kHugeGranularity * kHugeGranularity;
  int mflags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (expectPtr != nullptr) mflags |= MAP_FIXED_NOREPLACE;
  void* p = mmap(expectPtr, rounded, PROT_NONE, mflags, -1, 0);
  if (p == MAP_FAILED) return refuse(kRtMemoryAlloc, api, "no address space (or expectPtr taken)");
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  Reservation r;
  r.base = reinterpret_cast<uintptr_t>(p);
  r.size = rounded;
  r.id = v.next_reservation++;
  v.reservations[r.base] = r;
  *virPtr = p;
  return kOk;
}

SIMCANN_EXPORT int aclrtReleaseMemAddress(void* virPtr) {
  const char* api = "aclrtReleaseMemAddress";
  log("%s %p", api, virPtr);
  if (virPtr == nullptr) return refuse(kInvalidParam, api, "null virPtr");
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.reservations.find(reinterpret_cast<uintptr_t>(virPtr));
  if (it == v.reservations.end()) return refuse(kRtParamInvalid, api, "not a reserved address");
  if (overlaps_mapping(v, it->second.base, it->second.size)) {
    return refuse(kRtParamInvalid, api, "memory is still mapped in it (aclrtUnmapMem first)");
  }
  munmap(virPtr, it->second.size);
  v.reservations.erase(it);
  return kOk;
}

SIMCANN_EXPORT int aclrtMallocPhysical(void** handle, size_t size, const void* propArg,
                                       uint64_t flags) {
  const char* api = "aclrtMallocPhysical";
  log("%s size=%zu", api, size);
  const PhysicalMemProp* prop = static_cast<const PhysicalMemProp*>(propArg);
  if (handle == nullptr || prop == nullptr || size == 0) {
    return refuse(kInvalidParam, api, "null handle / prop or size 0");
  }
  if (flags != 0) return refuse(kInvalidParam, api, "flags must be 0");
  if (prop->handleType != kHandleTypeNone || prop->allocationType != kAllocPinned) {
    return refuse(kInvalidParam, api, "handleType must be NONE and allocationType PINNED");
  }
  const int loc = prop->location.type;
  if (loc != kLocHost && loc != kLocDevice && loc != kLocHostNuma) {  // UNREGISTERED, MANAGED
    return refuse(kInvalidParam, api, "location type not supported");
  }
  const bool device = loc == kLocDevice;
  const int a = prop->memAttr;
  const bool ddr = a == kDdrMemHuge || a == kDdrMemNormal || a == kDdrP2pHuge || a == kDdrP2pNormal;
  if (device && ddr) {
    return refuse(kInvalidParam, api, "DDR memAttr only for host memory");
  }
  if (!vmm_account(device, static_cast<int64_t>(size))) {
    return refuse(kRtMemoryAlloc, api, "device memory exhausted");
  }
  const int fd = memfd_create("simcann-physical", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    vmm_account(device, -static_cast<int64_t>(size));
    return refuse(kRtMemoryAlloc, api, "host memory exhausted");
  }
  Physical* ph = new Physical();
  ph->size = size;
  ph->device = device;
  ph->dev = device ? static_cast<int>(prop->location.id) : -1;
  ph->fd = fd;
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  v.handles[ph] = true;
  *handle = ph;
  return kOk;
}

SIMCANN_EXPORT int aclrtFreePhysical(void* handle) {
  const char* api = "aclrtFreePhysical";
  log("%s %p", api, handle);
  if (handle == nullptr) return refuse(kInvalidParam, api, "null handle");
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  Physical* ph = static_cast<Physical*>(handle);
  if (v.handles.count(ph) == 0 || ph->freed) {
    return refuse(kRtParamInvalid, api, "unknown or freed handle");
  }
  ph->freed = true;
  maybe_release(ph);
  return kOk;
}

SIMCANN_EXPORT int aclrtMapMem(void* virPtr, size_t size, size_t offset, void* handle,
                               uint64_t flags) {
  const char* api = "aclrtMapMem";
  log("%s %p size=%zu", api, virPtr, size);
  if (virPtr == nullptr || handle == nullptr || size == 0) {
    return refuse(kInvalidParam, api, "null virPtr / handle or size 0");
  }
  if (flags != 0) return refuse(kInvalidParam, api, "flags must be 0");
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  Physical* ph = static_cast<Physical*>(handle);
  if (v.handles.count(ph) == 0 || ph->freed) {
    return refuse(kRtParamInvalid, api, "unknown or freed handle");
  }
  if (offset != 0) return refuse(kRtParamInvalid, api, "offset must be 0");
  if (size != ph->size) return refuse(kRtParamInvalid, api, "size must equal the handle's size");
  const uintptr_t p = reinterpret_cast<uintptr_t>(virPtr);
  Reservation* r = reservation_of(v, p, size);
  if (r == nullptr) return refuse(kRtParamInvalid, api, "range not inside one reservation");
  if (overlaps_mapping(v, p, size)) return refuse(kRtParamInvalid, api, "range already mapped");
  const int dev = ph->device ? ph->dev : -1;
  bool mapped_any = false;
  for (const auto& m : v.mappings) mapped_any |= m.second.reservation == r->id;
  if (ph->device && mapped_any && r->mapped_dev >= 0 && r->mapped_dev != dev) {
    return refuse(kRtParamInvalid, api, "reservation already maps another device's memory");
  }
  if (mmap(virPtr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, ph->fd, 0) == MAP_FAILED) {
    return refuse(kRtMemoryAlloc, api, "mmap failed");
  }
  if (ph->device) r->mapped_dev = dev;
  ph->mappings += 1;
  v.mappings[p] = Mapping{size, ph, r->id};
  vmm_register_mapping(p, size, ph->device, ph->device ? dev : device_or_default(), r->id);
  return kOk;
}

SIMCANN_EXPORT int aclrtUnmapMem(void* virPtr) {
  const char* api = "aclrtUnmapMem";
  log("%s %p", api, virPtr);
  if (virPtr == nullptr) return refuse(kInvalidParam, api, "null virPtr");
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.mappings.find(reinterpret_cast<uintptr_t>(virPtr));
  if (it == v.mappings.end()) return refuse(kRtParamInvalid, api, "not the start of a mapping");
  const Mapping m = it->second;
  vmm_unregister_mapping(it->first);  // waits for a task touching it (free gate)
  mmap(virPtr, m.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  v.mappings.erase(it);
  m.phys->mappings -= 1;
  maybe_release(m.phys);
  return kOk;
}

// doc aclrtMemGetAllocationGranularity: the size physical allocations are aligned to; 2 MiB for
// huge pages and HBM (ACL_HBM_MEM_NORMAL "接口内部会按照ACL_HBM_MEM_HUGE类型申请"),
// the page otherwise.
SIMCANN_EXPORT int aclrtMemGetAllocationGranularity(void* propArg, int option,
                                                    size_t* granularity) {
  const char* api = "aclrtMemGetAllocationGranularity";
  log("%s", api);
  const PhysicalMemProp* prop = static_cast<const PhysicalMemProp*>(propArg);
  if (prop == nullptr || granularity == nullptr) return refuse(kInvalidParam, api, "null argument");
  if (option != 0 && option != 1) return refuse(kInvalidParam, api, "bad option");
  const bool page = prop->memAttr == kDdrMemNormal || prop->memAttr == kDdrP2pNormal;
  *granularity = page ? static_cast<size_t>(sysconf(_SC_PAGESIZE)) : kHugeGranularity;
  return kOk;
}
