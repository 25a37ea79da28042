// The aclop ("single-operator model") execution entry points. torch_npu still sends a few ops
// this way (OpCommand in torch_npu/csrc/framework/OpCommand.cpp: e.g. "Identity" for
// torch_npu.npu_format_cast). The simulator runs no aclop operator: these fail loudly with an
// error naming the operator type, never return garbage.
//
// Prototypes: acl/acl_op_compiler.h of the torch_npu wheel (aclopCompileAndExecute[V2]).
#include "acl/acl_op_compiler.h"
#include "ops_internal.h"

namespace {

aclError reject(const char* entry, const char* op_type) {
  const char* type = op_type != nullptr ? op_type : "(null)";
  simcann::set_error("simcann: aclop operator %s (%s) is not implemented by the simulator", type,
                     entry);
  simcann::warn("aclop operator %s (%s) is not implemented by the simulator", type, entry);
  return simcann::kNotImplemented;
}

}  // namespace

extern "C" {

aclError aclopCompileAndExecute(const char* opType, int numInputs,
                                const aclTensorDesc* const inputDesc[],
                                const aclDataBuffer* const inputs[], int numOutputs,
                                const aclTensorDesc* const outputDesc[],
                                aclDataBuffer* const outputs[], const aclopAttr* attr,
                                aclopEngineType engineType, aclopCompileType compileFlag,
                                const char* opPath, aclrtStream stream) {
  return reject("aclopCompileAndExecute", opType);
}

aclError aclopCompileAndExecuteV2(const char* opType, int numInputs, aclTensorDesc* inputDesc[],
                                  aclDataBuffer* inputs[], int numOutputs,
                                  aclTensorDesc* outputDesc[], aclDataBuffer* outputs[],
                                  aclopAttr* attr, aclopEngineType engineType,
                                  aclopCompileType compileFlag, const char* opPath,
                                  aclrtStream stream) {
  return reject("aclopCompileAndExecuteV2", opType);
}

}  // extern "C"
