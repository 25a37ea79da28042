// Entry points torch_npu's op-plugin looks up around every aclnn call (dlsym in the opapi
// library, op_plugin/utils/op_api_common.h): the aclnn executor cache ("PTA cache") and the
// "huge memory" thread-local pools. The simulator has neither: the cache always misses, so every
// op goes through aclnnXxxGetWorkspaceSize + aclnnXxx and thus through our kernels, and the
// memory hooks do nothing.
//
// Prototypes: the typedefs `PTAGetExecCache`, `PTAFindExecCache`, `InitPTACacheThreadLocal`,
// `SetPTAHashKey`, `SetPTACacheHashKey`, `CanUsePTACache`, `UnInitPTACacheThreadLocal`,
// `InitHugeMemThreadLocal`, `UnInitHugeMemThreadLocal`, `ReleaseHugeMem` in op_api_common.h and
// `AddTensorAddrToCachedList` in op_api_common.cpp.
#include "ops_internal.h"

extern "C" {

// hit_cache(): the cache is used only if this returns true for the op.
bool CanUsePTACache(const char* /*aclnn_api*/) { return false; }

aclOpExecutor* PTAGetExecCache(uint64_t /*hash*/, uint64_t* workspace_size) {
  if (workspace_size != nullptr) *workspace_size = 0;
  return nullptr;
}

aclOpExecutor* PTAFindExecCache(uint8_t* /*key*/, size_t /*len*/, uint64_t* workspace_size) {
  if (workspace_size != nullptr) *workspace_size = 0;
  return nullptr;
}

void InitPTACacheThreadLocal() {}
void UnInitPTACacheThreadLocal() {}
void SetPTAHashKey(uint64_t /*hash*/) {}
void SetPTACacheHashKey(uint8_t* /*key*/, size_t /*len*/) {}
void AddTensorAddrToCachedList(void* /*addr*/) {}

int InitHugeMemThreadLocal(void* /*arg*/, bool /*sync*/) { return 0; }
void UnInitHugeMemThreadLocal(void* /*arg*/, bool /*sync*/) {}
void ReleaseHugeMem(void* /*arg*/, bool /*sync*/) {}

}  // extern "C"
