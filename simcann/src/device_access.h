// The device's own reads and writes of memory (what a copy or memset moves), kept out of
// ThreadSanitizer's sight. Compiled into every build; only a `build.sh --sanitize thread` build
// brackets them.
//
// Note [The device's memory accesses]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On an NPU a copy's bytes are moved by the device's DMA engines, which ThreadSanitizer cannot
// see: it sees the host threads' accesses and nothing else. Here the same bytes are moved by a
// stream's worker thread (or, for aclrtMemcpy / aclrtMemset, the calling thread), so without
// this TSan would judge the device's accesses as a host thread's. It then reports what is, on
// the hardware, a program's own race on its data (two streams touching one buffer with no event
// between them; a buffer that an allocator recycled while a copy still read it) as a data race
// inside the simulated runtime (test/pinpool/test_eager_and_threads.py,
// test_streams_racing_on_a_pinned_buffer_is_the_programs_race: memory.cpp's memmove, plugin on
// and off; and native torch_npu 2.10's recycled block in test_vllm_patterns.py).
// Such a race is not lost: the bytes still move as the hardware would move them, so it shows as
// it does on an NPU, in the bytes the tests check (the plugin-off cases assert native's wrong
// bytes); a copy that touches memory already freed is still the range checks' (Note [Range
// checks], state.h).
//
// Only the payload is hidden: the runtime's own state (streams, events, the allocation
// registry, a task's ranges) is read and written outside these functions and stays checked, as
// do the kernels (ops/), whose code also reads the runtime's descriptors. A host thread's
// accesses to the same memory (a user's fill_, an allocator's bookkeeping) stay visible.
#pragma once

#include <cstddef>
#include <cstring>

#if defined(__SANITIZE_THREAD__)
// TSan's runtime exports these; gcc 12's <sanitizer/tsan_interface.h> does not declare them.
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace simcann {

#if defined(__SANITIZE_THREAD__)
struct DeviceAccess {
  DeviceAccess() { __tsan_ignore_thread_begin(); }
  ~DeviceAccess() { __tsan_ignore_thread_end(); }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};
#else
struct DeviceAccess {};
#endif

// memmove as the device's DMA does it (overlapping ranges allowed, as aclrtMemcpy's are).
inline void device_copy(void* dst, const void* src, size_t n) {
  if (n == 0) return;
  DeviceAccess device;
  std::memmove(dst, src, n);
}

inline void device_fill(void* dst, int value, size_t n) {
  if (n == 0) return;
  DeviceAccess device;
  std::memset(dst, value, n);
}

}  // namespace simcann
