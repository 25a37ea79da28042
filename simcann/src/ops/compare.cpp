// Comparison ops of the simulated device: aclnnIsClose, aclnnIsFinite, aclnnEq / Ne / Lt / Le /
// Gt / Ge Tensor and Scalar (and their Inplace forms), aclnnEqual, aclnnAbs, aclnnCeil,
// aclnnSqrt / aclnnInplaceSqrt, bitwise and / or, masked fill, masked select.
// They are what torch.allclose / torch.isclose, torch.testing.assert_close, torch.equal, ==, !=
// and abs() reach on torch_npu (SIMCANN_TRACE=1 on torch_npu 2.14; op-plugin
// op_plugin/config/op_plugin_functions.yaml `exec: aclnnIsClose` / `aclnnIsFinite` / `aclnnAbs`,
// EqKernelNpuOpApi.cpp, NeKernelNpuOpApi.cpp, EqualKernelNpuOpApi.cpp).
//
// Semantics and argument checks follow CANN's op sources (hicann/ops-math, op_api/aclnn_*.cpp
// and docs/aclnn*.md of math/is_close, is_finite, equal, not_equal, tensor_equal, abs, sqrt;
// torch.sqrt: op-plugin `exec: aclnnSqrt`, TorchAir's smoke test aclgraph_test.py); each rule
// cites its file. Kernels read their inputs when they run (eagerly on the stream worker, or at
// every replay of a captured graph) and walk strided, broadcast views.
#include <cmath>
#include <cstring>

#include "kernel_util.h"

namespace simcann {
namespace ops {
namespace {

// self and other broadcast, and out has exactly the broadcast shape (aclnn_isclose.cpp
// CheckShape, not_equal / equal aclnn CheckShape: OP_CHECK_BROADCAST_AND_INFER_SHAPE +
// OP_CHECK_SHAPE_NOT_EQUAL_WITH_EXPECTED_SIZE).
aclnnStatus check_binary_shapes(const char* op, const TensorView& a, const TensorView& b,
                                const TensorView& out) {
  std::vector<int64_t> shape;
  if (!broadcast_shape(a.sizes, b.sizes, &shape)) {
    return invalid(op, "self and other do not broadcast to one shape");
  }
  if (shape != out.sizes) return invalid(op, "out must have the broadcast shape of self and other");
  return kOk;
}

// ---- elementwise comparison kernel ---------------------------------------------------------

enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };

// a (cmp) b; every ordering with a NaN is false, != is true (IEEE, torch's CPU result).
template <typename T>
bool compare(Cmp cmp, T a, T b) {
  switch (cmp) {
    case Cmp::kEq: return a == b;
    case Cmp::kNe: return a != b;
    case Cmp::kLt: return a < b;
    case Cmp::kLe: return a <= b;
    case Cmp::kGt: return a > b;
    case Cmp::kGe: return a >= b;
  }
  return false;
}

// out[i] = (a[i] cmp b[i]) with both sides cast to `compute` first (aclnnEqTensor /
// aclnnNeTensor: op::PromoteType then l0op::Cast, math/equal + math/not_equal op_api; the
// orderings likewise, math/less_equal, less, greater_equal, greater docs). NaN is unequal to
// everything, itself included (IEEE; torch's CPU result).
class CompareKernel : public Kernel {
 public:
  CompareKernel(Cmp cmp, const TensorView& out, const TensorView& a, const TensorView* b,
                const ScalarValue* scalar, aclDataType compute)
      : cmp_(cmp), out_(out), a_(a), has_b_(b != nullptr), compute_(compute) {
    if (has_b_) b_ = *b;
    if (scalar != nullptr) scalar_ = *scalar;
  }

