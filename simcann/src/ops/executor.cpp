// aclOpExecutor: what aclnnXxxGetWorkspaceSize hands back and aclnnXxx consumes.
//
// Two-phase aclnn calling convention (CANN aclnn API docs; op-plugin EXEC_NPU_CMD_V1/V2 in
// op_plugin/utils/op_api_common.h): phase 1 `aclnnXxxGetWorkspaceSize(args..., &workspace_size,
// &executor)` on the caller's thread, then torch_npu allocates `workspace_size` bytes of device
// memory (none when 0) and, usually on its task-queue thread, calls phase 2
// `aclnnXxx(workspace, workspace_size, executor, stream)`. An executor is single-use and freed by
// phase 2 unless aclSetAclOpExecutorRepeatable was called on it; a repeatable one lives until
// aclDestroyAclOpExecutor. None of our kernels needs a workspace.
#include <string>

#include "handoff.h"
#include "ops_internal.h"

struct aclOpExecutor {
  const char* op = nullptr;  // string literal: the aclnn entry point that made it
  std::shared_ptr<simcann::ops::Kernel> kernel;
  bool repeatable = false;
};

namespace simcann {
namespace ops {

aclOpExecutor* make_executor(const char* op, std::shared_ptr<Kernel> kernel) {
  auto* ex = new aclOpExecutor();
  ex->op = op;
  ex->kernel = std::move(kernel);
  handle_created(ex);  // Note [Handles handed over through torch_npu's task queue]
  return ex;
}

aclnnStatus launch(const char* op, aclOpExecutor* executor, aclrtStream stream) {
  handle_used(executor);  // Note [Handles handed over through torch_npu's task queue]
  if (executor == nullptr || !executor->kernel) {
    set_error("simcann: %s: null executor (was %sGetWorkspaceSize called and successful?)", op, op);
    return kErrNullptr;
  }
  if (std::string(executor->op) != op) {
    set_error("simcann: %s: executor was made by %sGetWorkspaceSize", op, executor->op);
    return kErrInvalid;
  }
  std::shared_ptr<Kernel> kernel = executor->kernel;
  if (trace_enabled()) log("%s: enqueue on stream %p", op, stream);
  const aclError ret = enqueue(stream, op, [kernel] { return kernel->run(); }, kernel->ranges());
  if (!executor->repeatable) delete executor;
  return ret;
}

}  // namespace ops
}  // namespace simcann

extern "C" {

// CANN acl_meta.h: aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor).
aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor) {
  if (executor == nullptr) return simcann::ops::kErrNullptr;
  simcann::handle_used(executor);
  executor->repeatable = true;
  return simcann::ops::kOk;
}

// CANN acl_meta.h: aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor); torch_npu
// declares it in torch_npu/csrc/framework/interface/AclOpCompileInterface.h.
aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  simcann::handle_used(executor);
  delete executor;
  return simcann::ops::kOk;
}

}  // extern "C"
