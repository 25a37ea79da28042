// The happens-before edge torch_npu's task queue gives a runtime handle, told to ThreadSanitizer.
// Compiled only into a `build.sh --sanitize thread` build; elsewhere both functions are empty.
//
// Note [Handles handed over through torch_npu's task queue]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With its task queue on (the default), torch_npu creates events and streams on the calling
// (Python) thread, synchronously (NPUEvent::createEvent -> aclrtCreateEventExWithFlag,
// getStreamFromPool -> aclrtCreateStream), and hands the handle to its queue thread
// ("acl_thread"), which later calls aclrtRecordEvent / aclrtStreamWaitEvent / a launch with it.
// The hand-over is torch_npu's Repository (Ascend/pytorch torch_npu/csrc/core/npu/NPUQueue.h,
// NPUQueue.cpp): a ring of task parameters whose read and write indices are `volatile unsigned
// int` (sring_idx), with no lock; the enqueuing thread writes the task, then the write index,
// and the dequeuing thread reads the index, then the task. That ordering is real, but the queue
// is in libtorch_npu.so, which is not instrumented, so ThreadSanitizer never sees it and reports
// the queue thread's first read of the object (e.g. Event::flags in aclrtRecordEvent) as a race
// with its construction.
//
// The same goes for what an aclnn call hands over: torch_npu 2.10 calls aclCreateTensor & co.
// and aclnnXxxGetWorkspaceSize on the calling thread, then aclnnXxx(..., executor, stream) on the
// queue thread, and its "release_thread" (ReleaseQueue, same file) calls aclDestroyTensor & co.
//
// The runtime restates that edge where the object is made and where it is used: creating a
// handle releases its address (handle_created), and every entry point that turns a handle back
// into its object acquires it (handle_used: to_event, to_stream, launch of an executor, the
// descriptors' accessors and aclDestroy*). That orders a use after the
// object's construction, which any real hand-over (torch_npu's queue, a mutex, a thread start)
// does anyway; it orders nothing else. Nothing is released at a use, so two threads using the
// same object are not ordered by it: their accesses to its mutable state still have to go through
// its mutexes (Event::mu, Stream::mu, capture_mutex()), as before, or be reported. Under any
// other build the functions are empty: behaviour is the same with and without ThreadSanitizer.
#pragma once

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace simcann {

#if defined(__SANITIZE_THREAD__)
inline void handle_created(const void* object) { __tsan_release(const_cast<void*>(object)); }
inline void handle_used(const void* object) {
  if (object != nullptr) __tsan_acquire(const_cast<void*>(object));
}
#else
inline void handle_created(const void*) {}
inline void handle_used(const void*) {}
#endif

}  // namespace simcann