  aclError run() const override {
    const std::vector<char*> po = element_addresses(out_);
    const std::vector<char*> pa = element_addresses(a_, out_.sizes);
    const std::vector<char*> pb = has_b_ ? element_addresses(b_, out_.sizes) : std::vector<char*>();
    const bool floating = dtype_is_floating(compute_);
    for (size_t i = 0; i < po.size(); ++i) {
      bool r;
      if (floating) {
        const double x = round_to(compute_, load_double(a_.dtype, pa[i]));
        const double yb = has_b_ ? load_double(b_.dtype, pb[i]) : scalar_double();
        const double y = round_to(compute_, yb);
        r = compare(cmp_, x, y);
      } else {
        const int64_t x = load_int64(a_.dtype, pa[i]);
        const int64_t y = has_b_ ? load_int64(b_.dtype, pb[i]) : scalar_.as_int;
        r = compare(cmp_, x, y);
      }
      store_int64(out_.dtype, po[i], r ? 1 : 0);
    }
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override {
    return view_ranges({&a_, has_b_ ? &b_ : nullptr}, {&out_});
  }

 private:
  double scalar_double() const {
    return scalar_.is_floating ? scalar_.as_double : static_cast<double>(scalar_.as_int);
  }

  Cmp cmp_;
  TensorView out_;
  TensorView a_;
  TensorView b_;
  bool has_b_;
  ScalarValue scalar_;
  aclDataType compute_;
};

// The type a tensor is compared with a scalar in (PyTorch's result_type of a tensor and a
// wrapped number, which the aclnn*Scalar ops receive already decided by op-plugin): the tensor's
// floating type; float32 for an integral tensor and a floating scalar; int64 otherwise.
aclDataType scalar_compare_type(aclDataType tensor, const ScalarValue& s) {
  if (dtype_is_floating(tensor)) return tensor;
  return s.is_floating ? ACL_FLOAT : ACL_INT64;
}

aclnnStatus compare_tensor(const char* op, Cmp cmp, const aclTensor* self, const aclTensor* other,
                           const aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "other", other));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView &a = view_of(self), &b = view_of(other), &o = view_of(out);
  SIMCANN_CHECK(check_binary_shapes(op, a, b, o));
  const aclDataType compute = promote_types(a.dtype, b.dtype);
  return finish_op(op, std::make_shared<CompareKernel>(cmp, o, a, &b, nullptr, compute), ws, ex);
}

aclnnStatus compare_scalar(const char* op, Cmp cmp, const aclTensor* self, const aclScalar* other,
                           const aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_scalar(op, "other", other));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView &a = view_of(self), &o = view_of(out);
  SIMCANN_CHECK(check_same_shape(op, a, o));
  const ScalarValue& s = value_of(other);
  const aclDataType compute = scalar_compare_type(a.dtype, s);
  return finish_op(op, std::make_shared<CompareKernel>(cmp, o, a, nullptr, &s, compute), ws, ex);
}

// ---- equal (one bool for the whole tensors) --------------------------------------------------

// out[0] = same shape and every element equal after promotion (math/tensor_equal
// op_api/aclnn_equal.cpp: shapes differ -> Fill(false); both empty with one shape -> true;
// else Cast both to PromoteType (bfloat16 -> float) and TensorEqual).
class EqualKernel : public Kernel {
 public:
  EqualKernel(const TensorView& out, const TensorView& a, const TensorView& b)
      : out_(out), a_(a), b_(b), compute_(promote_types(a.dtype, b.dtype)) {}

  aclError run() const override {
    bool eq = a_.sizes == b_.sizes;
    if (eq) {
      const std::vector<char*> pa = element_addresses(a_), pb = element_addresses(b_);
      const bool floating = dtype_is_floating(compute_);
      for (size_t i = 0; eq && i < pa.size(); ++i) {
        if (floating) {
          eq = round_to(compute_, load_double(a_.dtype, pa[i])) ==
               round_to(compute_, load_double(b_.dtype, pb[i]));
        } else {
          eq = load_int64(a_.dtype, pa[i]) == load_int64(b_.dtype, pb[i]);
        }
      }
    }
    for (char* p : element_addresses(out_)) store_int64(out_.dtype, p, eq ? 1 : 0);
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override {
    if (a_.sizes != b_.sizes) return view_ranges({}, {&out_});  // the inputs are never read
    return view_ranges({&a_, &b_}, {&out_});
  }

 private:
  TensorView out_;
  TensorView a_;
  TensorView b_;
  aclDataType compute_;
};

aclnnStatus equal(const char* op, const aclTensor* self, const aclTensor* other,
                  const aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "other", other));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView& o = view_of(out);
  // aclnn_equal.cpp CheckDtypeValid (OUT_DTYPE_SUPPORT_LIST = {DT_BOOL}) and CheckOutShape ([1]).
  SIMCANN_CHECK(check_out_bool(op, o));
  if (o.sizes != std::vector<int64_t>{1}) return invalid(op, "out must have shape [1]");
  return finish_op(op, std::make_shared<EqualKernel>(o, view_of(self), view_of(other)), ws, ex);
}

