// Devices, contexts, init and device information.
//
// Sources (hicann/runtime): docs/zh/api_ref/02_initialization_and_deinitialization.md,
// 04_device_management.md (aclrtSetDevice binds the calling thread to a device; aclrtGetDevice
// without one fails with ACL_ERROR_RT_CONTEXT_NULL), 05_context_management.md (one default
// context per device; aclrtSetCurrentContext binds the thread to the context's device),
// docs/zh/api_ref/24_other_APIs.md (aclrtGetSocName). SoC names: facts note (A2 Ascend910B1..B4,
// A3 Ascend910_93xx).
#include <cstdio>
#include <cstring>

#include "acl/acl_op_compiler.h"
#include "state.h"

namespace simcann {
namespace {

thread_local int t_device = -1;

struct Context {
  int device;
};

Context* default_context(int device) {
  static Context* ctxs = [] {
    auto* c = new Context[64];
    for (int i = 0; i < 64; ++i) c[i].device = i;
    return c;
  }();
  return &ctxs[device < 0 || device >= 64 ? 0 : device];
}

bool valid_device(int32_t d) { return d >= 0 && d < config().device_count && d < 64; }

}  // namespace

int current_device() { return t_device; }
int device_or_default() { return t_device < 0 ? 0 : t_device; }

}  // namespace simcann

using namespace simcann;

