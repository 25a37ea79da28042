// Private state of the simcann runtime core (not for src/ops: use internal.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "internal.h"

// Codes older wheels' headers (2.8 / 2.9) do not define yet (values: rt_error_codes.h of 2.10+).
#ifndef ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD
#define ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD 107038
#endif
#ifndef ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED
#define ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED 107036
#endif
#ifndef ACL_ERROR_RT_MODEL_RUNNING
#define ACL_ERROR_RT_MODEL_RUNNING 107037
#endif
#ifndef ACL_ERROR_STREAM_TASK_GROUP_STATUS
#define ACL_ERROR_STREAM_TASK_GROUP_STATUS 107033
#endif
#ifndef ACL_ERROR_STREAM_TASK_GROUP_INTR
#define ACL_ERROR_STREAM_TASK_GROUP_INTR 107034
#endif
#ifndef ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT
#define ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT 507009
#endif
// Conditional nodes (cond.cpp). The 2.13 wheel's rt_error_codes.h says 107046 (107045 is its
// ACL_ERROR_RT_STREAM_NOT_SUPPORT_OPERA); hicann/runtime's include/external/acl/error_codes/
// rt_error_codes.h (commit 674da0339 "aclgraph cond op") says 107045. The wheel's header wins
// where it defines the name (it is what torch_npu is built against); older headers lack both.
#ifndef ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING
#define ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING 107046
#endif

