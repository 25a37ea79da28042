// The aclnn entry points the simulator implements: fill, zero, one, copy/cast, add, mul, sub,
// div, logical not.
//
// Which ones torch_npu calls (op-plugin op_plugin/ops/opapi/*KernelNpuOpApi.cpp, confirmed with
// SIMCANN_TRACE=1 on torch_npu 2.10 and 2.13, see simcann/tests/test_ops.py):
//   torch.arange(device=npu)      -> aclnnArange(start, end, step, out)
//   torch.zeros / zero_           -> aclnnInplaceZero(selfRef)
//   torch.ones / fill_(1)         -> aclnnInplaceOne(selfRef) / aclnnInplaceFillScalar
//   torch.full / fill_(scalar)    -> aclnnInplaceFillScalar(selfRef, value)
//   fill_(0-dim device tensor)    -> aclnnInplaceFillTensor(selfRef, value)
//   x.copy_(y), clone (device)    -> aclnnInplaceCopy(selfRef, src)   (CopyKernelOpApi.cpp)
//   x.to(dtype)                   -> aclnnCast(self, dtype, out)
//   a + b, a + s, s + b           -> aclnnAdd(self, other, alpha, out) / aclnnAdds / aclnnAddV3
//   a += b, a += s                -> aclnnInplaceAdd / aclnnInplaceAdds
//   a * b, a * s, a *= b, a *= s  -> aclnnMul / aclnnMuls / aclnnInplaceMul / aclnnInplaceMuls
//   a - b, a - s, -=              -> aclnnSub / aclnnSubs / aclnnInplaceSub / aclnnInplaceSubs
//   a / b, a / s, /=              -> aclnnDiv / aclnnDivs / aclnnInplaceDiv / aclnnInplaceDivs
//   logical_not, logical_not_     -> aclnnLogicalNot(self, out) / aclnnInplaceLogicalNot(selfRef)
//                                    (torch_npu 2.13 _npugraph_conditional_nodes.py: the false
//                                    branch of torch.cond captured as an IF node)
// Prototypes: CANN aclnn API reference (aclnn_add.h, aclnn_mul.h, aclnn_copy.h,
// aclnn_fill_scalar.h, aclnn_zero.h, aclnn_cast.h ...), and the argument order of the EXEC_NPU_CMD
// calls above. Every phase-2 function has the signature
//   aclnnStatus aclnnXxx(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
//                        aclrtStream stream)
// and enqueues the kernel on `stream` (recorded into the model if the stream is capturing).
#include "ops_internal.h"

namespace simcann {
namespace ops {
namespace {

// Phase 1 epilogue: hand the kernel to the caller as an executor; no workspace.
aclnnStatus finish(const char* op, std::shared_ptr<Kernel> kernel, uint64_t* workspace_size,
                   aclOpExecutor** executor) {
  if (workspace_size == nullptr || executor == nullptr) {
    set_error("simcann: %s: null workspaceSize or executor out-parameter", op);
    return kErrNullptr;
  }
  *workspace_size = 0;
  *executor = make_executor(op, std::move(kernel));
  if (trace_enabled()) log("%sGetWorkspaceSize: executor %p", op, static_cast<void*>(*executor));
  return kOk;
}

aclnnStatus fill(const char* op, aclTensor* self, const ScalarValue& value, uint64_t* ws,
                 aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "selfRef", self));
  return finish(op, make_fill_kernel(view_of(self), value), ws, ex);
}

// selfRef[...] = value[0] for a one-element device tensor `value` (broadcast as rank 0).
aclnnStatus fill_tensor(const char* op, aclTensor* self, const aclTensor* value, uint64_t* ws,
                        aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "selfRef", self));
  SIMCANN_CHECK(check_tensor(op, "value", value));
  TensorView v = view_of(value);
  if (v.numel() != 1) {
    set_error("simcann: %s: value must have exactly one element, has %lld", op,
              static_cast<long long>(v.numel()));
    return kErrInvalid;
  }
  v.sizes.clear();
  v.strides.clear();
  return finish(op, make_copy_kernel(view_of(self), v), ws, ex);
}

aclnnStatus arange(const char* op, const aclScalar* start, const aclScalar* end,
                   const aclScalar* step, const aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_scalar(op, "start", start));
  SIMCANN_CHECK(check_scalar(op, "end", end));
  SIMCANN_CHECK(check_scalar(op, "step", step));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  return finish(op, make_arange_kernel(view_of(out), value_of(start), value_of(step)), ws, ex);
}

