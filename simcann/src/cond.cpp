// Conditional nodes of a captured model (aclmdlRICondHandleCreate, aclmdlRICondHandleGetCondPtr,
// aclmdlRIAddCondTask, aclmdlRICaptureToModelRIBegin): IF / WHILE / SWITCH over sub models.
//
// Sources (hicann/runtime):
//  * docs/zh/api_ref/15_model_running_instance__management.md (the four APIs);
//  * docs/zh/design/features/aclgraph.md ("场景五：条件控制流", "条件控制流交互图", CondHandle);
//  * src/acl/aclrt_impl/model_ri.cpp (the ACL layer: its null-argument checks, 100000);
//  * src/runtime/api/api_c_standard_soc.cc (rtModelCondHandleCreate ... : handle validation, a
//    destroyed handle is ACL_ERROR_RT_INVALID_HANDLE);
//  * src/runtime/feature/aclgraph/api_error_aclgraph.cc (ApiErrorDecorator: argument checks),
//    v100/api_impl_aclgraph.cc (ApiImpl: ModelCondHandleCreate, StreamAddCondTaskParasCheck,
//    StreamAddCondTask, StreamBeginCapture), context_aclgraph.cc (StreamBeginCapture with a
//    model, CreateSubCaptureModels, StreamAddCondTask, StreamEndCapture), cond_handle.cc
//    (CondHandle::Setup / InitCondTaskByDefValue / ~CondHandle), capture_model.cc
//    (CheckSubModelsIsEndCapture, InitAllSubCaptureModelCondTaskByDefValue, ~CaptureModel);
//  * src/runtime/core/src/task/task_info/cond_op/aclgraph_cond_task.cc (CheckCondTaskParamsSize)
//    and src/runtime/core/src/task/stars_cond_isa_helper.cc (what the condition task does);
//  * src/runtime/core/src/common/errcode_manage.cc (internal -> ACL error codes).
//
// Note [Conditional nodes]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// * A condition handle belongs to a model whose capture is ACTIVE; it owns 8 bytes of device
//   memory (the condition value, zeroed at creation) that anyone may write -- by captured work
//   (torch_npu: a captured aclrtMemsetAsync + D2D aclrtMemcpyAsync of the bool predicate, see
//   NPUGraph::set_conditional_handle) or directly.
// * aclmdlRIAddCondTask on a capturing stream records a condition task into that stream's model
//   and makes `size` new sub models (status NONE) that the caller captures, each on some stream,
//   with aclmdlRICaptureToModelRIBegin ... aclmdlRICaptureEnd. While a sub model is captured, its
//   stream reports ACTIVE and the sub model (aclmdlRICaptureGetInfo); the parent stream keeps
//   capturing into the parent.
// * The parent's aclmdlRICaptureEnd requires every sub model below it to be READY.
// * Replay: when the replay reaches the condition task it loads the 64-bit condition value
//   (stars_cond_isa_helper.cc, "LD" of the handle's device address) and runs, in stream order,
//   IF: sub[0] if the value is non-zero, else sub[1] if there are two, else nothing;
//   WHILE: sub[0] as long as the value is non-zero (re-read after each run, the JumpBack SQE);
//   SWITCH: sub[value] if value < size, else nothing. The parent's next task waits for the sub
//   model (the condition task's NotifyWait SQE), so a sub model's tasks run inline, on the replay
//   stream (Note [Replay order] in capture.cpp).
// * Handles created with ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT (torch_npu: default 0) have their
//   value set to the default at every aclmdlRIExecuteAsync of the root model, synchronously on
//   the host when the call is made (CaptureModel::PreModelExecute ->
//   InitAllSubCaptureModelCondTaskByDefValue -> CondHandle::InitCondTaskByDefValue, a
//   MemCopySync), i.e. NOT in stream order: a replay still queued on the device sees the value
//   the next aclmdlRIExecuteAsync assigned unless its own captured work wrote it afterwards.
// * A sub model cannot be executed (207000) nor destroyed (207000) on its own; destroying the
//   root model frees its handles (their value memory) and its sub models.
// * Not modelled: a capture still recording into a sub model when its root is destroyed (by a
//   failed aclmdlRICaptureEnd of the root) is undefined in the runtime (the sub model's capture
//   stream is destroyed under it); here that capture becomes INVALIDATED (507903 from then on).
//   rtStreamAddToModel streams, stream/model context (device) checks, SoftwareSq support checks
//   (A2/A3 support conditional nodes) and the signed comparison of SWITCH are not modelled.
#include <cstring>
#include <set>

