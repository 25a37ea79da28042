// Virtual memory management: aclrtReserveMemAddress / aclrtReleaseMemAddress (address space),
// aclrtMallocPhysical / aclrtFreePhysical / aclrtMemRetainAllocationHandle (physical handles),
// aclrtMapMem / aclrtMemMapNoAccess / aclrtUnmapMem, aclrtMemSetAccess / aclrtMemGetAccess
// (access flags), aclrtMemGetAddressRange, aclrtMemGetAllocationGranularity. torch_npu's expandable segments use them: the device
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
//   map, no access (aclrtMemMapNoAccess): the rules of map; the range stays inaccessible
//            ("目标Device上尚未建立可访问页表，虚拟地址区间不可访问", doc) until
//            aclrtMemSetAccess grants it: mmap PROT_NONE here, and the range is not registered
//            as memory copies / tasks may use until then.
//   set access (aclrtMemSetAccess): virPtr and size those of a mapping ("必须与aclrtMapMem或
//            aclrtMemMapNoAccess接口的virPtr地址相同" / "size相同", doc); desc non-null (the
//            runtime's ApiErrorDecorator::MemSetAccess, api_error.cc: RT_ERROR_INVALID_VALUE,
//            which errcode_manage.cc maps to 107000); each desc's flags one of
//            aclrtMemAccessFlags (NONE 0, READ 1, READWRITE 3; acl_rt.h) and its location HOST or
//            DEVICE (the doc's rule for aclrtMemGetAccess, applied to both). count 0 is refused
//            here (the doc: "desc数组长度"; the driver's answer is not open).
//   get access (aclrtMemGetAccess): virPtr / location / flag non-null (memory.cpp: 100000);
//            virPtr the start of a mapping, location HOST or DEVICE ("当前仅支持", doc).
//   The access model: each mapping keeps a flag per location; aclrtMapMem starts it READWRITE for
//            the handle's own location (host, or its device), aclrtMemMapNoAccess with none.
//            The simulated device shares the host's address space, so the pages get the
//            widest flag any location has (NONE: PROT_NONE, READ: PROT_READ, READWRITE:
//            read + write): an access the flags do not allow faults, here as a SIGSEGV of the
//            process; with no location left able to read, the range is unregistered again.
//   retain (aclrtMemRetainAllocationHandle): virPtr / handle non-null (memory.cpp: 100000);
//            virPtr the start of a mapping ("必须与aclrtMapMem接口的virPtr地址相同", doc); it
//            returns the mapped handle, and "若多次调用本接口，则需相应地调用相同次数的
//            aclrtFreePhysical" (doc): a handle holds a count of references, 1 from
//            aclrtMallocPhysical and 1 per retain; each aclrtFreePhysical drops one, the memory
//            is released when none is left and nothing maps it, and a free beyond the count is
//            107000 like a stale handle.
//   address range (aclrtMemGetAddressRange): ptr non-null (memory.cpp: 100000), pbase and psize
//            not both null (api_error.cc: 107000); the block holding ptr as the doc's table
//            lists them: aclrtMalloc device memory, aclrtMallocHost host memory, a mapping of
//            aclrtMapMem (its base and size, not the reservation's). Any other address
//            (aclrtHostRegister'ed user memory, which the table does not list, unmapped space,
//            an inaccessible aclrtMemMapNoAccess range) is 107000 here.
// What the driver returns for the map / unmap / release refusals is not in the open runtime
// source; they return 107000 ACL_ERROR_RT_PARAM_INVALID here. Stale or unknown handles and
// addresses: 107000 too. Not modelled: shareable handles / IPC (generic stubs where torch_npu
// references them), aclrtMemGetAllocationPropertiesFromHandle.
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
// The registered block holding p: its base, size and whether it is a kind aclrtMemGetAddressRange
// answers for (device memory, aclrtMallocHost memory, a mapping); false if none holds p.
bool vmm_block_of(const void* p, uintptr_t* base, size_t* size, bool* listed);

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
// acl_rt.h aclrtMemAccessFlags.
constexpr uint64_t kAccessNone = 0x0, kAccessRead = 0x1, kAccessReadWrite = 0x3;

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

struct MemAccessDesc {  // aclrtMemAccessDesc
  int flags;             // aclrtMemAccessFlags
  MemLocation location;
  uint8_t rsv[12];
};

