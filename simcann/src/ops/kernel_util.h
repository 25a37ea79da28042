// Helpers shared by the kernels of the ops files (compare.cpp, reduce.cpp, nn.cpp, softmax.cpp,
// matmul_nd.cpp, elementwise.cpp): where the elements of a strided (possibly broadcast) view lie,
// the device ranges a kernel's views touch, broadcasting, dtype promotion, a kernel made of
// several kernels run as one task, and the argument checks several ops make alike.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "ops_internal.h"

namespace simcann {
namespace ops {

// Byte address of every element of `v` broadcast to `shape` (NumPy rules, `v` right-aligned), in
// row-major order of `shape`. The caller has checked that `v` broadcasts to `shape`.
inline std::vector<char*> element_addresses(const TensorView& v,
                                            const std::vector<int64_t>& shape) {
  const int64_t item = static_cast<int64_t>(dtype_size(v.dtype));
  const size_t nd = shape.size(), vd = v.sizes.size();
  std::vector<int64_t> step(nd, 0);  // element stride per output dimension, 0 when broadcast
  for (size_t k = 0; k < vd; ++k) {
    if (v.sizes[k] != 1) step[nd - vd + k] = v.strides[k];
  }
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  std::vector<char*> out;
  out.reserve(static_cast<size_t>(total > 0 ? total : 0));
  std::vector<int64_t> idx(nd, 0);
  char* base = static_cast<char*>(v.data);
  for (int64_t n = 0; n < total; ++n) {
    int64_t off = v.offset;
    for (size_t k = 0; k < nd; ++k) off += idx[k] * step[k];
    out.push_back(base + off * item);
    for (size_t k = nd; k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

// The elements of `v` itself, row-major.
inline std::vector<char*> element_addresses(const TensorView& v) {
  return element_addresses(v, v.sizes);
}

// The bytes a view spans, as a memory range for the runtime's checks (none for an empty view).
inline void add_view_range(std::vector<MemRange>* out, const TensorView& v, bool write) {
  if (v.numel() == 0) return;
  const int64_t item = static_cast<int64_t>(dtype_size(v.dtype));
  int64_t hi = v.offset;
  for (size_t k = 0; k < v.sizes.size(); ++k) hi += (v.sizes[k] - 1) * v.strides[k];
  const char* lo = static_cast<const char*>(v.data) + v.offset * item;
  const size_t n = static_cast<size_t>((hi - v.offset + 1) * item);
  out->push_back(write ? MemRange::dev_write(lo, n) : MemRange::dev_read(lo, n));
}

// A kernel's ranges(): the views it reads, then the views it writes (a null entry, an operand the
// kernel does not have, and an empty view touch nothing).
inline std::vector<MemRange> view_ranges(std::initializer_list<const TensorView*> reads,
                                         std::initializer_list<const TensorView*> writes) {
  std::vector<MemRange> r;
  for (const TensorView* v : reads) {
    if (v != nullptr) add_view_range(&r, *v, false);
  }
  for (const TensorView* v : writes) {
    if (v != nullptr) add_view_range(&r, *v, true);
  }
  return r;
}

// The shape `a` and `b` broadcast to, or false (NumPy rules).
inline bool broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                            std::vector<int64_t>* out) {
  const size_t nd = a.size() > b.size() ? a.size() : b.size();
  out->assign(nd, 1);
  for (size_t k = 0; k < nd; ++k) {
    const int64_t x = k < nd - a.size() ? 1 : a[k - (nd - a.size())];
    const int64_t y = k < nd - b.size() ? 1 : b[k - (nd - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    (*out)[k] = x == 1 ? y : x;
  }
  return true;
}

// The type two operands are compared / concatenated in: PyTorch's promoteTypes, which CANN's
// "互推导关系" table (hicann/ops-math docs/zh/context/deduction_relationship.md, used by
// op::PromoteType in aclnnEqual / aclnnCat) follows for these types.
inline aclDataType promote_types(aclDataType a, aclDataType b) {
  if (a == b) return a;
  if (a == ACL_BOOL) return b;
  if (b == ACL_BOOL) return a;
  const bool fa = dtype_is_floating(a), fb = dtype_is_floating(b);
  if (fa != fb) return fa ? a : b;
  if (fa) {
    if (a == ACL_DOUBLE || b == ACL_DOUBLE) return ACL_DOUBLE;
    return ACL_FLOAT;  // float16 with bfloat16, or either with float32
  }
  if (a == ACL_UINT8 || b == ACL_UINT8) {
    const aclDataType s = a == ACL_UINT8 ? b : a;  // the signed one
    return s == ACL_INT8 ? ACL_INT16 : s;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

// `v` (exact as a double) rounded to element type `dtype`, as a cast to it would.
inline double round_to(aclDataType dtype, double v) {
  if (dtype == ACL_DOUBLE) return v;
  char buf[8] = {0};
  store_double(dtype, buf, v);
  return load_double(dtype, buf);
}

// Several kernels run as one task, in order (one launch on the device).
class KernelList : public Kernel {
 public:
  explicit KernelList(std::vector<std::shared_ptr<Kernel>> parts) : parts_(std::move(parts)) {}
  aclError run() const override {
    for (const auto& k : parts_) {
      const aclError e = k->run();
      if (e != ACL_SUCCESS) return e;
    }
    return ACL_SUCCESS;
  }
  std::vector<MemRange> ranges() const override {
    std::vector<MemRange> r;
    for (const auto& k : parts_) {
      for (const MemRange& m : k->ranges()) r.push_back(m);
    }
    return r;
  }

 private:
  std::vector<std::shared_ptr<Kernel>> parts_;
};

// Phase-1 epilogue: hand `kernel` to the caller as an executor; no workspace.
inline aclnnStatus finish_op(const char* op, std::shared_ptr<Kernel> kernel, uint64_t* ws,
                             aclOpExecutor** ex) {
  if (ws == nullptr || ex == nullptr) {
    set_error("simcann: %s: null workspaceSize or executor out-parameter", op);
    return kErrNullptr;
  }
  *ws = 0;
  *ex = make_executor(op, std::move(kernel));
  return kOk;
}

// An aclnn argument error: the message names the op; ACLNN_ERR_PARAM_INVALID.
inline aclnnStatus invalid(const char* op, const char* why) {
  set_error("simcann: %s: %s", op, why);
  return kErrInvalid;
}

// Argument checks several ops make alike (each op's comment cites its CANN source).

// Every one of `views` of a dtype in `allowed` (the op's DTYPE_SUPPORT_LIST); `why` otherwise.
inline aclnnStatus check_dtypes(const char* op, std::initializer_list<const TensorView*> views,
                                std::initializer_list<aclDataType> allowed, const char* why) {
  for (const TensorView* v : views) {
    bool ok = false;
    for (aclDataType t : allowed) ok = ok || v->dtype == t;
    if (!ok) return invalid(op, why);
  }
  return kOk;
}

// out of self's shape (the unary ops, and the scalar forms of the binary ones).
inline aclnnStatus check_same_shape(const char* op, const TensorView& self, const TensorView& out) {
  if (self.sizes != out.sizes) return invalid(op, "out must have self's shape");
  return kOk;
}

// out a BOOL tensor (each caller cites its op's rule).
inline aclnnStatus check_out_bool(const char* op, const TensorView& out) {
  if (out.dtype != ACL_BOOL) return invalid(op, "out must be a bool tensor");
  return kOk;
}

}  // namespace ops
}  // namespace simcann
