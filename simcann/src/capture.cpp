// Stream capture into a model (aclmdlRI): begin / end / info / execute / destroy.
//
// Sources (hicann/runtime): docs/zh/design/features/aclgraph.md (capture model, modes, statuses,
// cross-stream capture), src/runtime/feature/aclgraph/context_aclgraph.cc (StreamBeginCapture,
// StreamEndCapture, CheckCaptureModelValidity, IsCaptureModeSupport, CaptureModeEnter/Exit),
// src/runtime/feature/aclgraph/capture_model_utils.cc (CheckCaptureStreamThreadIsMatch,
// CheckCaptureModeSupport), include/external/acl/error_codes/rt_error_codes.h (codes), and the
// project facts note /work/shared/notes/ascend-facts.md ("CANN runtime semantics").
//
// Note [Replay order]: a model is the list of captured tasks in the order they were added, over
// all streams of the capture. Any cross-stream dependency was added (record) before its consumer
// (wait), so running the list in order on the replay stream respects every dependency; it only
// serializes work the hardware could overlap, which does not change results.
//
// Note [Replay reads memory at replay time]: a captured task is the same closure as an eager one;
// it dereferences its pointers when it runs, i.e. at each replay. Its ranges keep the allocation
// ids seen at capture time, so a replay over memory freed since then is reported.
//
// Note [Task groups]
// ~~~~~~~~~~~~~~~~~~
// Sources (hicann/runtime): docs/zh/api_ref/15_model_running_instance__management.md
// (aclmdlRICaptureTaskGrpBegin/End, aclmdlRICaptureTaskUpdateBegin/End), docs/zh/dev_guide/
// 04-03_task_update.md, src/acl/aclrt_impl/model_ri.cpp (null checks),
// src/runtime/feature/aclgraph/api_error_aclgraph.cc (capture-status checks),
// src/runtime/feature/aclgraph/context_aclgraph.cc (StreamBeginTaskGrp, StreamEndTaskGrp,
// StreamBeginTaskUpdate, StreamEndTaskUpdate, CheckCaptureModelValidity),
// src/runtime/core/src/stream/stream.cc (AllocTask, UpdateTask, PackingTaskGroup,
// IsTaskGroupBreak, SetTaskGroupErrCode),
// src/runtime/feature/aclgraph/v100/capture_adapt_v100.cc (TaskTypeIsSupportTaskGroup),
// src/runtime/core/src/launch/aix_stars.cc (InternalUpdateTaskPrepare; the update is submitted as
// tasks of the update stream), src/runtime/core/src/common/errcode_manage.cc (rt -> acl codes).
//  * TaskGrpBegin(s): s must be capturing (107029) and in no group status (107033); s enters
//    SAMPLE. Every task captured on s until TaskGrpEnd joins the group -- only kernels may
//    (TaskTypeIsSupportTaskGroup: AI Core / Vector Core tasks); any other task (memcpy, memset,
//    event record/wait, value write/wait, host function) fails with 507009 and invalidates the
//    capture (SetTaskGroupErrCode -> TerminateCapture). While a group is open on one stream of a
//    capture, a task captured on another stream of it fails with 107034 and invalidates the capture
//    (IsTaskGroupBreak). Both codes are remembered and returned by every later TaskGrpEnd of the
//    capture, with a NULL handle.
//  * TaskGrpEnd(s, &h): s must be capturing (107029) and in SAMPLE (107033); h is the group (the
//    model owns it), or NULL with the remembered error / 507903 if the capture is invalidated.
//  * aclmdlRICaptureEnd with a group still open: 107033, model destroyed
//    (CheckCaptureModelValidity, before the join check). The stream keeps its SAMPLE status:
//    only TaskGrpEnd/TaskUpdateEnd reset it (ResetCaptureInfo resets the capture state only), so
//    its later TaskGrpBegin or TaskUpdateBegin fail with 107033 and a TaskGrpEnd with 507000 (no
//    current group).
//  * TaskUpdateBegin(s, h): s must not be capturing (107027), in no group status (107033), h not
//    being updated by another stream (107033, "the handle only can be updated by one stream").
//    s enters UPDATE. Capture status is unchanged: aclmdlRICaptureGetInfo(s) reports NONE.
//  * In UPDATE, each kernel launched on s replaces the next task of the group (UpdateTask):
//    beyond the group's size 507000; a kernel of another type 507000 (RT_ERROR_KERNEL_TYPE: mix,
//    func and attr type must match -- modelled as "same aclnn op", stricter than hardware, which
//    cannot be told kernels apart otherwise). Every other task on s fails with 507009 (AllocTask
//    with UpdateTaskFlag::NOT_SUPPORT): nothing else may be launched on an updating stream.
//  * TaskUpdateEnd(s): s must not be capturing (107027) and be in UPDATE (107033); s leaves
//    UPDATE; fewer kernels than the group holds: 507000, the ones launched stay updated.
// A handle the runtime never returned, or whose model was destroyed, is dereferenced by the
// runtime (undefined behaviour); the simulator reports a violation and returns 100000.
//
// Note [Task update]: the runtime submits an update as tasks of the update stream (the new
// arguments' H2D copy and an SQE update, aix_stars.cc), so the model changes when the update
// stream runs them, not when the kernel is launched: the simulator queues one task on the update
// stream that swaps the captured closure (and its ranges, resolved at the launch) into the model.
// A replay reads each task as it reaches it, so a replay ordered after the update (by a stream
// wait, e.g. torch_npu's aclrtValueWait on the update stream's aclrtValueWrite) runs the new
// kernel, and one not ordered after it may run either.
//
// Conditional nodes (sub models, condition handles) are in cond.cpp; this file owns the model
// registry and the capture state they use (capture.h).
#include <cstdio>
#include <cstring>
#include <set>