namespace simcann {

// aclrtLaunchHostFunc's callback (acl_rt.h: `typedef void (*aclrtHostFunc)(void *args)`): the
// 2.8.0, 2.8.0.post2 and 2.9.0 wheels' headers declare neither. The same type under our own
// name, so that stream.cpp's definition matches the declaration where a header has one.
using HostFunc = void (*)(void*);

// ---- configuration (environment, read once) ----
struct Config {
  int device_count = 1;
  std::string soc = "Ascend910B2";
  // SIMCANN_CANN_VERSION / SIMCANN_DRIVER_VERSION: what aclsysGetCANNVersion reports (see
  // device.cpp); empty = no version (what the stub answered before).
  std::string cann_version;
  std::string driver_version;
  bool trace = false;
  bool strict = false;
  bool report_leaks = false;
  std::atomic<int64_t> task_delay_us{0};
  // Fault injection: the Nth event fails (1-based); 0 = never. Counters count every attempt.
  std::atomic<int64_t> fail_malloc_host_at{0};
  std::atomic<int64_t> fail_capture_begin_at{0};
  std::atomic<int64_t> fail_capture_end_at{0};
  std::atomic<int64_t> invalidate_capture_at{0};
  std::atomic<int64_t> fail_model_destroy_at{0};
  std::atomic<int64_t> fail_record_event_at{0};
  std::atomic<int64_t> n_malloc_host{0};
  std::atomic<int64_t> n_capture_begin{0};
  std::atomic<int64_t> n_capture_end{0};
  std::atomic<int64_t> n_captured_tasks{0};
  std::atomic<int64_t> n_model_destroy{0};
  std::atomic<int64_t> n_record_event{0};
};
Config& config();
void init_once();

// Reports a checked hazard (see internal.h). Aborts under SIMCANN_STRICT=1.
void violation(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int64_t violation_count();

// ---- memory registry ----
enum class MemKind { kDevice, kPinned, kRegistered };

struct Allocation {
  uintptr_t base = 0;
  size_t size = 0;
  MemKind kind = MemKind::kDevice;
  uint64_t id = 0;  // unique over the process lifetime, never reused
  int device = 0;
  // kPinned only: also registered (aclrtHostRegister* over aclrtMallocHost memory, as torch_npu
  // does with pinned_mem_register). See aclrtHostRegister in memory.cpp.
  bool registered = false;
  // A virtual-memory mapping (vmm.cpp): the reservation it lies in, else 0. Adjacent mappings of
  // one reservation read as one contiguous range (find_allocation), as the address space does.
  uint64_t reservation = 0;
};

// A MemRange resolved against the registry when the task was enqueued (or captured).
struct CheckedRange {
  MemRange range;
  uint64_t alloc_id = 0;  // 0: not inside any registered allocation (pageable host memory)
};

// Looks up the live allocation that contains [p, p+n). Returns false if none.
bool find_allocation(const void* p, size_t n, Allocation* out);
CheckedRange resolve_range(const MemRange& r);
// Note [Range checks]: a task's memory is checked right before the task runs, and the memory it
// touches cannot disappear between that check and the task's end:
//   * a task (or a sync copy / memset, or the runtime writing memory of its own) takes a
//     RangesInUse over its ranges: under the in-use mutex it checks each range (check_ranges: a
//     violation per range that was freed since enqueue / capture) and, if none is gone, marks
//     every live allocation the ranges overlap as in use -- the one a range resolved to, the
//     adjacent mappings of one reservation it runs on into (find_allocation), and any allocation a
//     pageable range (alloc_id 0) happens to overlap; when it ends it unmarks them;
//   * a free (memory.cpp remove(): aclrtFree, aclrtFreeHost, aclrtHostUnregister, the runtime's
//     own device memory; vmm_unregister_mapping: aclrtUnmapMem, aclrtMemSetAccess to NONE), under
//     the same mutex, waits until ITS allocation is not marked, then takes it out of the registry
//     before releasing the mutex (and only then releases the bytes).
// So a free waits only for a running task that touches the allocation being freed, never for an
// unrelated one, however long it runs. The rule of CANN (hicann/runtime docs/api_docs/
// aclrtFreeHost.md and aclrtFree.md, 功能说明): the call frees the memory at once, without an
// implicit device or stream synchronization and without waiting for the tasks that use it --
//   "本接口会立刻释放传入的内存，接口内部不会进行隐式的Device同步或流同步、
//    也不会等待使用该内存的任务完成".
// Waiting for the one task that is between its check and its end is the simulator's own (the
// memory is host heap it must not touch once freed); a free before the check is a violation when
// the task runs. aclrtValueWait checks its word at each look and does not keep it in use while it
// blocks. Before issue #47 one process-wide shared_mutex did this, so a free waited for EVERY
// running task (an idle 1 MiB block's aclrtFreeHost waited ~0.5 s for another block's copy).
// Lock order: capture_mutex() (cond.cpp's default values), then the in-use mutex, then the
// registry's; a free may hold vmm's mutex (vmm.cpp) before the in-use mutex. A task holds no lock
// while it runs (only its marks), so it must not free memory it declared.
class RangesInUse {
 public:
  RangesInUse(const char* what, const std::vector<CheckedRange>& ranges);
  ~RangesInUse();
  RangesInUse(const RangesInUse&) = delete;
  RangesInUse& operator=(const RangesInUse&) = delete;
  // False: some range's memory is gone (reported); nothing is marked and the task must not run.
  bool ok() const { return ok_; }

 private:
  std::vector<uint64_t> ids_;  // marked allocations (with repeats)
  bool ok_ = true;
};

// Device memory the runtime allocates for itself (a condition handle's value, cond.cpp): a live
// device allocation like aclrtMalloc's, counted in simcann_device_bytes_live().
aclError runtime_device_malloc(void** devPtr, size_t size, const char* api);
void runtime_device_free(void* devPtr);

// ---- devices / threads ----
// Cores of one simulated die (an Ascend910B2; also used for the A3 part): what aclrtGetDeviceInfo
// and aclGetDeviceCapability report and the hardware default of the resource limits.
constexpr uint32_t kCubeCores = 24;
constexpr uint32_t kVectorCores = 48;

int current_device();  // the calling thread's device, or -1 if none was set
int device_or_default();

// ---- streams, events, capture ----
struct Capture;
struct Model;
struct CondHandle;  // cond.cpp
struct TaskGroup;

// A stream's task-group status (StreamTaskGroupStatus in hicann src/runtime/core/src/stream/
// stream.hpp): NONE, SAMPLE (between aclmdlRICaptureTaskGrpBegin/End on a capturing stream) or
// UPDATE (between aclmdlRICaptureTaskUpdateBegin/End on a non-capturing stream).
enum class GroupStatus { kNone, kSample, kUpdate };

struct QueuedTask {
  const char* name = "";
  Task fn;
  std::vector<CheckedRange> ranges;
  uint64_t seq = 0;
  bool delay = true;  // apply the per-task delay
  // Runs as the stream counts the task as done, under its lock (Note [Event completion order]).
  std::function<void()> on_completed;
};

struct Stream {
  int device = 0;
  uint32_t id = 0;
  bool is_default = false;
  // queue (mu)
  std::mutex mu;
  std::condition_variable cv;
  std::deque<QueuedTask> queue;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  bool stop = false;
  aclError sticky_error = ACL_SUCCESS;
  std::string sticky_msg;
  std::thread worker;
  // capture (guarded by capture_mutex())
  std::shared_ptr<Capture> capture;
  uint64_t last_capture_pos = 0;  // position of this stream's last captured task
  uint64_t last_capture_record_event = 0;  // event id if that last task is an event record
  // task groups (guarded by capture_mutex()); Note [Task groups] in capture.cpp
  GroupStatus group_status = GroupStatus::kNone;
  std::shared_ptr<TaskGroup> sampling;  // the group being captured on this stream (SAMPLE)
  std::shared_ptr<TaskGroup> updating;  // the group this stream is updating (UPDATE)
  // device resource limits set on this stream (reslimit.cpp; guarded by its mutex)
  uint32_t res_limit[2] = {0, 0};
  bool res_limit_set[2] = {false, false};
};

// Event flag bits. The ACL_EVENT_* values of acl_rt.h are the runtime's RT_EVENT_* bits (hicann
// pkg_inc/runtime/runtime/event.h); aclrtCreateEvent makes an RT_EVENT_DEFAULT event
// (src/runtime/api/api_c_event.cc rtEventCreate). Spelled out here: 2.9's headers lack some.
constexpr uint32_t kEventSync = 0x01U;            // ACL_EVENT_SYNC (RT_EVENT_DDSYNC_NS)
constexpr uint32_t kEventStreamProgress = 0x02U;  // ACL_EVENT_CAPTURE_STREAM_PROGRESS
constexpr uint32_t kEventDdsync = 0x04U;          // RT_EVENT_DDSYNC (no ACL name)
constexpr uint32_t kEventTimeLine = 0x08U;        // ACL_EVENT_TIME_LINE
constexpr uint32_t kEventDeviceOnly = 0x10U;      // ACL_EVENT_DEVICE_USE_ONLY (RT_EVENT_MC2)
constexpr uint32_t kEventExternal = 0x20U;        // ACL_EVENT_EXTERNAL
constexpr uint32_t kEventIpc = 0x40U;             // ACL_EVENT_IPC
constexpr uint32_t kEventDefault = kEventDdsync | kEventTimeLine | kEventStreamProgress;

struct Event {
  uint64_t id = 0;
  uint32_t flags = 0;  // kEvent* bits
  // Made by aclrtCreateEventExWithFlag (the runtime's "new mode", Event::IsNewMode), not by
  // aclrtCreateEvent / aclrtCreateEventWithFlag. Note [Events in capture] in stream.cpp.
  bool new_mode = false;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;   // generation of the last (eager) record
  uint64_t completed = 0;  // highest generation the device has reached
  double complete_time_ms = 0.0;
  // capture (guarded by capture_mutex())
  // Some eager record was ever issued (the runtime's Event::HasRecord: set by a record outside
  // capture, not cleared when it completes, not set by a captured record).
  bool has_record = false;
  // The capture that captured a record of it; it stays "captured" until that capture ends, even if
  // recorded eagerly meanwhile (Note [Events in capture]).
  std::shared_ptr<Capture> captured_by;
  Stream* captured_on = nullptr;
  bool captured_waited = false;         // some capture stream waited on the captured record
  bool captured_waited_by_origin = false;
};

struct CapturedTask {
  const char* name = "";
  Task fn;
  std::vector<CheckedRange> ranges;
  uint32_t stream_id = 0;
  // A conditional task (aclmdlRIAddCondTask): replay reads the handle's condition value and runs
  // the chosen sub models instead of `fn` (cond.cpp, run_cond_task).
  std::shared_ptr<CondHandle> cond;
};

// A task group (hicann stream.hpp `TaskGroup`): the positions, in its model, of the kernel tasks
// captured between aclmdlRICaptureTaskGrpBegin and aclmdlRICaptureTaskGrpEnd. The model owns it;
// aclrtTaskGrp is its address. Fields guarded by capture_mutex().
struct TaskGroup {
  std::weak_ptr<Model> model;
  uint32_t stream_id = 0;
  std::vector<size_t> tasks;  // indices into model->tasks, in capture order
  Stream* updater = nullptr;  // the stream updating it (hicann `isUpdate`)
  size_t next_update = 0;     // hicann `updateTaskIndex`
};

struct Model {
  uint32_t id = 0;
  int device = 0;
  // Sized at capture; an update replaces an element's fn/ranges under `mu` (Note [Task update]).
  std::vector<CapturedTask> tasks;
  std::vector<std::shared_ptr<TaskGroup>> groups;  // guarded by capture_mutex()
  bool capturing = true;                           // guarded by capture_mutex()
  // Conditional nodes (cond.cpp), guarded by capture_mutex(). A sub model is made by
  // aclmdlRIAddCondTask and captured with aclmdlRICaptureToModelRIBegin; `begun` once that call
  // succeeded (its status left NONE), `ready` once aclmdlRICaptureEnd succeeded (READY).
  bool sub = false;
  bool begun = true;
  bool ready = false;
  std::vector<std::shared_ptr<CondHandle>> cond_handles;  // made on this model, it owns them
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;  // replays enqueued and not finished
};

struct Capture {
  uint64_t id = 0;
  int device = 0;
  aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_GLOBAL;
  std::thread::id begin_thread;
  Stream* origin = nullptr;
  std::shared_ptr<Model> model;
  bool invalidated = false;
  bool active = true;
  uint64_t next_pos = 0;
  std::vector<Stream*> streams;        // origin first, then streams pulled in by event waits
  std::set<Stream*> open_groups;       // streams with a task group open (hicann taskGroupStmIds_)
  aclError group_error = ACL_SUCCESS;  // hicann taskGroupErrCode_: returned by TaskGrpEnd
};

std::mutex& capture_mutex();
Stream* to_stream(aclrtStream s);  // nullptr -> the current device's default stream
Event* to_event(aclrtEvent e);
bool any_active_capture_on_device(int device);  // caller holds capture_mutex()
aclError sync_stream(Stream* s, int32_t timeout_ms);
aclError sync_device(int device, int32_t timeout_ms);
// Registers a model replay and returns the model (nullptr if unknown / destroyed).
std::shared_ptr<Model> find_model(aclmdlRI m);
void run_task_checked(const char* name, const Task& fn, const std::vector<CheckedRange>& ranges,
                      Stream* s);
double now_ms();

// The API-entry trace (SIMCANN_TRACE=1): name + thread.
#define SIMCANN_API() ::simcann::log("%s", __func__)

}  // namespace simcann