#include "capture.h"

namespace simcann {

// The values of the ACL enums (acl_rt.h aclmdlRICondHandleFlag / aclmdlRICondTaskType), spelled
// out so this file also builds against older headers without conditional nodes.
constexpr uint32_t kAssignDefault = 1;  // ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT
constexpr uint32_t kCondIf = 0;         // ACL_MODEL_RI_COND_TYPE_IF
constexpr uint32_t kCondWhile = 1;      // ACL_MODEL_RI_COND_TYPE_WHILE
constexpr uint32_t kCondSwitch = 2;     // ACL_MODEL_RI_COND_TYPE_SWITCH

struct CondHandle {
  Model* parent = nullptr;  // owns this handle (Model::cond_handles)
  uint32_t default_value = 0;
  uint32_t flag = 0;
  uint32_t type = 0;
  uint64_t* value = nullptr;  // 8 bytes of device memory
  CheckedRange value_range;   // resolved at creation: replay checks the memory is still there
  // Made by aclmdlRIAddCondTask; non-empty once a condition task used this handle.
  std::vector<std::shared_ptr<Model>> subs;
};

namespace {

std::set<const CondHandle*>& live_handles() {  // guarded by capture_mutex()
  static auto* s = new std::set<const CondHandle*>();
  return *s;
}

bool is_live(const void* h) { return live_handles().count(static_cast<const CondHandle*>(h)) != 0; }

uint64_t load_value(const CondHandle& h, Stream* s, bool* ok) {
  uint64_t v = 0;
  *ok = false;
  run_task_checked(
      "aclmdlRIAddCondTask",
      [&] {
        std::memcpy(&v, h.value, sizeof v);
        *ok = true;
        return ACL_SUCCESS;
      },
      {h.value_range}, s);
  return v;
}

}  // namespace

void run_cond_task(const CondHandle& h, Stream* s) {
  bool ok = false;
  uint64_t v = load_value(h, s, &ok);
  if (!ok) return;  // the value's memory is gone (reported by the range check)
  log("condition task: value %llu, type %u, %zu sub models", static_cast<unsigned long long>(v),
      h.type, h.subs.size());
  if (h.type == kCondIf) {
    if (v != 0) {
      replay_tasks(*h.subs[0], s);
    } else if (h.subs.size() == 2) {
      replay_tasks(*h.subs[1], s);
    }
  } else if (h.type == kCondWhile) {
    while (ok && v != 0) {
      replay_tasks(*h.subs[0], s);
      v = load_value(h, s, &ok);
    }
  } else if (h.type == kCondSwitch) {
    if (v < h.subs.size()) replay_tasks(*h.subs[v], s);
  }
}

void assign_default_cond_values(Model& root) {
  std::vector<std::shared_ptr<CondHandle>> handles;
  {
    std::lock_guard<std::mutex> lock(root.mu);  // tasks may be updated (Note [Task update])
    for (const CapturedTask& t : root.tasks) {
      if (t.cond) handles.push_back(t.cond);
    }
  }
  for (const auto& h : handles) {
    if (h->flag == kAssignDefault) {
      // Only the value's own allocation is kept in use while it is written (Note [Range
      // checks]). The caller holds capture_mutex() and found the root live, so aclmdlRIDestroy
      // has not taken its handles yet (it takes them under that mutex, then frees their memory);
      // a user's aclrtFree of the value is reported and the value not written.
      const uint64_t v = h->default_value;
      CheckedRange w = h->value_range;
      w.range.write = true;
      RangesInUse use("aclmdlRIExecuteAsync (default condition value)", {w});
      if (use.ok()) std::memcpy(h->value, &v, sizeof v);
    }
    for (const auto& sub : h->subs) assign_default_cond_values(*sub);
  }
}

bool sub_models_ready(const Model& m, const Model** first) {
  for (const auto& h : m.cond_handles) {
    for (const auto& sub : h->subs) {
      if (!sub->ready) {
        *first = sub.get();
        return false;
      }
      if (!sub_models_ready(*sub, first)) return false;
    }
  }
  return true;
}

void destroy_cond_nodes(Model& m, std::vector<void*>* to_free) {
  for (auto& h : m.cond_handles) {
    live_handles().erase(h.get());
    to_free->push_back(h->value);
    for (auto& sub : h->subs) {
      forget_model(sub.get());
      if (std::shared_ptr<Capture> c = capture_of(sub.get())) c->invalidated = true;
      destroy_cond_nodes(*sub, to_free);
    }
  }
  // The handle objects stay while a condition task (a replay closure) still references them.
  m.cond_handles.clear();
}

void free_cond_memory(const std::vector<void*>& to_free) {
  for (void* p : to_free) runtime_device_free(p);
}

}  // namespace simcann