ScalarValue int_scalar(int64_t v) {
  ScalarValue s;
  s.dtype = ACL_INT64;
  s.as_int = v;
  s.as_double = static_cast<double>(v);
  return s;
}

aclnnStatus copy(const char* op, const aclTensor* out, const aclTensor* src, uint64_t* ws,
                 aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "src", src));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  SIMCANN_CHECK(check_broadcast(op, view_of(out), view_of(src)));
  return finish(op, make_copy_kernel(view_of(out), view_of(src)), ws, ex);
}

// out = !self; out has self's shape (CANN aclnnLogicalNot&aclnnInplaceLogicalNot: "shape与self
// 一致"), any element type of the elementwise ops on either side.
aclnnStatus logical_not(const char* op, const aclTensor* self, const aclTensor* out, uint64_t* ws,
                        aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  if (view_of(self).sizes != view_of(out).sizes) {
    set_error("simcann: %s: out must have self's shape", op);
    return kErrInvalid;
  }
  return finish(op, make_logical_not_kernel(view_of(out), view_of(self)), ws, ex);
}

// out = a (op) alpha * b, where a / b are each a tensor or a scalar.
struct BinaryCall {
  const char* op;
  BinaryOp kind;
  const aclTensor* a;
  const aclScalar* a_scalar;
  const aclTensor* b;
  const aclScalar* b_scalar;
  const aclScalar* alpha;  // may be null: 1
  const aclTensor* out;
};

aclnnStatus check_operand(const BinaryCall& c, const char* what, const aclTensor* t,
                          const aclScalar* s) {
  if (t != nullptr) {
    SIMCANN_CHECK(check_tensor(c.op, what, t));
    return check_broadcast(c.op, view_of(c.out), view_of(t));
  }
  return check_scalar(c.op, what, s);
}

// Output types an op cannot produce exactly: bool for sub / div, integers for true division.
aclnnStatus check_out_type(const BinaryCall& c) {
  const aclDataType od = view_of(c.out).dtype;
  const bool bad_bool = od == ACL_BOOL && (c.kind == BinaryOp::kSub || c.kind == BinaryOp::kDiv);
  const bool bad_int = c.kind == BinaryOp::kDiv && !dtype_is_floating(od);
  if (bad_bool || bad_int) {
    set_error("simcann: %s: output dtype %s is not supported by this op", c.op, dtype_name(od));
    return kErrInvalid;
  }
  return kOk;
}

aclnnStatus binary(const BinaryCall& c, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(c.op, "out", c.out));
  SIMCANN_CHECK(check_out_type(c));
  SIMCANN_CHECK(check_operand(c, "self", c.a, c.a_scalar));
  SIMCANN_CHECK(check_operand(c, "other", c.b, c.b_scalar));
  BinaryArgs args;
  args.op = c.kind;
  if (c.a != nullptr) args.a = &view_of(c.a);
  if (c.a == nullptr) args.a_scalar = &value_of(c.a_scalar);
  if (c.b != nullptr) args.b = &view_of(c.b);
  if (c.b == nullptr) args.b_scalar = &value_of(c.b_scalar);
  args.alpha = int_scalar(1);
  if (c.alpha != nullptr) {
    SIMCANN_CHECK(check_scalar(c.op, "alpha", c.alpha));
    args.alpha = value_of(c.alpha);
  }
  return finish(c.op, make_binary_kernel(view_of(c.out), args), ws, ex);
}

// The aclnnX / aclnnXs form of `binary`: out = self (kind) alpha * other, `other` a tensor or a
// scalar.
aclnnStatus binary(const char* op, BinaryOp kind, const aclTensor* self, const aclTensor* other,
                   const aclScalar* alpha, const aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  return binary(BinaryCall{op, kind, self, nullptr, other, nullptr, alpha, out}, ws, ex);
}

aclnnStatus binary(const char* op, BinaryOp kind, const aclTensor* self, const aclScalar* other,
                   const aclScalar* alpha, const aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  return binary(BinaryCall{op, kind, self, nullptr, nullptr, other, alpha, out}, ws, ex);
}

}  // namespace
}  // namespace ops
}  // namespace simcann

using simcann::ops::BinaryCall;
using simcann::ops::BinaryOp;