// ---- isclose ---------------------------------------------------------------------------------

// out[i] = self == other, or both NaN with equal_nan, or |self - other| finite and
// <= atol + rtol * |other| (docs/aclnnIsClose.md: non-finite values are close only when equal;
// NaNs close only with equal_nan). rtol / atol are cast to float32 (aclnn_isclose.cpp
// `static_cast<float>(rtol)`), and the kernel computes in float32 (op_kernel/arch35/
// is_close_dag.h: AbsSub, Abs, Muls(rtol), Adds(atol), Compare LE, finite mask); float64 and
// the integer types are computed in double here (exact for them; the source is float-only).
class IsCloseKernel : public Kernel {
 public:
  IsCloseKernel(const TensorView& out, const TensorView& a, const TensorView& b, double rtol,
                double atol, bool equal_nan)
      : out_(out), a_(a), b_(b), rtol_(rtol), atol_(atol), equal_nan_(equal_nan) {}

  aclError run() const override {
    const std::vector<char*> po = element_addresses(out_);
    const std::vector<char*> pa = element_addresses(a_, out_.sizes);
    const std::vector<char*> pb = element_addresses(b_, out_.sizes);
    const bool in_float = a_.dtype == ACL_FLOAT || a_.dtype == ACL_FLOAT16 || a_.dtype == ACL_BF16;
    for (size_t i = 0; i < po.size(); ++i) {
      const double x = load_double(a_.dtype, pa[i]), y = load_double(b_.dtype, pb[i]);
      const bool c = in_float ? close<float>(static_cast<float>(x), static_cast<float>(y))
                              : close<double>(x, y);
      store_int64(out_.dtype, po[i], c ? 1 : 0);
    }
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({&a_, &b_}, {&out_}); }

 private:
  template <typename C>
  bool close(C x, C y) const {
    if (x == y) return true;
    if (equal_nan_ && std::isnan(x) && std::isnan(y)) return true;
    const C diff = std::fabs(x - y);
    const C allowed = std::fabs(y) * static_cast<C>(static_cast<float>(rtol_)) +
                      static_cast<C>(static_cast<float>(atol_));
    return std::isfinite(diff) && diff <= allowed;
  }

  TensorView out_;
  TensorView a_;
  TensorView b_;
  double rtol_;
  double atol_;
  bool equal_nan_;
};

aclnnStatus isclose(const char* op, const aclTensor* self, const aclTensor* other, double rtol,
                    double atol, bool equal_nan, const aclTensor* out, uint64_t* ws,
                    aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "other", other));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView &a = view_of(self), &b = view_of(other), &o = view_of(out);
  // aclnn_isclose.cpp CheckDtypeValid: OP_CHECK_DTYPE_NOT_MATCH(self, other->GetDataType()).
  if (a.dtype != b.dtype) return invalid(op, "self and other must have the same dtype");
  SIMCANN_CHECK(check_out_bool(op, o));  // docs/aclnnIsClose.md: out BOOL
  SIMCANN_CHECK(check_binary_shapes(op, a, b, o));
  return finish_op(op, std::make_shared<IsCloseKernel>(o, a, b, rtol, atol, equal_nan), ws, ex);
}

// ---- isfinite / abs (unary) ------------------------------------------------------------------

enum class Unary { kIsFinite, kAbs, kCeil, kSqrt };