extern "C" {

ACL_FUNC_VISIBILITY aclError aclInit(const char*) {
  SIMCANN_API();
  config();
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclFinalize() {
  SIMCANN_API();
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t* count) {
  SIMCANN_API();
  if (count == nullptr) return ACL_ERROR_INVALID_PARAM;
  *count = static_cast<uint32_t>(config().device_count);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId) {
  SIMCANN_API();
  if (!valid_device(deviceId)) {
    set_error("simcann: aclrtSetDevice(%d): invalid device id (SIMCANN_DEVICE_COUNT=%d)", deviceId,
              config().device_count);
    return ACL_ERROR_RT_INVALID_DEVICEID;
  }
  t_device = deviceId;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t* deviceId) {
  SIMCANN_API();
  if (deviceId == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (t_device < 0) return ACL_ERROR_RT_CONTEXT_NULL;
  *deviceId = t_device;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId) {
  SIMCANN_API();
  if (!valid_device(deviceId)) return ACL_ERROR_RT_INVALID_DEVICEID;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtResetDeviceForce(int32_t deviceId) {
  SIMCANN_API();
  return aclrtResetDevice(deviceId);
}

ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId) {
  SIMCANN_API();
  if (context == nullptr || !valid_device(deviceId)) return ACL_ERROR_INVALID_PARAM;
  *context = default_context(deviceId);
  t_device = deviceId;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext) {
  SIMCANN_API();
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext* context) {
  SIMCANN_API();
  if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (t_device < 0) return ACL_ERROR_RT_CONTEXT_NULL;
  *context = default_context(t_device);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context) {
  SIMCANN_API();
  if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
  t_device = static_cast<Context*>(context)->device;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode* runMode) {
  SIMCANN_API();
  if (runMode) *runMode = ACL_HOST;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY const char* aclrtGetSocName() {
  SIMCANN_API();
  return config().soc.c_str();
}

// Core counts of an Ascend910B2 die (also used for the A3 part): 24 AI (cube) cores, 48 vector
// cores, 6 AI CPUs, 192 MiB L2. Enumerators by value: older headers lack some names.
ACL_FUNC_VISIBILITY aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo info,
                                                    int64_t* value) {
  SIMCANN_API();
  if (value == nullptr || !valid_device(static_cast<int32_t>(deviceId))) {
    return ACL_ERROR_INVALID_PARAM;
  }
  switch (static_cast<int>(info)) {
    case 0: *value = kCubeCores; break;    // ACL_DEVICE_INFO_AI_CORE_NUM
    case 1: *value = kVectorCores; break;  // ACL_DEVICE_INFO_VECTOR_CORE_NUM
    case 2: *value = 192LL << 20; break;  // ACL_DEVICE_INFO_L2_SIZE
    default: *value = 0;
  }
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr,
                                                int64_t* value) {
  SIMCANN_API();
  if (value == nullptr || !valid_device(static_cast<int32_t>(deviceId))) {
    return ACL_ERROR_INVALID_PARAM;
  }
  switch (static_cast<int>(attr)) {
    case 1: *value = 6; break;     // ACL_DEV_ATTR_AICPU_CORE_NUM
    case 101: *value = kCubeCores; break;    // ACL_DEV_ATTR_AICORE_CORE_NUM
    case 102: *value = kCubeCores; break;    // ACL_DEV_ATTR_CUBE_CORE_NUM
    case 201: *value = kVectorCores; break;  // ACL_DEV_ATTR_VECTOR_CORE_NUM
    default: *value = 0;
  }
  return ACL_SUCCESS;
}

// A stable per-device UUID ("simcann" + device id).
ACL_FUNC_VISIBILITY aclError aclrtDeviceGetUuid(int32_t deviceId, aclrtUuid* uuid) {
  SIMCANN_API();
  if (uuid == nullptr || !valid_device(deviceId)) return ACL_ERROR_INVALID_PARAM;
  std::memset(uuid->bytes, 0, sizeof(uuid->bytes));
  std::memcpy(uuid->bytes, "simcann", 7);
  uuid->bytes[15] = static_cast<char>(deviceId);
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtGetDeviceUtilizationRate(int32_t deviceId,
                                                           aclrtUtilizationInfo* info) {
  SIMCANN_API();
  if (info == nullptr || !valid_device(deviceId)) return ACL_ERROR_INVALID_PARAM;
  info->cubeUtilization = 0;
  info->vectorUtilization = 0;
  info->aicpuUtilization = 0;
  return ACL_SUCCESS;
}

ACL_FUNC_VISIBILITY aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId,
                                                      int32_t peerDeviceId) {
  SIMCANN_API();
  if (canAccessPeer == nullptr) return ACL_ERROR_INVALID_PARAM;
  *canAccessPeer = valid_device(deviceId) && valid_device(peerDeviceId) && deviceId != peerDeviceId;
  return ACL_SUCCESS;
}

// torch_npu reads ACL_OP_JIT_COMPILE at init (LazyInitAclops.cpp) and refuses a zero size.
ACL_FUNC_VISIBILITY size_t aclGetCompileoptSize(aclCompileOpt) {
  SIMCANN_API();
  return 16;
}

ACL_FUNC_VISIBILITY aclError aclGetCompileopt(aclCompileOpt, char* value, size_t length) {
  SIMCANN_API();
  if (value == nullptr || length == 0) return ACL_ERROR_INVALID_PARAM;
  std::snprintf(value, length, "%s", "disable");
  return ACL_SUCCESS;
}

}  // extern "C"

// System parameters (hicann docs/zh/api_ref/03_runtime_configuration.md): the process-level
// aclrtGetSysParamOpt returns the default 0 for a parameter never set; the context-level
// aclrtCtxGetSysParamOpt fails with ACL_ERROR_RT_SYSPARAMOPT_NOT_SET (25-01_aclError.md).
namespace simcann {
namespace {
std::mutex g_sysparam_mu;
using Params = std::map<int, int64_t>;
Params& process_params() {
  static auto* m = new Params();
  return *m;
}
Params& context_params() {
  static auto* m = new Params();
  return *m;
}
aclError get_param(Params& table, int opt, int64_t* value, bool default_zero) {
  if (value == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lock(g_sysparam_mu);
  auto it = table.find(opt);
  if (it != table.end()) {
    *value = it->second;
    return ACL_SUCCESS;
  }
  if (!default_zero) return ACL_ERROR_RT_SYSPARAMOPT_NOT_SET;
  *value = 0;
  return ACL_SUCCESS;
}
aclError set_param(Params& table, int opt, int64_t value) {
  std::lock_guard<std::mutex> lock(g_sysparam_mu);
  table[opt] = value;
  return ACL_SUCCESS;
}
}  // namespace
}  // namespace simcann

extern "C" {

ACL_FUNC_VISIBILITY aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t* value) {
  SIMCANN_API();
  return get_param(process_params(), static_cast<int>(opt), value, true);
}

ACL_FUNC_VISIBILITY aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value) {
  SIMCANN_API();
  return set_param(process_params(), static_cast<int>(opt), value);
}

ACL_FUNC_VISIBILITY aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t* value) {
  SIMCANN_API();
  return get_param(context_params(), static_cast<int>(opt), value, false);
}

ACL_FUNC_VISIBILITY aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value) {
  SIMCANN_API();
  return set_param(context_params(), static_cast<int>(opt), value);
}