// The binary ops come in families of four entry points, one prototype shape each (CANN
// aclnn_add.h, aclnn_sub.h, aclnn_mul.h, aclnn_div.h): aclnnX(self, other, [alpha,] out),
// aclnnXs (`other` a scalar), aclnnInplaceX(selfRef, other, [alpha]) writing selfRef, and
// aclnnInplaceXs. Add and sub take `alpha`, mul and div do not. Each macro defines the four
// GetWorkspaceSize functions and their launches.
#define SIMCANN_BINARY_FAMILY_WITH_ALPHA(X, kind)                                                 \
  aclnnStatus aclnn##X##GetWorkspaceSize(const aclTensor* self, const aclTensor* other,           \
                                         const aclScalar* alpha, aclTensor* out, uint64_t* ws,    \
                                         aclOpExecutor** ex) {                                    \
    return simcann::ops::binary("aclnn" #X, kind, self, other, alpha, out, ws, ex);               \
  }                                                                                               \
  SIMCANN_ACLNN_LAUNCH(aclnn##X)                                                                  \
  aclnnStatus aclnn##X##sGetWorkspaceSize(const aclTensor* self, const aclScalar* other,          \
                                          const aclScalar* alpha, aclTensor* out, uint64_t* ws,   \
                                          aclOpExecutor** ex) {                                   \
    return simcann::ops::binary("aclnn" #X "s", kind, self, other, alpha, out, ws, ex);           \
  }                                                                                               \
  SIMCANN_ACLNN_LAUNCH(aclnn##X##s)                                                               \
  aclnnStatus aclnnInplace##X##GetWorkspaceSize(aclTensor* selfRef, const aclTensor* other,       \
                                                const aclScalar* alpha, uint64_t* ws,             \
                                                aclOpExecutor** ex) {                             \
    return simcann::ops::binary("aclnnInplace" #X, kind, selfRef, other, alpha, selfRef, ws, ex); \
  }                                                                                               \
  SIMCANN_ACLNN_LAUNCH(aclnnInplace##X)                                                           \
  aclnnStatus aclnnInplace##X##sGetWorkspaceSize(aclTensor* selfRef, const aclScalar* other,      \
                                                 const aclScalar* alpha, uint64_t* ws,            \
                                                 aclOpExecutor** ex) {                            \
    return simcann::ops::binary("aclnnInplace" #X "s", kind, selfRef, other, alpha, selfRef, ws,  \
                                ex);                                                              \
  }                                                                                               \
  SIMCANN_ACLNN_LAUNCH(aclnnInplace##X##s)

#define SIMCANN_BINARY_FAMILY(X, kind)                                                         \
  aclnnStatus aclnn##X##GetWorkspaceSize(const aclTensor* self, const aclTensor* other,        \
                                         aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {   \
    return simcann::ops::binary("aclnn" #X, kind, self, other, nullptr, out, ws, ex);          \
  }                                                                                            \
  SIMCANN_ACLNN_LAUNCH(aclnn##X)                                                               \
  aclnnStatus aclnn##X##sGetWorkspaceSize(const aclTensor* self, const aclScalar* other,       \
                                          aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {  \
    return simcann::ops::binary("aclnn" #X "s", kind, self, other, nullptr, out, ws, ex);      \
  }                                                                                            \
  SIMCANN_ACLNN_LAUNCH(aclnn##X##s)                                                            \
  aclnnStatus aclnnInplace##X##GetWorkspaceSize(aclTensor* selfRef, const aclTensor* other,    \
                                                uint64_t* ws, aclOpExecutor** ex) {            \
    return simcann::ops::binary("aclnnInplace" #X, kind, selfRef, other, nullptr, selfRef, ws, \
                                ex);                                                           \
  }                                                                                            \
  SIMCANN_ACLNN_LAUNCH(aclnnInplace##X)                                                        \
  aclnnStatus aclnnInplace##X##sGetWorkspaceSize(aclTensor* selfRef, const aclScalar* other,   \
                                                 uint64_t* ws, aclOpExecutor** ex) {           \
    return simcann::ops::binary("aclnnInplace" #X "s", kind, selfRef, other, nullptr, selfRef, \
                                ws, ex);                                                       \
  }                                                                                            \
  SIMCANN_ACLNN_LAUNCH(aclnnInplace##X##s)

extern "C" {

// ---- fill ----------------------------------------------------------------------------------

aclnnStatus aclnnInplaceZeroGetWorkspaceSize(aclTensor* selfRef, uint64_t* ws, aclOpExecutor** ex) {
  return simcann::ops::fill("aclnnInplaceZero", selfRef, simcann::ops::int_scalar(0), ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceZero)

aclnnStatus aclnnInplaceOneGetWorkspaceSize(aclTensor* selfRef, uint64_t* ws, aclOpExecutor** ex) {
  return simcann::ops::fill("aclnnInplaceOne", selfRef, simcann::ops::int_scalar(1), ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceOne)

aclnnStatus aclnnInplaceFillScalarGetWorkspaceSize(aclTensor* selfRef, const aclScalar* value,
                                                   uint64_t* ws, aclOpExecutor** ex) {
  const char* op = "aclnnInplaceFillScalar";
  const aclnnStatus st = simcann::ops::check_scalar(op, "value", value);
  if (st != simcann::ops::kOk) return st;
  return simcann::ops::fill(op, selfRef, simcann::ops::value_of(value), ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceFillScalar)

// value: a one-element device tensor, read when the kernel runs (so a captured fill sees the
// value as it is at replay).
aclnnStatus aclnnInplaceFillTensorGetWorkspaceSize(aclTensor* selfRef, const aclTensor* value,
                                                   uint64_t* ws, aclOpExecutor** ex) {
  return simcann::ops::fill_tensor("aclnnInplaceFillTensor", selfRef, value, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceFillTensor)

// out = start, start + step, ... (torch.arange; `end` only fixed the output size, op-plugin
// ArangeKernelNpuOpApi.cpp: EXEC_NPU_CMD(aclnnArange, start, end, step, result)).
aclnnStatus aclnnArangeGetWorkspaceSize(const aclScalar* start, const aclScalar* end,
                                        const aclScalar* step, aclTensor* out, uint64_t* ws,
                                        aclOpExecutor** ex) {
  return simcann::ops::arange("aclnnArange", start, end, step, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnArange)

// ---- copy / cast ---------------------------------------------------------------------------

aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor* selfRef, const aclTensor* src, uint64_t* ws,
                                             aclOpExecutor** ex) {
  return simcann::ops::copy("aclnnInplaceCopy", selfRef, src, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceCopy)

aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor* self, aclDataType dtype, aclTensor* out,
                                      uint64_t* ws, aclOpExecutor** ex) {
  const char* op = "aclnnCast";
  if (out != nullptr && simcann::ops::view_of(out).dtype != dtype) {
    simcann::set_error("simcann: %s: out has aclDataType %d, dtype argument is %d", op,
                       static_cast<int>(simcann::ops::view_of(out).dtype), static_cast<int>(dtype));
    return simcann::ops::kErrInvalid;
  }
  return simcann::ops::copy(op, out, self, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnCast)

// ---- logical not (CANN aclnn_logical_not.h) ------------------------------------------------

aclnnStatus aclnnLogicalNotGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* ws,
                                            aclOpExecutor** ex) {
  return simcann::ops::logical_not("aclnnLogicalNot", self, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnLogicalNot)

aclnnStatus aclnnInplaceLogicalNotGetWorkspaceSize(aclTensor* selfRef, uint64_t* ws,
                                                   aclOpExecutor** ex) {
  return simcann::ops::logical_not("aclnnInplaceLogicalNot", selfRef, selfRef, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceLogicalNot)

// ---- add ----------------------------------------------------------------------------------

SIMCANN_BINARY_FAMILY_WITH_ALPHA(Add, BinaryOp::kAdd)

// out = self (scalar) + alpha * other (tensor).
aclnnStatus aclnnAddV3GetWorkspaceSize(const aclScalar* self, const aclTensor* other,
                                       const aclScalar* alpha, aclTensor* out, uint64_t* ws,
                                       aclOpExecutor** ex) {
  const BinaryCall c{"aclnnAddV3", BinaryOp::kAdd, nullptr, self, other, nullptr, alpha, out};
  return simcann::ops::binary(c, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnAddV3)

// ---- mul -----------------------------------------------------------------------------------

SIMCANN_BINARY_FAMILY(Mul, BinaryOp::kMul)

// ---- sub (out = self - alpha * other) -----------------------------------------------------

SIMCANN_BINARY_FAMILY_WITH_ALPHA(Sub, BinaryOp::kSub)

// ---- div (true division; rounding modes go through aclnnDivMod, not implemented) ----------

SIMCANN_BINARY_FAMILY(Div, BinaryOp::kDiv)

}  // extern "C"