// Sqrt of one element as math/sqrt/op_api/aclnn_sqrt.cpp computes it: integral and bool inputs
// are cast first (DTYPE_CAST_LIST) to float32, int64 to double ("cast算子INT64转float会出错，故转
// double"); 16-bit floats are computed in float32 (docs/aclnnSqrt&aclnnInplaceSqrt.md: "对于16位的
// 数据类型将其通过Cast接口转换为32位浮点数进行计算"), double in double; negative -> NaN. The
// caller's store rounds the result to out's dtype (the source's final Cast).
double sqrt_element(aclDataType dtype, const void* p) {
  if (dtype == ACL_DOUBLE) return std::sqrt(load_double(dtype, p));
  if (dtype == ACL_INT64) return std::sqrt(static_cast<double>(load_int64(dtype, p)));
  const float x = dtype_is_floating(dtype) ? static_cast<float>(load_double(dtype, p))
                                           : static_cast<float>(load_int64(dtype, p));
  return static_cast<double>(std::sqrt(x));
}

// IsFinite: out[i] = self[i] is not +-inf or NaN; integral and bool inputs are all finite
// (math/is_finite op_api/aclnn_is_finite.cpp fills `true` for non-floating types).
// Ceil: out[i] = ceil(self[i]) (integers unchanged).
// Abs: out[i] = |self[i]|, integers wrapping like their type (|INT8_MIN| stays INT8_MIN, as in
// PyTorch's CPU kernel); |NaN| is NaN.
class UnaryKernel : public Kernel {
 public:
  UnaryKernel(Unary kind, const TensorView& out, const TensorView& self)
      : kind_(kind), out_(out), self_(self) {}

  aclError run() const override {
    const std::vector<char*> po = element_addresses(out_);
    const std::vector<char*> ps = element_addresses(self_);
    const bool floating = dtype_is_floating(self_.dtype);
    for (size_t i = 0; i < po.size(); ++i) {
      if (kind_ == Unary::kIsFinite) {
        store_int64(out_.dtype, po[i], !floating || std::isfinite(load_double(self_.dtype, ps[i])));
      } else if (kind_ == Unary::kSqrt) {
        store_double(out_.dtype, po[i], sqrt_element(self_.dtype, ps[i]));
      } else if (floating) {
        const double x = load_double(self_.dtype, ps[i]);
        store_double(out_.dtype, po[i], kind_ == Unary::kCeil ? std::ceil(x) : std::fabs(x));
      } else if (kind_ == Unary::kCeil) {
        store_int64(out_.dtype, po[i], load_int64(self_.dtype, ps[i]));
      } else {
        const int64_t v = load_int64(self_.dtype, ps[i]);
        const int64_t neg = static_cast<int64_t>(0ULL - static_cast<uint64_t>(v));  // wraps
        store_int64(out_.dtype, po[i], v < 0 ? neg : v);
      }
    }
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({&self_}, {&out_}); }

 private:
  Unary kind_;
  TensorView out_;
  TensorView self_;
};

aclnnStatus unary(const char* op, Unary kind, const aclTensor* self, const aclTensor* out,
                  uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView &s = view_of(self), &o = view_of(out);
  SIMCANN_CHECK(check_same_shape(op, s, o));
  // aclnn_is_finite.cpp CheckDtypeValid: OP_CHECK_DTYPE_NOT_MATCH(out, DT_BOOL).
  if (kind == Unary::kIsFinite) SIMCANN_CHECK(check_out_bool(op, o));
  // docs/aclnnAbs.md: out has self's dtype family; a bool input has no absolute value to
  // compute but is accepted (the value itself).
  // aclnn_sqrt.cpp CheckDtypeValid: self of DTYPE_SUPPORT_910B_LIST (every type these ops model),
  // and the compute type (float32 for integral / bool self, else self's) must cast to out
  // (OP_CHECK_RESULT_DTYPE_CAST_FAILED: a floating result does not cast to an integral out).
  // CheckInplaceDtypeValid: selfRef of ASCEND910B_DTYPE_OUT_LIST (floating types only).
  if (kind == Unary::kSqrt && !dtype_is_floating(o.dtype)) {
    return invalid(op, self == out ? "selfRef must be a floating type"
                                   : "out must be a floating type (the result is)");
  }
  return finish_op(op, std::make_shared<UnaryKernel>(kind, o, s), ws, ex);
}