#ifdef SIMCANN_HAVE_COND_NODES  // build.sh: the wheel's acl_rt.h declares these APIs

using namespace simcann;

extern "C" {

// model_ri.cpp: modelRI / handle null -> 100000. api_error_aclgraph.cc: flag > ASSIGN_DEFAULT ->
// 107000. api_impl_aclgraph.cc ModelCondHandleCreate: the model's capture must be ACTIVE (not
// ended, not invalidated) -> else 107000. cond_handle.cc Setup: 8 bytes of device memory, zeroed
// (MemSetSync), the handle joins the model.
ACL_FUNC_VISIBILITY aclError aclmdlRICondHandleCreate(aclmdlRI modelRI, uint32_t defaultLaunchValue,
                                                      aclmdlRICondHandleFlag flag,
                                                      aclmdlRICondHandle* handle) {
  SIMCANN_API();
  if (modelRI == nullptr || handle == nullptr) {
    set_error("simcann: aclmdlRICondHandleCreate: null modelRI or handle (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  std::lock_guard<std::mutex> lock(capture_mutex());
  std::shared_ptr<Model> m = find_model(modelRI);
  if (!m) {
    set_error("simcann: aclmdlRICondHandleCreate: unknown or destroyed model %p (rule 107017)",
              modelRI);
    return ACL_ERROR_RT_INVALID_HANDLE;
  }
  if (static_cast<uint32_t>(flag) > kAssignDefault) {
    set_error("simcann: aclmdlRICondHandleCreate: flag %u not in [0, 1] (rule 107000)",
              static_cast<uint32_t>(flag));
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  std::shared_ptr<Capture> c = capture_of(m.get());
  if (!c || c->invalidated) {
    set_error(
        "simcann: aclmdlRICondHandleCreate: model %u is not in the capture stage (rule "
        "107000)",
        m->id);
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  void* mem = nullptr;
  aclError e = runtime_device_malloc(&mem, sizeof(uint64_t), "aclmdlRICondHandleCreate");
  if (e != ACL_SUCCESS) return e;
  std::memset(mem, 0, sizeof(uint64_t));
  auto h = std::make_shared<CondHandle>();
  h->parent = m.get();
  h->default_value = defaultLaunchValue;
  h->flag = static_cast<uint32_t>(flag);
  h->value = static_cast<uint64_t*>(mem);
  h->value_range = resolve_range(MemRange::dev_read(mem, sizeof(uint64_t)));
  m->cond_handles.push_back(h);
  live_handles().insert(h.get());
  *handle = h.get();
  log("condition handle %p on model %u, value at %p, default %u, flag %u",
      static_cast<void*>(h.get()), m->id, mem, defaultLaunchValue, h->flag);
  return ACL_SUCCESS;
}

// model_ri.cpp: null handle / ptr -> 100000; a destroyed handle -> 107017. The pointer stays valid
// until the model is destroyed (15_model_running_instance__management.md: "内存将在modelRI销毁…
// 时，由Runtime自动释放").
ACL_FUNC_VISIBILITY aclError aclmdlRICondHandleGetCondPtr(aclmdlRICondHandle handle,
                                                          uint64_t** ptr) {
  SIMCANN_API();
  if (handle == nullptr || ptr == nullptr) {
    set_error("simcann: aclmdlRICondHandleGetCondPtr: null handle or ptr (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (!is_live(handle)) {
    set_error("simcann: aclmdlRICondHandleGetCondPtr: unknown or destroyed handle %p (rule 107017)",
              handle);
    return ACL_ERROR_RT_INVALID_HANDLE;
  }
  *ptr = static_cast<CondHandle*>(handle)->value;
  return ACL_SUCCESS;
}

// The parameter checks of aclmdlRIAddCondTask after the handle's liveness (order below): the
// error, set_error called, or ACL_SUCCESS.
static aclError cond_task_params_error(const aclmdlRICondTaskParams& params, const Stream* s,
                                       uint32_t flags) {
  const uint32_t type = static_cast<uint32_t>(params.type);
  const char* bad = nullptr;
  if (type > kCondSwitch) bad = "type not in [0, 2]";
  if (bad == nullptr && flags != 0) bad = "flags is reserved and must be 0";
  if (bad == nullptr && params.handle == nullptr) bad = "null params.handle";
  if (bad == nullptr && params.modelRIArray == nullptr) bad = "null params.modelRIArray";
  auto* h = static_cast<CondHandle*>(params.handle);
  if (bad == nullptr && !h->subs.empty()) {
    bad = "the handle was already used by a condition task; create a new handle";
  }
  if (bad != nullptr) {
    set_error("simcann: aclmdlRIAddCondTask: %s (rule 107000)", bad);
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  if (!s->capture) {
    set_error("simcann: aclmdlRIAddCondTask: stream %u is not capturing (rule 107029)", s->id);
    return ACL_ERROR_RT_STREAM_NOT_CAPTURED;
  }
  if (s->capture->model.get() != h->parent) {
    set_error(
        "simcann: aclmdlRIAddCondTask: stream %u captures into model %u, the handle belongs "
        "to model %u (rule 107000)",
        s->id, s->capture->model->id, h->parent->id);
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  const uint32_t n = params.size;
  const bool size_ok = (type == kCondIf && (n == 1 || n == 2)) || (type == kCondWhile && n == 1) ||
                       (type == kCondSwitch && n > 0);
  if (!size_ok) {
    set_error(
        "simcann: aclmdlRIAddCondTask: size %u for condition type %u (IF: 1 or 2, WHILE: "
        "1, SWITCH: > 0; rule 107000)",
        n, type);
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  return ACL_SUCCESS;
}

// Checks in the runtime's order: model_ri.cpp (null stream -> 100000), api_c_standard_soc.cc
// (destroyed handle -> 107017), api_error_aclgraph.cc (type > SWITCH, flags != 0, null handle,
// null modelRIArray -> 107000), api_impl_aclgraph.cc StreamAddCondTaskParasCheck (handle already
// used -> 107000; stream not capturing -> 107029; stream capturing into another model than the
// handle's -> 107000; size: IF 1 or 2, WHILE 1, SWITCH > 0 -> 107000, aclgraph_cond_task.cc
// CheckCondTaskParamsSize). Then CreateSubCaptureModels makes the sub models (their handles go to
// modelRIArray) and the condition task is added to the capture; if adding it fails (an
// invalidated capture: 507903) the sub models are destroyed again (StreamAddCondTask's
// errSubModelRecycle) and the handle may be used again.
ACL_FUNC_VISIBILITY aclError aclmdlRIAddCondTask(aclmdlRICondTaskParams params, aclrtStream stream,
                                                 uint32_t flags) {
  SIMCANN_API();
  if (stream == nullptr) {
    set_error("simcann: aclmdlRIAddCondTask: null stream (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  if (params.handle != nullptr && !is_live(params.handle)) {
    set_error("simcann: aclmdlRIAddCondTask: unknown or destroyed handle %p (rule 107017)",
              params.handle);
    return ACL_ERROR_RT_INVALID_HANDLE;
  }
  if (aclError err = cond_task_params_error(params, s, flags); err != ACL_SUCCESS) return err;
  const uint32_t type = static_cast<uint32_t>(params.type);
  const uint32_t n = params.size;
  auto* h = static_cast<CondHandle*>(params.handle);
  std::shared_ptr<CondHandle> owned;
  for (const auto& p : h->parent->cond_handles) {
    if (p.get() == h) owned = p;
  }
  h->type = type;
  for (uint32_t i = 0; i < n; ++i) h->subs.push_back(new_model(s->device, true));
  aclError e = capture_add_cond_task(s, owned, {h->value_range});
  if (e != ACL_SUCCESS) {
    for (auto& sub : h->subs) forget_model(sub.get());
    h->subs.clear();
    return e;
  }
  for (uint32_t i = 0; i < n; ++i) params.modelRIArray[i] = h->subs[i].get();
  log("condition task (type %u, %u sub models) on stream %u into model %u", type, n, s->id,
      s->capture->model->id);
  return ACL_SUCCESS;
}

// model_ri.cpp: null stream / modelRI -> 100000. api_c_standard_soc.cc: destroyed model -> 107017.
// api_error_aclgraph.cc StreamBeginCapture: mode out of range, or the model is not a sub model
// -> 107000. api_impl_aclgraph.cc: the default stream -> 207000. context_aclgraph.cc
// StreamBeginCapture: a sub model whose status left NONE (already captured) -> 107026
// (CheckCaptureModelIsCaptured); a stream already capturing -> 107027. Then the stream captures
// into the sub model exactly as after aclmdlRICaptureBegin (mode, thread, cross-stream rules).
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureToModelRIBegin(aclrtStream stream, aclmdlRI modelRI,
                                                           aclmdlRICaptureMode mode) {
  SIMCANN_API();
  if (stream == nullptr || modelRI == nullptr) {
    set_error("simcann: aclmdlRICaptureToModelRIBegin: null stream or modelRI (rule 100000)");
    return ACL_ERROR_INVALID_PARAM;
  }
  Stream* s = to_stream(stream);
  std::lock_guard<std::mutex> lock(capture_mutex());
  std::shared_ptr<Model> m = find_model(modelRI);
  if (!m) {
    set_error(
        "simcann: aclmdlRICaptureToModelRIBegin: unknown or destroyed model %p (rule "
        "107017)",
        modelRI);
    return ACL_ERROR_RT_INVALID_HANDLE;
  }
  if (static_cast<int>(mode) < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL ||
      static_cast<int>(mode) > ACL_MODEL_RI_CAPTURE_MODE_RELAXED || !m->sub) {
    set_error(
        "simcann: aclmdlRICaptureToModelRIBegin: bad mode %d or model %u is not a sub model "
        "of a conditional task (rule 107000)",
        static_cast<int>(mode), m->id);
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  if (s->is_default) {
    set_error(
        "simcann: aclmdlRICaptureToModelRIBegin: the default stream cannot capture (rule "
        "207000)");
    return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
  }
  if (m->begun) {
    set_error(
        "simcann: aclmdlRICaptureToModelRIBegin: sub model %u was already captured (rule "
        "107026)",
        m->id);
    return ACL_ERROR_RT_MODEL_CAPTURED;
  }
  if (s->capture) {
    set_error(
        "simcann: aclmdlRICaptureToModelRIBegin: stream %u is already capturing (rule "
        "107027)",
        s->id);
    return ACL_ERROR_RT_STREAM_CAPTURED;
  }
  start_capture(s, mode, m);
  log("capture begin: stream %u, mode %d, sub model %u", s->id, static_cast<int>(mode), m->id);
  return ACL_SUCCESS;
}

}  // extern "C"

#endif  // SIMCANN_HAVE_COND_NODES
