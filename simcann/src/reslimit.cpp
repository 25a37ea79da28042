// Device resource limits: how many cube / vector cores the work of a process, a stream or a thread
// may use. The entry points are in reslimit_api.cpp (compiled without the ACL headers: older
// wheels' headers lack aclrtDevResLimitType); this file holds the state.
//
// Sources (hicann/runtime): docs/api_docs/aclrtSetDeviceResLimit.md, aclrtGetStreamResLimit.md,
// aclrtDevResLimitType.md (CUBE_CORE = 0, VECTOR_CORE = 1); aclrtGetResInCurrentThread.md
// (priority: the stream's limit > the process's > the hardware's);
// src/runtime/api/impl/api_error.cc (a type outside [0, 2) or a null value pointer:
// RT_ERROR_INVALID_VALUE, which errcode_manage.cc maps to ACL_ERROR_RT_PARAM_INVALID, 107000);
// src/runtime/api/impl/api_impl.cc (a value above the hardware's core count: invalid value, for the
// process and for a stream alike, and a stream may ask for more than the process limit; a null
// stream is the current context's default stream, no context: ACL_ERROR_RT_CONTEXT_NULL; reset
// clears a stream's own limits / restores the hardware's for the process;
// UseStreamResInCurrentThread binds the calling thread to a stream, Unuse unbinds it only if it is
// the bound one); src/runtime/core/src/device/raw_device_res.cc (the hardware value is the AI core
// / vector core count).
#include <mutex>

#include "state.h"

namespace simcann {
namespace {

constexpr int kTypes = 2;
constexpr int kMaxDevices = 64;

std::mutex& res_mutex() {
  static std::mutex m;
  return m;
}

uint32_t hardware_value(int type) { return type == 0 ? kCubeCores : kVectorCores; }

// The process's limit per device (0 = not set: the hardware's); guarded by res_mutex().
uint32_t g_process[kMaxDevices][kTypes] = {};
bool g_process_set[kMaxDevices][kTypes] = {};

thread_local Stream* t_bound = nullptr;

bool valid_device(int device) { return device >= 0 && device < config().device_count && device < kMaxDevices; }
bool valid_type(int type) { return type >= 0 && type < kTypes; }

uint32_t process_value(int device, int type) {  // caller holds res_mutex()
  return g_process_set[device][type] ? g_process[device][type] : hardware_value(type);
}

// nullptr -> the current context's default stream; no context: nullptr.
Stream* stream_or_default(void* handle) {
  if (handle == nullptr && current_device() < 0) return nullptr;
  return to_stream(handle);
}

}  // namespace

int res_get_device(int device, int type, uint32_t* value) {
  if (!valid_type(type) || value == nullptr) return ACL_ERROR_RT_PARAM_INVALID;
  if (!valid_device(device)) return ACL_ERROR_RT_INVALID_DEVICEID;
  std::lock_guard<std::mutex> lock(res_mutex());
  *value = process_value(device, type);
  return ACL_SUCCESS;
}

int res_set_device(int device, int type, uint32_t value) {
  if (!valid_type(type)) return ACL_ERROR_RT_PARAM_INVALID;
  if (!valid_device(device)) return ACL_ERROR_RT_INVALID_DEVICEID;
  if (value > hardware_value(type)) {
    set_error("simcann: aclrtSetDeviceResLimit: value %u exceeds the %u cores of the device", value,
              hardware_value(type));
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  std::lock_guard<std::mutex> lock(res_mutex());
  g_process[device][type] = value;
  g_process_set[device][type] = true;
  return ACL_SUCCESS;
}

int res_reset_device(int device) {
  if (!valid_device(device)) return ACL_ERROR_RT_INVALID_DEVICEID;
  std::lock_guard<std::mutex> lock(res_mutex());
  for (int t = 0; t < kTypes; ++t) g_process_set[device][t] = false;
  return ACL_SUCCESS;
}

int res_get_stream(void* stream, int type, uint32_t* value) {
  if (!valid_type(type) || value == nullptr) return ACL_ERROR_RT_PARAM_INVALID;
  Stream* s = stream_or_default(stream);
  if (s == nullptr) return ACL_ERROR_RT_CONTEXT_NULL;
  std::lock_guard<std::mutex> lock(res_mutex());
  *value = s->res_limit_set[type] ? s->res_limit[type] : process_value(s->device, type);
  return ACL_SUCCESS;
}

int res_set_stream(void* stream, int type, uint32_t value) {
  if (!valid_type(type)) return ACL_ERROR_RT_PARAM_INVALID;
  Stream* s = stream_or_default(stream);
  if (s == nullptr) return ACL_ERROR_RT_CONTEXT_NULL;
  if (value > hardware_value(type)) {
    set_error("simcann: aclrtSetStreamResLimit: value %u exceeds the %u cores of the device", value,
              hardware_value(type));
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  std::lock_guard<std::mutex> lock(res_mutex());
  s->res_limit[type] = value;
  s->res_limit_set[type] = true;
  return ACL_SUCCESS;
}

int res_reset_stream(void* stream) {
  Stream* s = stream_or_default(stream);
  if (s == nullptr) return ACL_ERROR_RT_CONTEXT_NULL;
  std::lock_guard<std::mutex> lock(res_mutex());
  for (int t = 0; t < kTypes; ++t) {
    s->res_limit[t] = 0;
    s->res_limit_set[t] = false;
  }
  return ACL_SUCCESS;
}

int res_use_stream(void* stream, bool use) {
  Stream* s = stream_or_default(stream);
  if (s == nullptr) return ACL_ERROR_RT_CONTEXT_NULL;
  if (use) {
    t_bound = s;
  } else if (t_bound == s) {
    t_bound = nullptr;
  }
  return ACL_SUCCESS;
}

int res_get_thread(int type, uint32_t* value) {
  if (!valid_type(type) || value == nullptr) return ACL_ERROR_RT_PARAM_INVALID;
  std::lock_guard<std::mutex> lock(res_mutex());
  if (t_bound != nullptr && t_bound->res_limit_set[type]) {
    *value = t_bound->res_limit[type];
    return ACL_SUCCESS;
  }
  int device = current_device();
  if (device < 0) return ACL_ERROR_RT_CONTEXT_NULL;
  *value = process_value(device, type);
  return ACL_SUCCESS;
}

}  // namespace simcann