// ---- bitwise and / or ------------------------------------------------------------------------

enum class Bitwise { kAnd, kOr };

// out[i] = a[i] & b[i] (| for kOr) on the integer values, stored in out's type (bool: logical;
// docs/aclnnBitwiseAndTensor.md, aclnnBitwiseOrTensor&aclnnInplaceBitwiseOrTensor.md: BOOL and
// the integer types only; torch's `mask & mask` on bool masks, e.g. in tensor printing).
class BitwiseKernel : public Kernel {
 public:
  BitwiseKernel(Bitwise kind, const TensorView& out, const TensorView& a, const TensorView& b)
      : kind_(kind), out_(out), a_(a), b_(b) {}

  aclError run() const override {
    const std::vector<char*> po = element_addresses(out_);
    const std::vector<char*> pa = element_addresses(a_, out_.sizes);
    const std::vector<char*> pb = element_addresses(b_, out_.sizes);
    for (size_t i = 0; i < po.size(); ++i) {
      const int64_t x = load_int64(a_.dtype, pa[i]), y = load_int64(b_.dtype, pb[i]);
      store_int64(out_.dtype, po[i], kind_ == Bitwise::kAnd ? (x & y) : (x | y));
    }
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({&a_, &b_}, {&out_}); }

 private:
  Bitwise kind_;
  TensorView out_;
  TensorView a_;
  TensorView b_;
};

aclnnStatus bitwise(const char* op, Bitwise kind, const aclTensor* self, const aclTensor* other,
                    const aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "other", other));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView &a = view_of(self), &b = view_of(other), &o = view_of(out);
  if (dtype_is_floating(a.dtype) || dtype_is_floating(b.dtype) || dtype_is_floating(o.dtype)) {
    return invalid(op, "bitwise ops take bool and integer tensors only");
  }
  SIMCANN_CHECK(check_binary_shapes(op, a, b, o));
  return finish_op(op, std::make_shared<BitwiseKernel>(kind, o, a, b), ws, ex);
}

// ---- masked fill -----------------------------------------------------------------------------

// selfRef[i] = value where mask[i] (mask BOOL, broadcast to selfRef; value a scalar, or a
// one-element device tensor read when the kernel runs): docs/aclnnInplaceMaskedFillScalar.md,
// aclnnInplaceMaskedFillTensor.md.
class MaskedFillKernel : public Kernel {
 public:
  MaskedFillKernel(const TensorView& self, const TensorView& mask, const ScalarValue* scalar,
                   const TensorView* value)
      : self_(self), mask_(mask), has_value_(value != nullptr) {
    if (scalar != nullptr) scalar_ = *scalar;
    if (has_value_) value_ = *value;
  }