struct Physical {
  size_t size = 0;
  bool device = false;
  int dev = 0;
  int fd = -1;
  int mappings = 0;
  int refs = 1;  // aclrtMallocPhysical's, plus one per aclrtMemRetainAllocationHandle
  bool freed() const { return refs == 0; }  // released once also unmapped
};

struct Mapping {
  size_t size = 0;
  Physical* phys = nullptr;
  uint64_t reservation = 0;
  std::map<std::pair<int, uint32_t>, uint64_t> access;  // (location type, id) -> flags
  bool registered = false;  // in memory.cpp's registry (some location may read it)
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
  if (!ph->freed() || ph->mappings > 0 || ph->fd < 0) return;
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
  if (v.handles.count(ph) == 0 || ph->freed()) {
    return refuse(kRtParamInvalid, api, "unknown or freed handle");
  }
  ph->refs -= 1;
  maybe_release(ph);
  return kOk;
}

namespace simcann {
namespace {

// aclrtMapMem (accessible: READWRITE for the handle's own location) and aclrtMemMapNoAccess.
int map_impl(const char* api, void* virPtr, size_t size, size_t offset, void* handle,
             uint64_t flags, bool accessible) {
  log("%s %p size=%zu", api, virPtr, size);
  if (virPtr == nullptr || handle == nullptr || size == 0) {
    return refuse(kInvalidParam, api, "null virPtr / handle or size 0");
  }
  if (flags != 0) return refuse(kInvalidParam, api, "flags must be 0");
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  Physical* ph = static_cast<Physical*>(handle);
  if (v.handles.count(ph) == 0 || ph->freed()) {
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
  const int prot = accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
  if (mmap(virPtr, size, prot, MAP_SHARED | MAP_FIXED, ph->fd, 0) == MAP_FAILED) {
    return refuse(kRtMemoryAlloc, api, "mmap failed");
  }
  if (ph->device) r->mapped_dev = dev;
  ph->mappings += 1;
  Mapping m;
  m.size = size;
  m.phys = ph;
  m.reservation = r->id;
  if (accessible) {
    const std::pair<int, uint32_t> own{ph->device ? kLocDevice : kLocHost,
                                       ph->device ? static_cast<uint32_t>(dev) : 0u};
    m.access[own] = kAccessReadWrite;
    m.registered = true;
    vmm_register_mapping(p, size, ph->device, ph->device ? dev : device_or_default(), r->id);
  }
  v.mappings[p] = m;
  return kOk;
}

// The mapping starting at virPtr, or nullptr.
Mapping* mapping_at(Vmm& v, const void* virPtr) {
  auto it = v.mappings.find(reinterpret_cast<uintptr_t>(virPtr));
  return it == v.mappings.end() ? nullptr : &it->second;
}

bool location_ok(const MemLocation& l) { return l.type == kLocHost || l.type == kLocDevice; }

std::pair<int, uint32_t> location_key(const MemLocation& l) {
  return {l.type, l.type == kLocHost ? 0u : l.id};  // doc: a HOST location's id is not used
}

}  // namespace
}  // namespace simcann

SIMCANN_EXPORT int aclrtMapMem(void* virPtr, size_t size, size_t offset, void* handle,
                               uint64_t flags) {
  return map_impl("aclrtMapMem", virPtr, size, offset, handle, flags, true);
}

SIMCANN_EXPORT int aclrtMemMapNoAccess(void* virPtr, size_t size, size_t offset, void* handle,
                                       uint64_t flags) {
  return map_impl("aclrtMemMapNoAccess", virPtr, size, offset, handle, flags, false);
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
  // Waits for a running task touching this mapping only (Note [Range checks]).
  if (m.registered) vmm_unregister_mapping(it->first);
  mmap(virPtr, m.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  v.mappings.erase(it);
  m.phys->mappings -= 1;
  maybe_release(m.phys);
  return kOk;
}

SIMCANN_EXPORT int aclrtMemSetAccess(void* virPtr, size_t size, void* descArg, size_t count) {
  const char* api = "aclrtMemSetAccess";
  log("%s %p size=%zu count=%zu", api, virPtr, size, count);
  const MemAccessDesc* desc = static_cast<const MemAccessDesc*>(descArg);
  if (virPtr == nullptr || desc == nullptr) return refuse(kRtParamInvalid, api, "null virPtr or desc");
  if (count == 0) return refuse(kRtParamInvalid, api, "count 0: no access descriptor");
  for (size_t i = 0; i < count; ++i) {
    const uint64_t f = static_cast<uint64_t>(static_cast<uint32_t>(desc[i].flags));
    if (f != kAccessNone && f != kAccessRead && f != kAccessReadWrite) {
      return refuse(kRtParamInvalid, api, "flags not an aclrtMemAccessFlags value (0, 1, 3)");
    }
    if (!location_ok(desc[i].location)) {
      return refuse(kRtParamInvalid, api, "location type must be HOST or DEVICE");
    }
  }
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  Mapping* m = mapping_at(v, virPtr);
  if (m == nullptr) return refuse(kRtParamInvalid, api, "virPtr is not the start of a mapping");
  if (size != m->size) return refuse(kRtParamInvalid, api, "size must equal the mapping's size");
  for (size_t i = 0; i < count; ++i) {
    m->access[location_key(desc[i].location)] = static_cast<uint32_t>(desc[i].flags);
  }
  uint64_t widest = kAccessNone;
  for (const auto& a : m->access) widest |= a.second;
  const int prot = widest == kAccessReadWrite ? PROT_READ | PROT_WRITE
                   : widest == kAccessRead    ? PROT_READ
                                              : PROT_NONE;
  const uintptr_t p = reinterpret_cast<uintptr_t>(virPtr);
  if (prot == PROT_NONE && m->registered) {
    vmm_unregister_mapping(p);  // waits for a task touching it, as an unmap does
    m->registered = false;
  }
  if (mprotect(virPtr, m->size, prot) != 0) return refuse(kRtMemoryAlloc, api, "mprotect failed");
  if (prot != PROT_NONE && !m->registered) {
    const Physical* ph = m->phys;
    vmm_register_mapping(p, m->size, ph->device, ph->device ? ph->dev : device_or_default(),
                         m->reservation);
    m->registered = true;
  }
  return kOk;
}

SIMCANN_EXPORT int aclrtMemGetAccess(void* virPtr, void* locationArg, uint64_t* flag) {
  const char* api = "aclrtMemGetAccess";
  log("%s %p", api, virPtr);
  const MemLocation* location = static_cast<const MemLocation*>(locationArg);
  if (virPtr == nullptr || location == nullptr || flag == nullptr) {
    return refuse(kInvalidParam, api, "null virPtr, location or flag");
  }
  if (!location_ok(*location)) return refuse(kRtParamInvalid, api, "location type must be HOST or DEVICE");
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  Mapping* m = mapping_at(v, virPtr);
  if (m == nullptr) return refuse(kRtParamInvalid, api, "virPtr is not the start of a mapping");
  auto it = m->access.find(location_key(*location));
  *flag = it == m->access.end() ? kAccessNone : it->second;
  return kOk;
}

SIMCANN_EXPORT int aclrtMemRetainAllocationHandle(void* virPtr, void** handle) {
  const char* api = "aclrtMemRetainAllocationHandle";
  log("%s %p", api, virPtr);
  if (virPtr == nullptr || handle == nullptr) return refuse(kInvalidParam, api, "null virPtr or handle");
  Vmm& v = vmm();
  std::lock_guard<std::mutex> lock(v.mu);
  Mapping* m = mapping_at(v, virPtr);
  if (m == nullptr) return refuse(kRtParamInvalid, api, "virPtr is not the start of a mapping");
  m->phys->refs += 1;  // one more aclrtFreePhysical owed (doc)
  *handle = m->phys;
  return kOk;
}

SIMCANN_EXPORT int aclrtMemGetAddressRange(void* ptr, void** pbase, size_t* psize) {
  const char* api = "aclrtMemGetAddressRange";
  log("%s %p", api, ptr);
  if (ptr == nullptr) return refuse(kInvalidParam, api, "null ptr");
  if (pbase == nullptr && psize == nullptr) {
    return refuse(kRtParamInvalid, api, "pbase and psize cannot both be null");
  }
  uintptr_t base = 0;
  size_t size = 0;
  bool listed = false;
  if (!vmm_block_of(ptr, &base, &size, &listed)) {
    return refuse(kRtParamInvalid, api, "no allocation holds this address");
  }
  if (!listed) {
    return refuse(kRtParamInvalid, api,
                  "registered user memory (aclrtHostRegister): not a block this call reports");
  }
  if (pbase != nullptr) *pbase = reinterpret_cast<void*>(base);
  if (psize != nullptr) *psize = size;
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
