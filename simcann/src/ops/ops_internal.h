// Shared declarations of the simulated aclnn compute ops (src/ops/).
//
// The aclnn "meta" objects (aclTensor, aclScalar, aclIntArray, ..., aclOpExecutor) are opaque to
// torch_npu: it only creates them with aclCreateXxx, passes them to aclnnXxxGetWorkspaceSize and
// destroys them (op-plugin op_plugin/utils/op_api_common_base.h declares the creator prototypes as
// function-pointer typedefs, `_aclCreateTensor` etc.; CANN documents them in aclnn/acl_meta.h,
// which the wheel does not ship). So the layout below is ours.
//
// Lifetimes (op-plugin EXEC_NPU_CMD_V1 in op_plugin/utils/op_api_common.h): the descriptors are
// destroyed right after aclnnXxx(workspace, size, executor, stream) returns, while the kernel runs
// later on the stream, or on every replay of a captured graph. So an executor keeps *copies* of
// the descriptors it needs, never pointers to them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../internal.h"

typedef int32_t aclnnStatus;

// Defined in descriptors.cpp / executor.cpp; torch_npu only sees them as opaque pointers.
struct aclTensor;
struct aclScalar;
struct aclOpExecutor;
struct aclIntArray;
struct aclTensorList;

namespace simcann {
namespace ops {

// aclnn return codes (CANN "aclnn return codes": ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_PARAM_INVALID).
constexpr aclnnStatus kOk = 0;
// Returns the status of `expr` from the calling function unless it is kOk.
#define SIMCANN_CHECK(expr)                           \
  do {                                                \
    const aclnnStatus simcann_status = (expr);        \
    if (simcann_status != kOk) return simcann_status; \
  } while (false)
constexpr aclnnStatus kErrNullptr = 161001;
constexpr aclnnStatus kErrInvalid = 161002;

// A strided view on device memory, as aclCreateTensor describes it: element `i` (multi-index)
// lives at data + (offset + sum(i_k * strides_k)) * itemsize; storage_dims describes the storage.
struct TensorView {
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_ND;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  std::vector<int64_t> storage_dims;
  void* data = nullptr;
  // Ops whose output shape is known only when the kernel has run (aclnnMaskedSelect): the kernel
  // writes it here and aclGetViewShape of the descriptor reports it (op-plugin reads it after
  // EXEC_NPU_CMD_SYNC). Shared, so the kernel never points into a destroyed descriptor.
  std::shared_ptr<std::vector<int64_t>> produced_sizes;

  int64_t numel() const;
  bool is_contiguous() const;
};

// A host-side scalar value (aclCreateScalar copies the value; so do we).
struct ScalarValue {
  aclDataType dtype = ACL_DT_UNDEFINED;
  double as_double = 0.0;
  int64_t as_int = 0;
  bool is_floating = false;
};

// Element type helpers.
size_t dtype_size(aclDataType dtype);  // 0 if unsupported by these ops
const char* dtype_name(aclDataType dtype);
bool dtype_is_floating(aclDataType dtype);

// The kinds of elementwise kernels the ops need.
// kAdd: a + alpha * b, kSub: a - alpha * b, kMul: a * b, kDiv: a / b (true division).
enum class BinaryOp { kAdd, kSub, kMul, kDiv };

// A kernel ready to run on a stream: what it computes and what memory it touches.
struct Kernel {
  virtual ~Kernel() = default;
  virtual aclError run() const = 0;
  virtual std::vector<MemRange> ranges() const = 0;
};

std::shared_ptr<Kernel> make_fill_kernel(const TensorView& out, const ScalarValue& value);
// out = src (converting the element type; src is broadcast to out's shape).
std::shared_ptr<Kernel> make_copy_kernel(const TensorView& out, const TensorView& src);
// out[i] = start + i * step, i counting the output's elements in row-major order.
std::shared_ptr<Kernel> make_arange_kernel(const TensorView& out, const ScalarValue& start,
                                           const ScalarValue& step);
// out = a (op) alpha * b ; a or b may be scalars (then the view pointer is null).
struct BinaryArgs {
  BinaryOp op = BinaryOp::kAdd;
  const TensorView* a = nullptr;
  const ScalarValue* a_scalar = nullptr;
  const TensorView* b = nullptr;
  const ScalarValue* b_scalar = nullptr;
  ScalarValue alpha;  // used by kAdd / kSub only
};
std::shared_ptr<Kernel> make_binary_kernel(const TensorView& out, const BinaryArgs& args);
// out = !self elementwise (zero is false, anything else true; NaN is true), in out's type.
std::shared_ptr<Kernel> make_logical_not_kernel(const TensorView& out, const TensorView& self);

// One element at `p` of type `dtype`, converted like the elementwise kernels do (elementwise.cpp):
// floating stores round to the element type (double -> float -> float16/bfloat16), integer stores
// wrap, bool stores 1 for any non-zero value; unsupported dtypes load 0 and store nothing.
double load_double(aclDataType dtype, const void* p);
int64_t load_int64(aclDataType dtype, const void* p);
void store_double(aclDataType dtype, void* p, double v);
void store_int64(aclDataType dtype, void* p, int64_t v);

// Argument validation. Each returns kOk, or sets the error message (naming `op`) and returns an
// aclnn error code.
aclnnStatus check_tensor(const char* op, const char* what, const aclTensor* t);
aclnnStatus check_scalar(const char* op, const char* what, const aclScalar* s);
aclnnStatus check_broadcast(const char* op, const TensorView& out, const TensorView& in);

// The view / value held by a descriptor made with aclCreateTensor / aclCreateScalar.
const TensorView& view_of(const aclTensor* t);
const ScalarValue& value_of(const aclScalar* s);
// The elements of an aclIntArray (empty for null).
std::vector<int64_t> int_array_of(const aclIntArray* a);
// The tensors of an aclTensorList (empty for null).
std::vector<const aclTensor*> tensor_list_of(const aclTensorList* l);

// Executors (aclOpExecutor): made by aclnnXxxGetWorkspaceSize, consumed by aclnnXxx.
aclOpExecutor* make_executor(const char* op, std::shared_ptr<Kernel> kernel);
// Enqueue the executor's kernel on `stream` under the name `op`; destroys a non-repeatable
// executor (CANN: an executor is single-use unless aclSetAclOpExecutorRepeatable was called).
aclnnStatus launch(const char* op, aclOpExecutor* executor, aclrtStream stream);

// The second phase of an aclnn op, name(workspace, size, executor, stream): runs the executor
// that name##GetWorkspaceSize made (launch). One definition for every ops file.
#define SIMCANN_ACLNN_LAUNCH(name)                                                    \
  aclnnStatus name(void* workspace, uint64_t workspace_size, aclOpExecutor* executor, \
                   aclrtStream stream) {                                              \
    (void)workspace;                                                                  \
    (void)workspace_size;                                                             \
    return simcann::ops::launch(#name, executor, stream);                             \
  }

}  // namespace ops
}  // namespace simcann
