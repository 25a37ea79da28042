// Argument checks shared by the ops. Anything the kernels cannot compute exactly is rejected in
// aclnnXxxGetWorkspaceSize with an aclnn error code and a message naming the op (torch_npu raises
// it on the calling thread: NPU_CHECK_ERROR(workspace_status, ...) in EXEC_NPU_CMD).
#include "ops_internal.h"

namespace simcann {
namespace ops {
namespace {

// Formats whose storage is the plain row-major array the view strides describe. torch_npu
// passes NCL / NCHW / NCDHW / ND for base-format tensors by rank (op-plugin ConvertType).
bool is_base_format(aclFormat f) {
  switch (f) {
    case ACL_FORMAT_ND:
    case ACL_FORMAT_NCHW:
    case ACL_FORMAT_NHWC:
    case ACL_FORMAT_NCDHW:
    case ACL_FORMAT_NDHWC:
    case ACL_FORMAT_NCL:
    case ACL_FORMAT_NC:
    case ACL_FORMAT_HWCN:
      return true;
    default:
      return false;
  }
}

aclnnStatus check_layout(const char* op, const char* what, const TensorView& v) {
  if (v.strides.size() != v.sizes.size()) {
    set_error("simcann: %s: %s has %zu strides for %zu dims", op, what, v.strides.size(),
              v.sizes.size());
    return kErrInvalid;
  }
  int64_t hi = v.offset;
  for (size_t k = 0; k < v.sizes.size(); ++k) {
    if (v.sizes[k] < 0 || v.strides[k] < 0) {
      set_error("simcann: %s: %s has a negative size or stride (dim %zu), not supported", op, what,
                k);
      return kErrInvalid;
    }
    if (v.sizes[k] > 0) hi += (v.sizes[k] - 1) * v.strides[k];
  }
  if (v.offset < 0) {
    set_error("simcann: %s: %s has a negative storage offset", op, what);
    return kErrInvalid;
  }
  if (v.numel() > 0 && v.data == nullptr) {
    set_error("simcann: %s: %s has no data pointer", op, what);
    return kErrNullptr;
  }
  int64_t storage = 1;
  for (int64_t d : v.storage_dims) storage *= d;
  if (v.numel() > 0 && !v.storage_dims.empty() && hi >= storage) {
    set_error("simcann: %s: %s view reaches element %lld of a storage of %lld elements", op, what,
              static_cast<long long>(hi), static_cast<long long>(storage));
    return kErrInvalid;
  }
  return kOk;
}

}  // namespace

aclnnStatus check_tensor(const char* op, const char* what, const aclTensor* t) {
  if (t == nullptr) {
    set_error("simcann: %s: %s is a null aclTensor", op, what);
    return kErrNullptr;
  }
  const TensorView& v = view_of(t);
  if (dtype_size(v.dtype) == 0) {
    set_error(
        "simcann: %s: %s has dtype %s (aclDataType %d), which the simulated op does not "
        "support (supported: float32, float16, bfloat16, float64, int8, int16, int32, "
        "int64, uint8, bool)",
        op, what, dtype_name(v.dtype), static_cast<int>(v.dtype));
    return kErrInvalid;
  }
  if (!is_base_format(v.format)) {
    set_error(
        "simcann: %s: %s has private format %d (e.g. NC1HWC0 / FRACTAL_NZ), which the "
        "simulated op does not support",
        op, what, static_cast<int>(v.format));
    return kErrInvalid;
  }
  return check_layout(op, what, v);
}

aclnnStatus check_broadcast(const char* op, const TensorView& out, const TensorView& in) {
  const size_t nd = out.sizes.size();
  const size_t vd = in.sizes.size();
  bool ok = vd <= nd;
  for (size_t k = 0; ok && k < vd; ++k) {
    const int64_t s = in.sizes[k];
    ok = s == 1 || s == out.sizes[nd - vd + k];
  }
  if (!ok) {
    set_error(
        "simcann: %s: an input of rank %zu does not broadcast to the output shape (rank "
        "%zu)",
        op, vd, nd);
    return kErrInvalid;
  }
  return kOk;
}

}  // namespace ops
}  // namespace simcann