  aclError run() const override {
    const std::vector<char*> ps = element_addresses(self_);
    const std::vector<char*> pm = element_addresses(mask_, self_.sizes);
    char fill[8] = {0};  // the value in self's type
    if (has_value_) {
      const char* pv = element_addresses(value_)[0];
      if (dtype_is_floating(value_.dtype)) {
        store_double(self_.dtype, fill, load_double(value_.dtype, pv));
      } else {
        store_int64(self_.dtype, fill, load_int64(value_.dtype, pv));
      }
    } else if (scalar_.is_floating) {
      store_double(self_.dtype, fill, scalar_.as_double);
    } else {
      store_int64(self_.dtype, fill, scalar_.as_int);
    }
    const size_t item = dtype_size(self_.dtype);
    for (size_t i = 0; i < ps.size(); ++i) {
      if (load_int64(mask_.dtype, pm[i]) != 0) std::memcpy(ps[i], fill, item);
    }
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override {
    return view_ranges({&mask_, has_value_ ? &value_ : nullptr}, {&self_});
  }

 private:
  TensorView self_;
  TensorView mask_;
  bool has_value_;
  ScalarValue scalar_;
  TensorView value_;
};

aclnnStatus masked_fill(const char* op, const aclTensor* self, const aclTensor* mask,
                        const aclScalar* scalar, const aclTensor* value, uint64_t* ws,
                        aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "selfRef", self));
  SIMCANN_CHECK(check_tensor(op, "mask", mask));
  const TensorView &s = view_of(self), &m = view_of(mask);
  if (m.dtype != ACL_BOOL) return invalid(op, "mask must be a bool tensor");
  SIMCANN_CHECK(check_broadcast(op, s, m));
  if (value != nullptr) {
    SIMCANN_CHECK(check_tensor(op, "value", value));
    if (view_of(value).numel() != 1) return invalid(op, "value must have one element");
    auto kernel = std::make_shared<MaskedFillKernel>(s, m, nullptr, &view_of(value));
    return finish_op(op, kernel, ws, ex);
  }
  SIMCANN_CHECK(check_scalar(op, "value", scalar));
  auto kernel = std::make_shared<MaskedFillKernel>(s, m, &value_of(scalar), nullptr);
  return finish_op(op, kernel, ws, ex);
}

// ---- masked select ---------------------------------------------------------------------------

// out[0..n) = the elements of self where mask is true, row-major over their broadcast shape;
// out's shape becomes [n] (docs/aclnnMaskedSelect.md; op-plugin MaskedSelectKernelNpuOpApi.cpp
// allocates out for every element, runs EXEC_NPU_CMD_SYNC and resizes out to aclGetViewShape).
class MaskedSelectKernel : public Kernel {
 public:
  MaskedSelectKernel(const TensorView& out, const TensorView& self, const TensorView& mask,
                     std::vector<int64_t> shape)
      : out_(out), self_(self), mask_(mask), shape_(std::move(shape)) {}

  aclError run() const override {
    const std::vector<char*> ps = element_addresses(self_, shape_);
    const std::vector<char*> pm = element_addresses(mask_, shape_);
    const std::vector<char*> po = element_addresses(out_);
    size_t n = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
      if (load_int64(mask_.dtype, pm[i]) == 0) continue;
      if (dtype_is_floating(self_.dtype)) {
        store_double(out_.dtype, po[n], load_double(self_.dtype, ps[i]));
      } else {
        store_int64(out_.dtype, po[n], load_int64(self_.dtype, ps[i]));
      }
      ++n;
    }
    *out_.produced_sizes = {static_cast<int64_t>(n)};
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({&self_, &mask_}, {&out_}); }

 private:
  TensorView out_;
  TensorView self_;
  TensorView mask_;
  std::vector<int64_t> shape_;
};

aclnnStatus masked_select(const char* op, const aclTensor* self, const aclTensor* mask,
                          aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "mask", mask));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView &s = view_of(self), &m = view_of(mask);
  if (m.dtype != ACL_BOOL && m.dtype != ACL_UINT8) return invalid(op, "mask must be bool");
  std::vector<int64_t> shape;
  if (!broadcast_shape(s.sizes, m.sizes, &shape)) {
    return invalid(op, "self and mask do not broadcast to one shape");
  }
  TensorView& o = const_cast<TensorView&>(view_of(out));  // our descriptor: its produced shape
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (o.sizes.size() != 1 || o.sizes[0] < total) {
    return invalid(op, "out must be 1-D with room for every element");
  }
  o.produced_sizes = std::make_shared<std::vector<int64_t>>(o.sizes);
  return finish_op(op, std::make_shared<MaskedSelectKernel>(o, s, m, shape), ws, ex);
}

}  // namespace
}  // namespace ops
}  // namespace simcann

namespace so = simcann::ops;

