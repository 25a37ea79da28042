// The device resource limit entry points (rules and sources: reslimit.cpp). Compiled WITHOUT the
// ACL headers, like abi_neutral.cpp: the wheels' headers of 2.9 and older do not declare them or
// aclrtDevResLimitType (an int-sized enum: CUBE_CORE = 0, VECTOR_CORE = 1). torch_npu >= 2.10 calls
// them for torch.npu.{get,set,reset}_{device,stream}_limit, and TorchAir's aclgraph mode reads the
// capture stream's limits at every capture and call (a change means recapture).
#include <cstdint>

namespace simcann {
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int res_get_device(int device, int type, uint32_t* value);
int res_set_device(int device, int type, uint32_t value);
int res_reset_device(int device);
int res_get_stream(void* stream, int type, uint32_t* value);
int res_set_stream(void* stream, int type, uint32_t value);
int res_reset_stream(void* stream);
int res_use_stream(void* stream, bool use);
int res_get_thread(int type, uint32_t* value);
}  // namespace simcann

#define SIMCANN_EXPORT extern "C" __attribute__((visibility("default")))

SIMCANN_EXPORT int aclrtGetDeviceResLimit(int32_t deviceId, int type, uint32_t* value) {
  simcann::log("%s", __func__);
  return simcann::res_get_device(deviceId, type, value);
}

SIMCANN_EXPORT int aclrtSetDeviceResLimit(int32_t deviceId, int type, uint32_t value) {
  simcann::log("%s", __func__);
  return simcann::res_set_device(deviceId, type, value);
}

SIMCANN_EXPORT int aclrtResetDeviceResLimit(int32_t deviceId) {
  simcann::log("%s", __func__);
  return simcann::res_reset_device(deviceId);
}

SIMCANN_EXPORT int aclrtGetStreamResLimit(void* stream, int type, uint32_t* value) {
  simcann::log("%s", __func__);
  return simcann::res_get_stream(stream, type, value);
}

SIMCANN_EXPORT int aclrtSetStreamResLimit(void* stream, int type, uint32_t value) {
  simcann::log("%s", __func__);
  return simcann::res_set_stream(stream, type, value);
}

SIMCANN_EXPORT int aclrtResetStreamResLimit(void* stream) {
  simcann::log("%s", __func__);
  return simcann::res_reset_stream(stream);
}

SIMCANN_EXPORT int aclrtUseStreamResInCurrentThread(void* stream) {
  simcann::log("%s", __func__);
  return simcann::res_use_stream(stream, true);
}

SIMCANN_EXPORT int aclrtUnuseStreamResInCurrentThread(void* stream) {
  simcann::log("%s", __func__);
  return simcann::res_use_stream(stream, false);
}

SIMCANN_EXPORT int aclrtGetResInCurrentThread(int type, uint32_t* value) {
  simcann::log("%s", __func__);
  return simcann::res_get_thread(type, value);
}