#include "capture.h"

namespace simcann {
namespace {

struct Models {
  std::map<Model*, std::shared_ptr<Model>> live;
  std::set<TaskGroup*> live_groups;              // handles TaskGrpEnd returned, of live models
  std::vector<std::shared_ptr<Capture>> active;  // active captures (any device)
  uint32_t next_model_id = 1;
  uint64_t next_capture_id = 1;
};

Models& models() {  // guarded by capture_mutex()
  static Models* m = new Models();
  return *m;
}

thread_local aclmdlRICaptureMode t_exchange_mode = ACL_MODEL_RI_CAPTURE_MODE_GLOBAL;

constexpr int kModeMax = 3;

void forget_groups(Model* m) {
  for (auto& g : m->groups) models().live_groups.erase(g.get());
}

// Device memory of destroyed condition handles, freed once capture_mutex() is released (declare
// it before the lock: destructors run in reverse order).
struct DeferredFree {
  std::vector<void*> ptrs;
  ~DeferredFree() { free_cond_memory(ptrs); }
};

// Ends a capture: every stream leaves it, events it captured report their pre-capture state.
// Streams drop the group they were capturing but keep their group status (Note [Task groups]).
// `destroy_model`: the capture failed and its model is destroyed -- unless it is a sub model,
// which is only destroyed with its parent (context_aclgraph.cc ClearCaptureModel: "子model不在这里
// 单独销毁，随父model销毁"). Device memory to free goes to `freed`.
void finish_capture(const std::shared_ptr<Capture>& c, bool destroy_model, DeferredFree* freed) {
  c->active = false;
  c->model->capturing = false;
  for (Stream* s : c->streams) {
    if (s->capture == c) s->capture.reset();
    s->last_capture_pos = 0;
    s->last_capture_record_event = 0;
    s->sampling.reset();
  }
  c->open_groups.clear();
  auto& act = models().active;
  for (auto it = act.begin(); it != act.end(); ++it) {
    if (*it == c) {
      act.erase(it);
      break;
    }
  }
  if (destroy_model && !c->model->sub) {
    forget_groups(c->model.get());
    destroy_cond_nodes(*c->model, &freed->ptrs);
    models().live.erase(c->model.get());
  }
}

// A task refused inside a task group: the capture is invalidated and TaskGrpEnd will return
// `code` (SetTaskGroupErrCode, stream.cc). Note [Task groups].
aclError fail_group(const std::shared_ptr<Capture>& c, aclError code) {
  c->invalidated = true;
  c->group_error = code;
  return code;
}

// Adds one task to the capture of `s`; Note [Replay order].
aclError add_captured(Stream* s, const char* name, Task fn, std::vector<CheckedRange> ranges,
                      std::shared_ptr<CondHandle> cond = nullptr) {
  const std::shared_ptr<Capture>& c = s->capture;
  if (c->invalidated) {
    set_error("simcann: %s on stream %u: its capture is invalidated (rule 507903)", name, s->id);
    return ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
  }
  // Note [Task groups]: IsTaskGroupBreak (stream_capture.cc), PackingTaskGroup (stream.cc).
  if (!s->sampling && !c->open_groups.empty()) {
    set_error("simcann: %s on stream %u while a task group is open on stream %u of the same "
              "capture (rule 107034); the capture is invalidated",
              name, s->id, (*c->open_groups.begin())->id);
    return fail_group(c, ACL_ERROR_STREAM_TASK_GROUP_INTR);
  }
  if (s->sampling && !is_kernel_task(name)) {
    set_error("simcann: %s in a task group on stream %u: only kernels (aclnn ops) can be added to "
              "a task group (rule 507009); the capture is invalidated",
              name, s->id);
    return fail_group(c, ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT);
  }
  Config& cfg = config();
  int64_t n = ++cfg.n_captured_tasks;
  if (cfg.invalidate_capture_at.load() > 0 && n == cfg.invalidate_capture_at.load()) {
    // A capture becomes INVALIDATED when the runtime fails to add a captured task (facts note).
    c->invalidated = true;
    set_error("simcann: %s: injected failure to add a captured task "
              "(SIMCANN_INVALIDATE_CAPTURE_AT=%lld); the capture is invalidated",
              name, static_cast<long long>(n));
    return ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
  }
  CapturedTask t;
  t.name = name;
  t.fn = std::move(fn);
  t.ranges = std::move(ranges);
  t.stream_id = s->id;
  t.cond = std::move(cond);
  c->model->tasks.push_back(std::move(t));
  if (s->sampling) s->sampling->tasks.push_back(c->model->tasks.size() - 1);
  s->last_capture_pos = ++c->next_pos;
  s->last_capture_record_event = 0;
  log("captured %s on stream %u into model %u", name, s->id, c->model->id);
  return ACL_SUCCESS;
}

int thread_capture_mode_locked() {
  int m = kModeMax;
  for (auto& c : models().active) {
    if (c->begin_thread == std::this_thread::get_id()) m = std::min(m, static_cast<int>(c->mode));
  }
  return m;
}

int context_capture_mode_locked(int device) {
  int m = kModeMax;
  for (auto& c : models().active) {
    if (c->device == device) m = std::min(m, static_cast<int>(c->mode));
  }
  return m;
}

// CheckCaptureModelValidity (context_aclgraph.cc): every stream pulled into the capture must end
// with an event record that a capture stream waited on, and some such event must have been waited
// on by the origin stream. Returns nullptr if joined, else the first unjoined stream.
Stream* unjoined_stream(const Capture& c) {
  bool any_side = false;
  bool origin_waited = false;
  for (Stream* s : c.streams) {
    if (s == c.origin) continue;
    any_side = true;
    auto* e = reinterpret_cast<Event*>(s->last_capture_record_event);
    if (e == nullptr || !e->captured_waited) return s;
    origin_waited = origin_waited || e->captured_waited_by_origin;
  }
  return any_side && !origin_waited ? c.streams.back() : nullptr;
}

}  // namespace

std::mutex& capture_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

bool any_active_capture_on_device(int device) {
  for (auto& c : models().active) {
    if (c->device == device) return true;
  }
  return false;
}

aclError capture_add_task(Stream* s, const char* name, Task fn, std::vector<CheckedRange> ranges) {
  return add_captured(s, name, std::move(fn), std::move(ranges));
}

aclError capture_add_cond_task(Stream* s, std::shared_ptr<CondHandle> h,
                               std::vector<CheckedRange> ranges) {
  return add_captured(
      s, "aclmdlRIAddCondTask", [] { return ACL_SUCCESS; }, std::move(ranges), std::move(h));
}

std::shared_ptr<Model> new_model(int device, bool sub) {
  Models& ms = models();
  auto m = std::make_shared<Model>();
  m->id = ms.next_model_id++;
  m->device = device;
  m->sub = sub;
  m->capturing = !sub;
  m->begun = !sub;
  ms.live[m.get()] = m;
  return m;
}

void forget_model(Model* m) {
  forget_groups(m);
  models().live.erase(m);
}

std::shared_ptr<Capture> capture_of(const Model* m) {
  for (auto& c : models().active) {
    if (c->model.get() == m) return c;
  }
  return nullptr;
}

std::shared_ptr<Capture> start_capture(Stream* s, aclmdlRICaptureMode mode,
                                       std::shared_ptr<Model> m) {
  Models& ms = models();
  auto c = std::make_shared<Capture>();
  c->id = ms.next_capture_id++;
  c->device = s->device;
  c->mode = mode;
  c->begin_thread = std::this_thread::get_id();
  c->origin = s;
  m->capturing = true;
  m->begun = true;
  c->model = std::move(m);
  c->streams.push_back(s);
  ms.active.push_back(c);
  s->capture = c;
  s->last_capture_pos = 0;
  s->last_capture_record_event = 0;
  return c;
}

void replay_tasks(Model& m, Stream* s) {
  // Each task is read when the replay reaches it: an update may replace it meanwhile
  // (Note [Task update]).
  for (size_t i = 0; i < m.tasks.size(); ++i) {
    int64_t us = config().task_delay_us.load();
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
    CapturedTask ct;
    {
      std::lock_guard<std::mutex> lock(m.mu);
      ct = m.tasks[i];
    }
    if (ct.cond) {
      run_cond_task(*ct.cond, s);
    } else {
      run_task_checked(ct.name, ct.fn, ct.ranges, s);
    }
  }
}

aclError capture_record_event(Stream* s, Event* e) {
  aclError err = add_captured(s, "aclrtRecordEvent", [] { return ACL_SUCCESS; }, {});
  if (err != ACL_SUCCESS) return err;
  s->last_capture_record_event = reinterpret_cast<uintptr_t>(e);
  e->captured_by = s->capture;
  e->captured_on = s;
  e->captured_waited = false;
  e->captured_waited_by_origin = false;
  return ACL_SUCCESS;
}

namespace {

// aclrtStreamWaitEvent on a capturing stream for an event no running capture recorded (Note
// [Events in capture] in stream.cpp; ApiImpl::StreamWaitEvent, Event::WaitSendCheck).
aclError wait_uncaptured_event(Stream* s, Event* e) {
  if (!e->new_mode && e->flags != kEventExternal) {
    set_error("simcann: aclrtStreamWaitEvent on capturing stream %u: an event made by "
              "aclrtCreateEvent / aclrtCreateEventWithFlag is not supported in a capture (rule "
              "207000; the capture stays active)",
              s->id);
    return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
  }
  if (e->new_mode && e->has_record) {
    set_error("simcann: aclrtStreamWaitEvent on capturing stream %u: the event was recorded "
              "outside any running capture, so its record is not in the model (rule 107024, "
              "RT_ERROR_STREAM_CAPTURE_ISOLATION; wait on it before the capture, or use "
              "ACL_EVENT_WAIT_EXTERNAL; the capture stays active)",
              s->id);
    return ACL_ERROR_RT_CAPTURE_DEPENDENCY;
  }
  if (e->new_mode) {
    log("aclrtStreamWaitEvent on capturing stream %u: event never recorded outside a capture: "
        "nothing to wait for, nothing captured",
        s->id);
    return ACL_SUCCESS;
  }
  // An ACL_EVENT_EXTERNAL event: the runtime captures a wait on it; external events are not
  // modelled (README "Not modelled"): a no-op task.
  return add_captured(s, "aclrtStreamWaitEvent", [] { return ACL_SUCCESS; }, {});
}

}  // namespace

// aclrtStreamWaitEvent on an event captured by a running capture pulls the waiting stream into
// that capture (facts note: "cross-stream capture"; aclgraph.md, multi-stream capture).
aclError capture_wait_event(Stream* s, Event* e) {
  if (!e->captured_by || !e->captured_by->active) return wait_uncaptured_event(s, e);
  std::shared_ptr<Capture> ec = e->captured_by;
  if (s->capture && s->capture != ec) {
    set_error("simcann: aclrtStreamWaitEvent: the event was captured by another capture than the "
              "one stream %u belongs to (rule 107024)",
              s->id);
    return ACL_ERROR_RT_CAPTURE_DEPENDENCY;
  }
  if (!s->capture) {
    s->capture = ec;
    ec->streams.push_back(s);
    log("stream %u joins the capture of model %u", s->id, ec->model->id);
  }
  aclError err = add_captured(s, "aclrtStreamWaitEvent", [] { return ACL_SUCCESS; }, {});
  if (err != ACL_SUCCESS) return err;
  e->captured_waited = true;
  if (s == ec->origin) e->captured_waited_by_origin = true;
  return ACL_SUCCESS;
}

bool is_kernel_task(const char* name) { return std::strncmp(name, "aclnn", 5) == 0; }

// Note [Task groups], [Task update]: UpdateTask (stream.cc), InternalUpdateTaskPrepare
// (aix_stars.cc).
aclError update_add_task(Stream* s, const char* name, Task fn, std::vector<CheckedRange> ranges) {
  if (!is_kernel_task(name)) {
    set_error("simcann: %s on stream %u, which is updating a task group: only kernels (aclnn ops) "
              "may be launched on an updating stream (rule 507009)",
              name, s->id);
    return ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT;
  }
  const std::shared_ptr<TaskGroup>& g = s->updating;
  std::shared_ptr<Model> m = g->model.lock();
  if (!m || models().live.count(m.get()) == 0) {
    set_error("simcann: %s on stream %u: the model of the task group it updates was destroyed "
              "(rule 507000)",
              name, s->id);
    return ACL_ERROR_RT_INTERNAL_ERROR;
  }
  size_t index = g->next_update;
  if (index >= g->tasks.size()) {
    set_error("simcann: %s on stream %u: more tasks than the task group holds (%zu) (rule 507000)",
              name, s->id, g->tasks.size());
    return ACL_ERROR_RT_INTERNAL_ERROR;
  }
  g->next_update = index + 1;  // the runtime counts the task before checking its kernel
  size_t pos = g->tasks[index];
  const char* old_name = m->tasks[pos].name;
  if (std::strcmp(old_name, name) != 0) {
    set_error("simcann: %s on stream %u cannot update task %zu of the group, a %s: the kernel type "
              "must match (rule 507000)",
              name, s->id, index, old_name);
    return ACL_ERROR_RT_INTERNAL_ERROR;
  }
  log("update: %s on stream %u replaces task %zu of model %u", name, s->id, pos, m->id);
  QueuedTask t;
  t.name = "aclmdlRICaptureTaskUpdate";
  t.fn = [m, pos, fn = std::move(fn), ranges = std::move(ranges)] {
    std::lock_guard<std::mutex> lock(m->mu);
    m->tasks[pos].fn = fn;
    m->tasks[pos].ranges = ranges;
    return ACL_SUCCESS;
  };
  push_task(s, std::move(t));
  return ACL_SUCCESS;
}

aclError refuse_if_updating(Stream* s, const char* api) {
  if (s->group_status != GroupStatus::kUpdate) return ACL_SUCCESS;
  set_error("simcann: %s on stream %u, which is updating a task group: only kernels (aclnn ops) "
            "may be launched on an updating stream (rule 507009)",
            api, s->id);
  return ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT;
}

std::shared_ptr<Model> find_model(aclmdlRI m) {
  auto& live = models().live;
  auto it = live.find(static_cast<Model*>(m));
  return it == live.end() ? nullptr : it->second;
}

aclError check_sync_mode_impl(const char* api) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  int ctx = context_capture_mode_locked(device_or_default());
  if (ctx == kModeMax) return ACL_SUCCESS;
  int thr = thread_capture_mode_locked();
  int ex = t_exchange_mode;
  bool refuse = false;
  if (ex == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) {
    refuse = ctx == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL ||
             thr == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL;
  } else if (ex == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL) {
    refuse = thr == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL ||
             thr == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL;
  }
  if (!refuse) return ACL_SUCCESS;
  set_error("simcann: %s while a capture is active (context capture mode %d, this thread's "
            "exchange mode %d): rule 107030, only allowed in RELAXED mode",
            api, ctx, ex);
  return ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
}