// aclnnXxTensor(self, other, out), aclnnInplaceXxTensor(selfRef, other), aclnnXxScalar(self,
// other, out), aclnnInplaceXxScalar(selfRef, other) (docs/aclnnEqTensor&aclnnInplaceEqTensor.md,
// aclnnNeTensor&aclnnInplaceNeTensor.md, the Scalar ones likewise). The in-place forms write
// 1 / 0 into selfRef's own type.
#define SIMCANN_COMPARE_FAMILY(X, cmp)                                                          \
  aclnnStatus aclnn##X##TensorGetWorkspaceSize(const aclTensor* self, const aclTensor* other,   \
                                               aclTensor* out, uint64_t* ws, aclOpExecutor** ex) { \
    return so::compare_tensor("aclnn" #X "Tensor", cmp, self, other, out, ws, ex);              \
  }                                                                                             \
  SIMCANN_ACLNN_LAUNCH(aclnn##X##Tensor)                                                        \
  aclnnStatus aclnnInplace##X##TensorGetWorkspaceSize(aclTensor* selfRef, const aclTensor* other, \
                                                      uint64_t* ws, aclOpExecutor** ex) {       \
    return so::compare_tensor("aclnnInplace" #X "Tensor", cmp, selfRef, other, selfRef, ws, ex); \
  }                                                                                             \
  SIMCANN_ACLNN_LAUNCH(aclnnInplace##X##Tensor)                                                 \
  aclnnStatus aclnn##X##ScalarGetWorkspaceSize(const aclTensor* self, const aclScalar* other,   \
                                               aclTensor* out, uint64_t* ws, aclOpExecutor** ex) { \
    return so::compare_scalar("aclnn" #X "Scalar", cmp, self, other, out, ws, ex);              \
  }                                                                                             \
  SIMCANN_ACLNN_LAUNCH(aclnn##X##Scalar)                                                        \
  aclnnStatus aclnnInplace##X##ScalarGetWorkspaceSize(aclTensor* selfRef, const aclScalar* other, \
                                                      uint64_t* ws, aclOpExecutor** ex) {       \
    return so::compare_scalar("aclnnInplace" #X "Scalar", cmp, selfRef, other, selfRef, ws, ex); \
  }                                                                                             \
  SIMCANN_ACLNN_LAUNCH(aclnnInplace##X##Scalar)

extern "C" {

SIMCANN_COMPARE_FAMILY(Eq, so::Cmp::kEq)
SIMCANN_COMPARE_FAMILY(Ne, so::Cmp::kNe)
// <, <=, >, >= (docs/aclnnLtTensor, aclnnLeScalar ...; torch_npu's TestCase.assertEqual and
// tensor printing reach LeScalar / GtScalar).
SIMCANN_COMPARE_FAMILY(Lt, so::Cmp::kLt)
SIMCANN_COMPARE_FAMILY(Le, so::Cmp::kLe)
SIMCANN_COMPARE_FAMILY(Gt, so::Cmp::kGt)
SIMCANN_COMPARE_FAMILY(Ge, so::Cmp::kGe)

// docs/aclnnEqual.md: aclnnEqualGetWorkspaceSize(self, other, out, ...), out a [1] bool.
aclnnStatus aclnnEqualGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                       aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  return so::equal("aclnnEqual", self, other, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnEqual)

// docs/aclnnIsClose.md: (self, other, double rtol, double atol, bool equal_nan, out, ...).
aclnnStatus aclnnIsCloseGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                         double rtol, double atol, bool equal_nan, aclTensor* out,
                                         uint64_t* ws, aclOpExecutor** ex) {
  return so::isclose("aclnnIsClose", self, other, rtol, atol, equal_nan, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnIsClose)

// aclnnXxGetWorkspaceSize(self, out, ...) and aclnnInplaceXxGetWorkspaceSize(selfRef, ...) of the
// unary op Unary::kXx (selfRef is both self and out).
#define SIMCANN_UNARY(X)                                                                           \
  aclnnStatus aclnn##X##GetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* ws,      \
                                         aclOpExecutor** ex) {                                     \
    return so::unary("aclnn" #X, so::Unary::k##X, self, out, ws, ex);                              \
  }                                                                                                \
  SIMCANN_ACLNN_LAUNCH(aclnn##X)
#define SIMCANN_INPLACE_UNARY(X)                                                                   \
  aclnnStatus aclnnInplace##X##GetWorkspaceSize(aclTensor* selfRef, uint64_t* ws,                  \
                                                aclOpExecutor** ex) {                              \
    return so::unary("aclnnInplace" #X, so::Unary::k##X, selfRef, selfRef, ws, ex);                \
  }                                                                                                \
  SIMCANN_ACLNN_LAUNCH(aclnnInplace##X)

// docs/aclnnIsFinite.md: (self, out, ...).
SIMCANN_UNARY(IsFinite)
// docs/aclnnCeil&aclnnInplaceCeil.md: (self, out, ...) / (selfRef, ...); integers unchanged.
SIMCANN_UNARY(Ceil)
SIMCANN_INPLACE_UNARY(Ceil)
// docs/aclnnSqrt&aclnnInplaceSqrt.md: aclnnSqrtGetWorkspaceSize(self, out, ...),
// aclnnInplaceSqrtGetWorkspaceSize(selfRef, ...).
SIMCANN_UNARY(Sqrt)
SIMCANN_INPLACE_UNARY(Sqrt)
// docs/aclnnAbs.md: (self, out, ...).
SIMCANN_UNARY(Abs)

// docs/aclnnBitwiseAndTensor.md: (self, other, out, ...); aclnnInplaceBitwiseAndTensor(selfRef,
// other, ...); aclnnBitwiseOrTensor&aclnnInplaceBitwiseOrTensor.md likewise.
#define SIMCANN_BITWISE_FAMILY(X, kind)                                                            \
  aclnnStatus aclnnBitwise##X##TensorGetWorkspaceSize(const aclTensor* self,                       \
                                                      const aclTensor* other, aclTensor* out,      \
                                                      uint64_t* ws, aclOpExecutor** ex) {          \
    return so::bitwise("aclnnBitwise" #X "Tensor", kind, self, other, out, ws, ex);                \
  }                                                                                                \
  SIMCANN_ACLNN_LAUNCH(aclnnBitwise##X##Tensor)                                                    \
  aclnnStatus aclnnInplaceBitwise##X##TensorGetWorkspaceSize(                                      \
      aclTensor* selfRef, const aclTensor* other, uint64_t* ws, aclOpExecutor** ex) {              \
    return so::bitwise("aclnnInplaceBitwise" #X "Tensor", kind, selfRef, other, selfRef, ws, ex);  \
  }                                                                                                \
  SIMCANN_ACLNN_LAUNCH(aclnnInplaceBitwise##X##Tensor)

SIMCANN_BITWISE_FAMILY(And, so::Bitwise::kAnd)
SIMCANN_BITWISE_FAMILY(Or, so::Bitwise::kOr)

// docs/aclnnInplaceMaskedFillScalar.md: (selfRef, mask, const aclScalar* value, ...);
// aclnnInplaceMaskedFillTensor.md: (selfRef, mask, const aclTensor* value, ...).
aclnnStatus aclnnInplaceMaskedFillScalarGetWorkspaceSize(aclTensor* selfRef, const aclTensor* mask,
                                                         const aclScalar* value, uint64_t* ws,
                                                         aclOpExecutor** ex) {
  return so::masked_fill("aclnnInplaceMaskedFillScalar", selfRef, mask, value, nullptr, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceMaskedFillScalar)

aclnnStatus aclnnInplaceMaskedFillTensorGetWorkspaceSize(aclTensor* selfRef, const aclTensor* mask,
                                                         const aclTensor* value, uint64_t* ws,
                                                         aclOpExecutor** ex) {
  return so::masked_fill("aclnnInplaceMaskedFillTensor", selfRef, mask, nullptr, value, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceMaskedFillTensor)

// docs/aclnnMaskedSelect.md: (self, mask, out, ...); torch.masked_select, tensor printing.
aclnnStatus aclnnMaskedSelectGetWorkspaceSize(const aclTensor* self, const aclTensor* mask,
                                              aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  return so::masked_select("aclnnMaskedSelect", self, mask, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnMaskedSelect)

}  // extern "C"