// No optional CANN attribute is supported by the simulated package.
ACL_FUNC_VISIBILITY aclError aclGetCannAttribute(aclCannAttr, int32_t* value) {
  SIMCANN_API();
  if (value == nullptr) return ACL_ERROR_INVALID_PARAM;
  *value = 0;
  return ACL_SUCCESS;
}

}  // extern "C"

// ---- CANN version ----
// Source: hicann/runtime docs/zh/api_ref/24_other_APIs.md: aclsysGetCANNVersion(name, version)
// fills aclCANNPackageVersion for one package (version string, and its major / minor / release /
// patch parts); aclsysGetVersionStr(pkgName, versionStr) writes the version string of a package
// named by string (ACL_PKG_VERSION_MAX_SIZE bytes). torch_npu reads CANN / RUNTIME / DRIVER
// through them (GetCANNInfo.cpp) and, e.g., turns PYTORCH_NPU_ALLOC_CONF=pinned_mem_register off
// below RUNTIME 8.5.0 (AclrtMallocHostWithCfgExist). The simulator reports SIMCANN_CANN_VERSION
// for every package but the driver (SIMCANN_DRIVER_VERSION); unset: empty strings, success -
// what torch_npu saw from the earlier stub, so its version-gated features stay off.
namespace simcann {
namespace {

void copy_str(char* dst, size_t cap, const std::string& src) {
  std::snprintf(dst, cap, "%s", src.c_str());
}

const std::string& version_of(bool driver) {
  return driver ? config().driver_version : config().cann_version;
}

}  // namespace
}  // namespace simcann

extern "C" {

ACL_FUNC_VISIBILITY aclError aclsysGetCANNVersion(aclCANNPackageName name,
                                                  aclCANNPackageVersion* version) {
  SIMCANN_API();
  if (version == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::memset(version, 0, sizeof(*version));
  const std::string& v = simcann::version_of(name == ACL_PKG_NAME_DRIVER);
  simcann::copy_str(version->version, sizeof(version->version), v);
  // The parts: split at '.'; "8.5.0" -> 8 / 5 / 0, "26.0.RC1" -> 26 / 0 / RC1.
  char* parts[] = {version->majorVersion, version->minorVersion, version->releaseVersion,
                   version->patchVersion};
  size_t start = 0;
  for (size_t i = 0; i < 4 && start <= v.size(); ++i) {
    size_t end = v.find('.', start);
    if (end == std::string::npos) end = v.size();
    simcann::copy_str(parts[i], ACL_PKG_VERSION_PARTS_MAX_SIZE, v.substr(start, end - start));
    start = end + 1;
  }
  return ACL_SUCCESS;
}

// Declared here too: older acl_rt.h (torch_npu <= 2.10) lacks it.
ACL_FUNC_VISIBILITY aclError aclsysGetVersionStr(char* pkgName, char* versionStr);
ACL_FUNC_VISIBILITY aclError aclsysGetVersionStr(char* pkgName, char* versionStr) {
  SIMCANN_API();
  if (pkgName == nullptr || versionStr == nullptr) return ACL_ERROR_INVALID_PARAM;
  const bool driver = std::strcmp(pkgName, "driver") == 0 || std::strcmp(pkgName, "DRIVER") == 0;
  simcann::copy_str(versionStr, ACL_PKG_VERSION_MAX_SIZE, simcann::version_of(driver));
  return ACL_SUCCESS;
}

}  // extern "C"