// Writes the task list of a model as JSON (aclmdlRIDebugJsonPrint, see abi_neutral.cpp).
int debug_json(void* modelRI, const char* path) {
  std::lock_guard<std::mutex> lock(capture_mutex());
  std::shared_ptr<Model> m = find_model(modelRI);
  if (!m || path == nullptr) return ACL_ERROR_INVALID_PARAM;
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::fprintf(f, "{\"model\": %u, \"tasks\": [", m->id);
  for (size_t i = 0; i < m->tasks.size(); ++i) {
    std::fprintf(f, "%s{\"stream\": %u, \"name\": \"%s\"}", i ? ", " : "", m->tasks[i].stream_id,
                 m->tasks[i].name);
  }
  std::fprintf(f, "]}\n");
  std::fclose(f);
  return ACL_SUCCESS;
}

}  // namespace simcann

using namespace simcann;

extern "C" {

ACL_FUNC_VISIBILITY aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
  SIMCANN_API();
  if (stream == nullptr) {
    set_error("simcann: aclmdlRICaptureBegin: null stream (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  if (static_cast<int>(mode) < 0 || static_cast<int>(mode) >= kModeMax) {
    return ACL_ERROR_INVALID_PARAM;
  }
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (s->capture) {
    set_error("simcann: aclmdlRICaptureBegin: stream %u is already capturing (rule 107027)", s->id);
    return ACL_ERROR_RT_STREAM_CAPTURED;
  }
  Config& cfg = config();
  int64_t n = ++cfg.n_capture_begin;
  if (cfg.fail_capture_begin_at.load() > 0 && n == cfg.fail_capture_begin_at.load()) {
    set_error("simcann: aclmdlRICaptureBegin: injected failure to create the capture model "
              "(SIMCANN_FAIL_CAPTURE_BEGIN_AT=%lld)",
              static_cast<long long>(n));
    return ACL_ERROR_RT_MEMORY_ALLOCATION;
  }
  std::shared_ptr<Capture> c = start_capture(s, mode, new_model(s->device, false));
  log("capture begin: stream %u, mode %d, model %u", s->id, static_cast<int>(mode), c->model->id);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclmdlRICaptureGetInfo(aclrtStream stream,
                                                    aclmdlRICaptureStatus* status,
                                                    aclmdlRI* modelRI) {
  SIMCANN_API();
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  aclmdlRICaptureStatus st = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
  aclmdlRI m = nullptr;
  if (s->capture) {
    st = s->capture->invalidated ? ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
                                 : ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
    m = s->capture->model.get();
  }
  if (status) *status = st;
  if (modelRI) *modelRI = m;
  return ACL_SUCCESS;
}

// The checks of StreamEndCapture that fail the end and destroy the model (a root model's; a sub
// model's is kept): the error, set_error called, or ACL_SUCCESS.
static aclError captured_model_error(const Capture& c, const Stream* s) {
  if (c.invalidated) {
    set_error("simcann: aclmdlRICaptureEnd: the capture was invalidated (rule 507903); the model "
              "is destroyed");
    return ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
  }
  // CheckSubModelsIsEndCapture (context_aclgraph.cc, capture_model.cc): every sub model made by a
  // conditional task of this model (recursively) must have ended its capture (READY); one still
  // capturing, never captured or whose capture failed fails the end with
  // ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING and destroys this model (unless it is a sub model).
  const Model* pending = nullptr;
  if (!sub_models_ready(*c.model, &pending)) {
    set_error("simcann: aclmdlRICaptureEnd: sub model %u of model %u has not ended its capture "
              "(rule %d, ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING); the model is destroyed",
              pending->id, c.model->id, ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING);
    return ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING;
  }
  if (!c.open_groups.empty()) {
    // CheckCaptureModelValidity (context_aclgraph.cc) checks open task groups first.
    set_error("simcann: aclmdlRICaptureEnd: a task group is still open on stream %u (rule 107033); "
              "the model is destroyed",
              (*c.open_groups.begin())->id);
    return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  }
  if (Stream* u = unjoined_stream(c)) {
    set_error("simcann: aclmdlRICaptureEnd: stream %u joined the capture but was not joined back "
              "to the origin stream %u (rule 107025); the model is destroyed",
              u->id, s->id);
    return ACL_ERROR_RT_STREAM_UNJOINED;
  }
  return ACL_SUCCESS;
}

// StreamEndCapture (context_aclgraph.cc): order of checks and what each failure leaves behind.
// The output model (v100/api_impl_aclgraph.cc ApiImpl::StreamEndCapture): the capture of a root
// model needs a non-null modelRI (107000, the capture stays active) and a failure sets it to NULL;
// a sub model's capture (conditional nodes, cond.cpp) may pass NULL and a failure -- or a stream
// that is not capturing -- leaves *modelRI untouched; success writes the model.
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* modelRI) {
  SIMCANN_API();
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream* s = to_stream(stream);
  DeferredFree freed;
  std::lock_guard<std::mutex> lock(capture_mutex());
  std::shared_ptr<Capture> c = s->capture;
  if (!c) {
    set_error("simcann: aclmdlRICaptureEnd: stream %u is not capturing (rule 107029)", s->id);
    return ACL_ERROR_RT_STREAM_NOT_CAPTURED;
  }
  const bool root = !c->model->sub;
  if (root && modelRI == nullptr) {
    set_error("simcann: aclmdlRICaptureEnd: null modelRI for the capture of a root model (rule "
              "107000); the capture stays active");
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  if (root) *modelRI = nullptr;
  if (c->origin != s) {
    set_error("simcann: aclmdlRICaptureEnd: the capture was not begun on stream %u, it joined "
              "through an event (rule 107036)",
              s->id);
    return ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED;
  }
  if (c->begin_thread != std::this_thread::get_id() &&
      c->mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
    // The source exits the capture without destroying the model (ClearCaptureModel(ctx, stm)).
    set_error("simcann: aclmdlRICaptureEnd from another thread than aclmdlRICaptureBegin in a "
              "non-RELAXED capture (rule 107038); the stream leaves the capture");
    finish_capture(c, false, &freed);
    return ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD;
  }
  Config& cfg = config();
  int64_t n = ++cfg.n_capture_end;
  if (cfg.fail_capture_end_at.load() > 0 && n == cfg.fail_capture_end_at.load()) {
    c->invalidated = true;
    set_error("simcann: injected capture invalidation (SIMCANN_FAIL_CAPTURE_END_AT=%lld)",
              static_cast<long long>(n));
  }
  if (aclError err = captured_model_error(*c, s); err != ACL_SUCCESS) {
    finish_capture(c, true, &freed);  // the model is destroyed
    return err;
  }
  finish_capture(c, false, &freed);
  c->model->ready = true;
  if (modelRI) *modelRI = c->model.get();
  log("capture end: stream %u, model %u, %zu tasks", s->id, c->model->id, c->model->tasks.size());
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode* mode) {
  SIMCANN_API();
  if (mode == nullptr) return ACL_ERROR_INVALID_PARAM;
  aclmdlRICaptureMode old = t_exchange_mode;
  t_exchange_mode = *mode;
  *mode = old;
  return ACL_SUCCESS;
}

// Replays the model on `stream`: each captured task runs again, in capture order, reading memory
// as it is now (Note [Replay reads memory at replay time]).
ACL_FUNC_VISIBILITY aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
  SIMCANN_API();
  Stream* s = to_stream(stream);
  std::shared_ptr<Model> m;
  {
    std::lock_guard<std::mutex> lock(capture_mutex());
    m = find_model(modelRI);
    if (!m) {
      set_error("simcann: aclmdlRIExecuteAsync: unknown or destroyed model %p", modelRI);
      return ACL_ERROR_INVALID_PARAM;
    }
    // Order of api_error.cc ApiErrorDecorator::ModelExecute, then CaptureModel::CheckExecuteReady.
    if (s->capture) {
      set_error("simcann: aclmdlRIExecuteAsync on stream %u, which is capturing (rule 107027)",
                s->id);
      return ACL_ERROR_RT_STREAM_CAPTURED;
    }
    if (m->sub) {
      set_error("simcann: aclmdlRIExecuteAsync: model %u is a sub model of a conditional task; "
                "only its root model executes (rule 207000, api_error.cc ModelExecute)",
                m->id);
      return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    if (m->capturing) {
      set_error("simcann: aclmdlRIExecuteAsync: model %u is still being captured (rule 107026)",
                m->id);
      return ACL_ERROR_RT_MODEL_CAPTURED;
    }
    // CaptureModel::PreModelExecute assigns the default condition values before the execute task
    // is allocated (Note [Conditional nodes] in cond.cpp).
    assign_default_cond_values(*m);
    // The model-execute task is no kernel (model.cc AllocTask): Note [Task groups].
    aclError e = refuse_if_updating(s, "aclmdlRIExecuteAsync");
    if (e != ACL_SUCCESS) return e;
  }
  {
    std::lock_guard<std::mutex> lock(m->mu);
    ++m->running;
  }
  QueuedTask t;
  t.name = "aclmdlRIExecuteAsync";
  t.delay = false;
  t.fn = [m, s] {
    replay_tasks(*m, s);
    {
      std::lock_guard<std::mutex> lock(m->mu);
      --m->running;
    }
    m->cv.notify_all();
    return ACL_SUCCESS;
  };
  push_task(s, std::move(t));
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclmdlRIDestroy(aclmdlRI modelRI) {
  SIMCANN_API();
  Config& cfg = config();
  const int64_t n = ++cfg.n_model_destroy;
  if (cfg.fail_model_destroy_at.load() > 0 && n == cfg.fail_model_destroy_at.load()) {
    // Fault injection: a runtime failure before anything changed (the model stays valid and
    // replayable), as a runtime internal error (507000) leaves it.
    set_error("simcann: aclmdlRIDestroy: injected failure (simcann_set_fault model_destroy)");
    return ACL_ERROR_RT_INTERNAL_ERROR;
  }
  std::shared_ptr<Model> m;
  {
    std::lock_guard<std::mutex> lock(capture_mutex());
    m = find_model(modelRI);
    if (!m) {
      set_error("simcann: aclmdlRIDestroy: unknown or destroyed model %p", modelRI);
      return ACL_ERROR_INVALID_PARAM;
    }
    if (m->sub) {
      // api_error.cc ApiErrorDecorator::ModelDestroy; 15_model_running_instance__management.md
      // (aclmdlRICaptureToModelRIBegin: "该模型运行实例不支持aclmdlRIDestroy").
      set_error("simcann: aclmdlRIDestroy: model %u is a sub model of a conditional task; it is "
                "destroyed with its root model (rule 207000)",
                m->id);
      return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    }
    if (m->capturing) {
      set_error("simcann: aclmdlRIDestroy: model %u is being captured (rule 107026)", m->id);
      return ACL_ERROR_RT_MODEL_CAPTURED;
    }
    forget_groups(m.get());
    models().live.erase(m.get());
  }
  // Destroying a running model waits for its replays (facts note).
  {
    std::unique_lock<std::mutex> lock(m->mu);
    m->cv.wait(lock, [&m] { return m->running == 0; });
  }
  // Then what it owns goes: condition handles (their device memory) and sub models
  // (capture_model.cc ~CaptureModel deletes its condHandles_; cond_handle.cc ~CondHandle destroys
  // the sub models and frees the condition value).
  DeferredFree freed;
  std::lock_guard<std::mutex> lock(capture_mutex());
  destroy_cond_nodes(*m, &freed.ptrs);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclmdlRIGetId(aclmdlRI modelRI, uint32_t* modelRIId) {
  SIMCANN_API();
  std::lock_guard<std::mutex> lock(capture_mutex());
  std::shared_ptr<Model> m = find_model(modelRI);
  if (!m || modelRIId == nullptr) return ACL_ERROR_INVALID_PARAM;
  *modelRIId = m->id;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclmdlRIDebugPrint(aclmdlRI modelRI) {
  SIMCANN_API();
  std::lock_guard<std::mutex> lock(capture_mutex());
  std::shared_ptr<Model> m = find_model(modelRI);
  if (!m) return ACL_ERROR_INVALID_PARAM;
  std::printf("simcann model %u: %zu tasks\n", m->id, m->tasks.size());
  for (size_t i = 0; i < m->tasks.size(); ++i) {
    std::printf("  [%zu] stream %u %s\n", i, m->tasks[i].stream_id, m->tasks[i].name);
  }
  std::fflush(stdout);
  return ACL_SUCCESS;
}

// Task groups and task update: Note [Task groups] and Note [Task update] at the top.
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureTaskGrpBegin(aclrtStream stream) {
  SIMCANN_API();
  if (stream == nullptr) {
    set_error("simcann: aclmdlRICaptureTaskGrpBegin: null stream (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (!s->capture) {
    set_error("simcann: aclmdlRICaptureTaskGrpBegin on stream %u, which is not capturing "
              "(rule 107029)",
              s->id);
    return ACL_ERROR_RT_STREAM_NOT_CAPTURED;
  }
  if (s->group_status != GroupStatus::kNone) {
    set_error("simcann: aclmdlRICaptureTaskGrpBegin on stream %u: a task group is already begun on "
              "it, or it is updating one (rule 107033)",
              s->id);
    return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  }
  auto g = std::make_shared<TaskGroup>();
  g->model = s->capture->model;
  g->stream_id = s->id;
  s->sampling = g;
  s->group_status = GroupStatus::kSample;
  s->capture->open_groups.insert(s);
  log("task group begin on stream %u, model %u", s->id, s->capture->model->id);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclmdlRICaptureTaskGrpEnd(aclrtStream stream, aclrtTaskGrp* handle) {
  SIMCANN_API();
  if (stream == nullptr || handle == nullptr) {
    set_error("simcann: aclmdlRICaptureTaskGrpEnd: null stream or handle (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  *handle = nullptr;
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  std::shared_ptr<Capture> c = s->capture;
  if (!c) {
    set_error("simcann: aclmdlRICaptureTaskGrpEnd on stream %u, which is not capturing "
              "(rule 107029)",
              s->id);
    return ACL_ERROR_RT_STREAM_NOT_CAPTURED;
  }
  if (s->group_status != GroupStatus::kSample) {
    set_error("simcann: aclmdlRICaptureTaskGrpEnd on stream %u, which has not begun a task group "
              "(rule 107033)",
              s->id);
    return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  }
  if (!s->sampling) {
    // SAMPLE left over from a capture that ended with the group open (Note [Task groups]).
    set_error("simcann: aclmdlRICaptureTaskGrpEnd on stream %u: its task group belonged to a "
              "capture that has ended (rule 507000)",
              s->id);
    return ACL_ERROR_RT_INTERNAL_ERROR;
  }
  std::shared_ptr<TaskGroup> g = std::move(s->sampling);
  s->sampling.reset();
  c->open_groups.erase(s);
  s->group_status = GroupStatus::kNone;
  if (c->group_error != ACL_SUCCESS) {
    set_error("simcann: aclmdlRICaptureTaskGrpEnd on stream %u: a task of the capture was refused "
              "(rule %d); no handle",
              s->id, c->group_error);
    return c->group_error;
  }
  if (c->invalidated) {
    set_error("simcann: aclmdlRICaptureTaskGrpEnd on stream %u: the capture is invalidated "
              "(rule 507903); no handle",
              s->id);
    return ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
  }
  c->model->groups.push_back(g);
  models().live_groups.insert(g.get());
  *handle = g.get();
  log("task group end on stream %u: %zu tasks of model %u", s->id, g->tasks.size(),
      c->model->id);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclmdlRICaptureTaskUpdateBegin(aclrtStream stream,
                                                            aclrtTaskGrp handle) {
  SIMCANN_API();
  if (stream == nullptr || handle == nullptr) {
    set_error("simcann: aclmdlRICaptureTaskUpdateBegin: null stream or handle (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (s->capture) {
    set_error("simcann: aclmdlRICaptureTaskUpdateBegin on stream %u, which is capturing "
              "(rule 107027)",
              s->id);
    return ACL_ERROR_RT_STREAM_CAPTURED;
  }
  if (s->group_status != GroupStatus::kNone) {
    set_error("simcann: aclmdlRICaptureTaskUpdateBegin on stream %u, which is already updating or "
              "capturing a task group (rule 107033)",
              s->id);
    return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  }
  auto* key = static_cast<TaskGroup*>(handle);
  if (models().live_groups.count(key) == 0) {
    set_error("simcann: aclmdlRICaptureTaskUpdateBegin: %p is no task group of a live model",
              handle);
    violation("aclmdlRICaptureTaskUpdateBegin: handle %p is no task group of a live model (never "
              "returned by aclmdlRICaptureTaskGrpEnd, or its model was destroyed); the runtime "
              "would dereference it",
              handle);
    return ACL_ERROR_INVALID_PARAM;
  }
  std::shared_ptr<TaskGroup> g;
  for (auto& cand : key->model.lock()->groups) {
    if (cand.get() == key) g = cand;
  }
  if (g->updater != nullptr) {
    set_error("simcann: aclmdlRICaptureTaskUpdateBegin on stream %u: stream %u is updating this "
              "task group (rule 107033)",
              s->id, g->updater->id);
    return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  }
  g->updater = s;
  g->next_update = 0;
  s->updating = g;
  s->group_status = GroupStatus::kUpdate;
  log("task update begin on stream %u: %zu tasks", s->id, g->tasks.size());
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclmdlRICaptureTaskUpdateEnd(aclrtStream stream) {
  SIMCANN_API();
  if (stream == nullptr) {
    set_error("simcann: aclmdlRICaptureTaskUpdateEnd: null stream (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (s->capture) {
    set_error("simcann: aclmdlRICaptureTaskUpdateEnd on stream %u, which is capturing "
              "(rule 107027)",
              s->id);
    return ACL_ERROR_RT_STREAM_CAPTURED;
  }
  if (s->group_status != GroupStatus::kUpdate) {
    set_error("simcann: aclmdlRICaptureTaskUpdateEnd on stream %u, which is not updating a task "
              "group (rule 107033)",
              s->id);
    return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  }
  std::shared_ptr<TaskGroup> g = std::move(s->updating);
  s->updating.reset();
  s->group_status = GroupStatus::kNone;
  size_t done = g->next_update;
  g->updater = nullptr;
  g->next_update = 0;
  if (done != g->tasks.size()) {
    set_error("simcann: aclmdlRICaptureTaskUpdateEnd on stream %u: %zu of the group's %zu tasks "
              "were updated (rule 507000)",
              s->id, done, g->tasks.size());
    return ACL_ERROR_RT_INTERNAL_ERROR;
  }
  return ACL_SUCCESS;
}

}  // extern "C"
