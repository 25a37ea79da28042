// Elementwise kernels of the simulated device: fill, copy/cast, add, mul, logical not.
//
// Every kernel walks the output view with its strides (so strided views work, and inputs are
// broadcast NumPy-style to the output shape) and reads its inputs when it runs: on the stream's
// worker thread, and again on every replay of a captured graph.
//
// Arithmetic follows PyTorch's CPU kernels closely enough for exact comparisons on ordinary data:
// float16 / bfloat16 / float32 results are computed in float ("opmath" type) and rounded once to
// the output type (round to nearest even); float64 in double; integers in int64 with the
// narrowing wrap-around of the output type; bool add is `or`, bool mul is `and`.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernel_util.h"

namespace simcann {
namespace ops {

// ---------------------------------------------------------------------------------------------
// Element types.

size_t dtype_size(aclDataType dtype) {
  switch (dtype) {
    case ACL_DOUBLE:
    case ACL_INT64:
      return 8;
    case ACL_FLOAT:
    case ACL_INT32:
      return 4;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
      return 2;
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_BOOL:
      return 1;
    default:
      return 0;
  }
}

const char* dtype_name(aclDataType dtype) {
  switch (dtype) {
    case ACL_FLOAT:
      return "float32";
    case ACL_FLOAT16:
      return "float16";
    case ACL_BF16:
      return "bfloat16";
    case ACL_DOUBLE:
      return "float64";
    case ACL_INT8:
      return "int8";
    case ACL_INT16:
      return "int16";
    case ACL_INT32:
      return "int32";
    case ACL_INT64:
      return "int64";
    case ACL_UINT8:
      return "uint8";
    case ACL_BOOL:
      return "bool";
    case ACL_COMPLEX64:
      return "complex64";
    case ACL_COMPLEX128:
      return "complex128";
    default:
      return "unsupported dtype";
  }
}

bool dtype_is_floating(aclDataType dtype) {
  return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16 || dtype == ACL_DOUBLE;
}

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));  // inf / nan
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (man << 13));
  // Zero or subnormal: man * 2^-24.
  float v = std::ldexp(static_cast<float>(man), -24);
  return sign ? -v : v;
}

uint16_t float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(f)) return sign | 0x7e00;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (a < 6.103515625e-05f) {
    // Subnormal half: a / 2^-24 rounded to nearest even.
    const float q = std::nearbyint(a * 16777216.0f);
    return sign | static_cast<uint16_t>(q);
  }
  const uint32_t au = float_bits(a);
  uint32_t exp = (au >> 23) - 112;
  uint32_t man = au & 0x7fffffu;
  uint32_t half = (exp << 10) | (man >> 13);
  const uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // round to nearest even
  return sign | static_cast<uint16_t>(half);
}

// The raw element of type T at `p` (tensor data need not be aligned for T).
template <typename T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void put(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// Loads element `p` of type `dtype` as compute type C.
template <typename C>
C load(aclDataType dtype, const char* p) {
  switch (dtype) {
    case ACL_FLOAT:
      return static_cast<C>(get<float>(p));
    case ACL_DOUBLE:
      return static_cast<C>(get<double>(p));
    case ACL_FLOAT16:
      return static_cast<C>(half_to_float(get<uint16_t>(p)));
    case ACL_BF16:
      return static_cast<C>(bf16_to_float(get<uint16_t>(p)));
    case ACL_INT64:
      return static_cast<C>(get<int64_t>(p));
    case ACL_INT32:
      return static_cast<C>(get<int32_t>(p));
    case ACL_INT16:
      return static_cast<C>(get<int16_t>(p));
    case ACL_INT8:
      return static_cast<C>(get<int8_t>(p));
    case ACL_UINT8:
      return static_cast<C>(get<uint8_t>(p));
    case ACL_BOOL:
      return static_cast<C>(*p != 0);
    default:
      return C();
  }
}

// Converts compute value `v` to an integer of the output type, wrapping like a C cast of int64.
template <typename C>
int64_t to_int64(C v) {
  if (std::is_floating_point<C>::value) {
    // Out-of-range float -> int conversion is undefined in C++; clamp to int64 first.
    const double d = static_cast<double>(v);
    if (std::isnan(d)) return 0;
    if (d >= 9.2e18) return INT64_MAX;
    if (d <= -9.2e18) return INT64_MIN;
  }
  return static_cast<int64_t>(v);
}

// Stores compute value `v` into element `p` of type `dtype`.
template <typename C>
void store(aclDataType dtype, char* p, C v) {
  switch (dtype) {
    case ACL_FLOAT:
      put(p, static_cast<float>(v));
      break;
    case ACL_DOUBLE:
      put(p, static_cast<double>(v));
      break;
    case ACL_FLOAT16:
      put(p, float_to_half(static_cast<float>(v)));
      break;
    case ACL_BF16:
      put(p, float_to_bf16(static_cast<float>(v)));
      break;
    case ACL_INT64:
      put(p, to_int64(v));
      break;
    case ACL_INT32:
      put(p, static_cast<int32_t>(to_int64(v)));
      break;
    case ACL_INT16:
      put(p, static_cast<int16_t>(to_int64(v)));
      break;
    case ACL_INT8:
      put(p, static_cast<int8_t>(to_int64(v)));
      break;
    case ACL_UINT8:
      put(p, static_cast<uint8_t>(to_int64(v)));
      break;
    case ACL_BOOL:
      put(p, static_cast<uint8_t>(v != C() ? 1 : 0));
      break;
    default:
      break;
  }
}

template <typename C>
C scalar_as(const ScalarValue& s) {
  if (std::is_floating_point<C>::value) return static_cast<C>(s.as_double);
  if (std::is_same<C, bool>::value)
    return static_cast<C>(s.is_floating ? s.as_double != 0 : s.as_int != 0);
  return static_cast<C>(s.is_floating ? to_int64(s.as_double) : s.as_int);
}

// The compute type family for an output element type (see the file comment).
enum class Domain { kFloat, kDouble, kInt, kBool };

Domain domain_for(aclDataType out) {
  if (out == ACL_DOUBLE) return Domain::kDouble;
  if (out == ACL_BOOL) return Domain::kBool;
  if (dtype_is_floating(out)) return Domain::kFloat;
  return Domain::kInt;
}

// Calls fn(C()) with the compute type C of domain `d` (float, double, int64_t, bool) and returns
// its result.
template <typename Fn>
auto with_compute_type(Domain d, Fn fn) -> decltype(fn(float())) {
  switch (d) {
    case Domain::kFloat:
      return fn(float());
    case Domain::kDouble:
      return fn(double());
    case Domain::kInt:
      return fn(int64_t());
    case Domain::kBool:
      return fn(bool());
  }
  return decltype(fn(float()))();  // not reached: every Domain is handled above
}

// ---------------------------------------------------------------------------------------------
// Strided iteration.

// An operand walked along the output shape: byte strides, 0 on broadcast dimensions.
struct Walker {
  char* base = nullptr;
  aclDataType dtype = ACL_DT_UNDEFINED;
  std::vector<int64_t> byte_strides;  // one per output dimension
};

Walker make_walker(const TensorView& v, const std::vector<int64_t>& out_sizes) {
  Walker w;
  const int64_t item = static_cast<int64_t>(dtype_size(v.dtype));
  w.dtype = v.dtype;
  w.base = static_cast<char*>(v.data) + v.offset * item;
  const size_t nd = out_sizes.size();
  const size_t vd = v.sizes.size();
  w.byte_strides.assign(nd, 0);
  for (size_t k = 0; k < vd; ++k) {
    const size_t ok = nd - vd + k;
    if (v.sizes[k] != 1 || out_sizes[ok] == 1) w.byte_strides[ok] = v.strides[k] * item;
  }
  return w;
}

// Calls fn(ptrs) for every output element; ptrs[i] points at operand i's element.
template <typename Fn>
void for_each_element(const std::vector<int64_t>& sizes, std::vector<Walker>& ops, Fn fn) {
  const size_t nd = sizes.size();
  int64_t total = 1;
  for (int64_t s : sizes) total *= s;
  if (total == 0) return;
  std::vector<char*> ptrs(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) ptrs[i] = ops[i].base;
  std::vector<int64_t> idx(nd, 0);
  for (int64_t n = 0; n < total; ++n) {
    fn(ptrs);
    // Advance the odometer, last dimension fastest.
    for (size_t k = nd; k-- > 0;) {
      for (size_t i = 0; i < ops.size(); ++i) ptrs[i] += ops[i].byte_strides[k];
      if (++idx[k] < sizes[k]) break;
      for (size_t i = 0; i < ops.size(); ++i) ptrs[i] -= ops[i].byte_strides[k] * sizes[k];
      idx[k] = 0;
    }
  }
}

// A floating scalar rounded to the floating element type `dtype` (unchanged otherwise).
ScalarValue rounded_to(aclDataType dtype, const ScalarValue& s) {
  if (!dtype_is_floating(dtype) || dtype == ACL_DOUBLE || s.dtype == ACL_DT_UNDEFINED) return s;
  char buf[8] = {0};
  store<double>(dtype, buf, scalar_as<double>(s));
  ScalarValue r = s;
  r.as_double = load<double>(dtype, buf);
  r.as_int = to_int64(r.as_double);
  r.is_floating = true;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Kernels.

class FillKernel : public Kernel {
 public:
  FillKernel(const TensorView& out, const ScalarValue& value) : out_(out) {
    // Convert the value once to the output element type.
    char buf[8] = {0};
    with_compute_type(domain_for(out.dtype), [&](auto c) {
      using C = decltype(c);
      store<C>(out.dtype, buf, scalar_as<C>(value));
    });
    std::memcpy(bytes_, buf, sizeof bytes_);
  }

  aclError run() const override {
    const size_t item = dtype_size(out_.dtype);
    std::vector<Walker> ops = {make_walker(out_, out_.sizes)};
    for_each_element(out_.sizes, ops,
                     [&](std::vector<char*>& p) { std::memcpy(p[0], bytes_, item); });
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({}, {&out_}); }

 private:
  TensorView out_;
  char bytes_[8];
};

class CopyKernel : public Kernel {
 public:
  CopyKernel(const TensorView& out, const TensorView& src) : out_(out), src_(src) {}

  aclError run() const override {
    if (out_.dtype == src_.dtype && out_.is_contiguous() && src_.is_contiguous() &&
        out_.numel() == src_.numel()) {
      const size_t item = dtype_size(out_.dtype);
      std::memmove(static_cast<char*>(out_.data) + out_.offset * item,
                   static_cast<const char*>(src_.data) + src_.offset * item, out_.numel() * item);
      return ACL_SUCCESS;
    }
    return with_compute_type(copy_domain(), [this](auto c) { return convert<decltype(c)>(); });
  }

  std::vector<MemRange> ranges() const override { return view_ranges({&src_}, {&out_}); }

 private:
  // Widest exact path: double if either side is double, else by the output type.
  Domain copy_domain() const {
    const Domain d = domain_for(out_.dtype);
    if (d == Domain::kFloat && src_.dtype == ACL_DOUBLE) return Domain::kDouble;
    if (d == Domain::kFloat && (src_.dtype == ACL_INT64 || src_.dtype == ACL_INT32)) {
      return Domain::kDouble;  // int -> float rounds once (double holds int32 exactly)
    }
    return d;
  }

  template <typename C>
  aclError convert() const {
    std::vector<Walker> ops = {make_walker(out_, out_.sizes), make_walker(src_, out_.sizes)};
    const aclDataType od = out_.dtype;
    const aclDataType sd = src_.dtype;
    for_each_element(out_.sizes, ops,
                     [&](std::vector<char*>& p) { store<C>(od, p[0], load<C>(sd, p[1])); });
    return ACL_SUCCESS;
  }

  TensorView out_;
  TensorView src_;
};

class BinaryKernel : public Kernel {
 public:
  BinaryKernel(const TensorView& out, const BinaryArgs& args)
      : out_(out), op_(args.op), alpha_(args.alpha) {
    has_a_ = args.a != nullptr;
    has_b_ = args.b != nullptr;
    if (has_a_) a_ = *args.a;
    if (has_b_) b_ = *args.b;
    if (args.a_scalar != nullptr) a_scalar_ = *args.a_scalar;
    if (args.b_scalar != nullptr) b_scalar_ = *args.b_scalar;
    if (op_ == BinaryOp::kAdd || op_ == BinaryOp::kSub) {
      // PyTorch's CPU add/sub cast a scalar operand and alpha to the result type first (a
      // float16 tensor + 0.1 adds float16(0.1)); mul and div keep the scalar in float.
      a_scalar_ = rounded_to(out_.dtype, a_scalar_);
      b_scalar_ = rounded_to(out_.dtype, b_scalar_);
      alpha_ = rounded_to(out_.dtype, alpha_);
    }
  }

  aclError run() const override {
    return with_compute_type(domain_for(out_.dtype),
                             [this](auto c) { return compute<decltype(c)>(); });
  }

  std::vector<MemRange> ranges() const override {
    return view_ranges({has_a_ ? &a_ : nullptr, has_b_ ? &b_ : nullptr}, {&out_});
  }

 private:
  // x * y + z: fused (one rounding) for floating types, like PyTorch's vectorized CPU add
  // (vec::fmadd), so that results with alpha != 1 match it bit for bit.
  template <typename C>
  static C multiply_add(C x, C y, C z) {
    if (std::is_floating_point<C>::value) return static_cast<C>(std::fma(x, y, z));
    return static_cast<C>(x * y + z);
  }

  template <typename C>
  C apply(C a, C b, C alpha) const {
    if (std::is_same<C, bool>::value) {
      // Only add and mul reach here (binary() rejects bool sub / div outputs).
      return op_ == BinaryOp::kAdd ? static_cast<C>(a || (alpha && b)) : static_cast<C>(a && b);
    }
    switch (op_) {
      case BinaryOp::kAdd:
        return multiply_add(alpha, b, a);
      case BinaryOp::kSub:
        return multiply_add(static_cast<C>(-alpha), b, a);
      case BinaryOp::kMul:
        return static_cast<C>(a * b);
      case BinaryOp::kDiv:
        return static_cast<C>(a / b);  // floating C only (binary() rejects integral outputs)
    }
    return C();
  }

  template <typename C>
  aclError compute() const {
    std::vector<Walker> ops = {make_walker(out_, out_.sizes)};
    const int ia = has_a_ ? static_cast<int>(ops.size()) : -1;
    if (has_a_) ops.push_back(make_walker(a_, out_.sizes));
    const int ib = has_b_ ? static_cast<int>(ops.size()) : -1;
    if (has_b_) ops.push_back(make_walker(b_, out_.sizes));
    const C sa = scalar_as<C>(a_scalar_);
    const C sb = scalar_as<C>(b_scalar_);
    const bool has_alpha = op_ == BinaryOp::kAdd || op_ == BinaryOp::kSub;
    const C alpha = has_alpha ? scalar_as<C>(alpha_) : C(1);
    const aclDataType od = out_.dtype, ad = a_.dtype, bd = b_.dtype;
    for_each_element(out_.sizes, ops, [&](std::vector<char*>& p) {
      const C a = ia >= 0 ? load<C>(ad, p[ia]) : sa;
      const C b = ib >= 0 ? load<C>(bd, p[ib]) : sb;
      store<C>(od, p[0], apply<C>(a, b, alpha));
    });
    return ACL_SUCCESS;
  }

  TensorView out_;
  BinaryOp op_;
  ScalarValue alpha_;
  bool has_a_ = false;
  bool has_b_ = false;
  TensorView a_;
  TensorView b_;
  ScalarValue a_scalar_;
  ScalarValue b_scalar_;
};

// out[i] = start + i * step (torch.arange), computed in double for floating outputs and in
// int64 for integral ones, like PyTorch's CPU kernel (accumulate type).
class ArangeKernel : public Kernel {
 public:
  ArangeKernel(const TensorView& out, const ScalarValue& start, const ScalarValue& step)
      : out_(out), start_(start), step_(step) {}

  aclError run() const override {
    const bool fp = dtype_is_floating(out_.dtype);
    std::vector<Walker> ops = {make_walker(out_, out_.sizes)};
    int64_t i = 0;
    for_each_element(out_.sizes, ops, [&](std::vector<char*>& p) {
      if (fp) {
        store<double>(out_.dtype, p[0],
                      start_.as_double + static_cast<double>(i) * step_.as_double);
      } else {
        store<int64_t>(out_.dtype, p[0],
                       scalar_as<int64_t>(start_) + i * scalar_as<int64_t>(step_));
      }
      ++i;
    });
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({}, {&out_}); }

 private:
  TensorView out_;
  ScalarValue start_;
  ScalarValue step_;
};

// out = !self: an element is true unless it compares equal to zero (CANN aclnnLogicalNot: "如果
// 输入Tensor不是bool类型，则将零视为False，非零视为True"); stored as out's type (1 / 0).
class LogicalNotKernel : public Kernel {
 public:
  LogicalNotKernel(const TensorView& out, const TensorView& self) : out_(out), self_(self) {}

  aclError run() const override {
    std::vector<Walker> ops = {make_walker(out_, out_.sizes), make_walker(self_, out_.sizes)};
    const aclDataType od = out_.dtype;
    const aclDataType sd = self_.dtype;
    const bool floating = dtype_is_floating(sd);
    for_each_element(out_.sizes, ops, [&](std::vector<char*>& p) {
      const bool zero = floating ? load<double>(sd, p[1]) == 0.0 : load<int64_t>(sd, p[1]) == 0;
      store<int64_t>(od, p[0], zero ? 1 : 0);
    });
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({&self_}, {&out_}); }

 private:
  TensorView out_;
  TensorView self_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// TensorView, factories.

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (size_t k = sizes.size(); k-- > 0;) {
    if (sizes[k] != 1 && strides[k] != expected) return false;
    expected *= sizes[k];
  }
  return true;
}

std::shared_ptr<Kernel> make_fill_kernel(const TensorView& out, const ScalarValue& value) {
  return std::make_shared<FillKernel>(out, value);
}

std::shared_ptr<Kernel> make_copy_kernel(const TensorView& out, const TensorView& src) {
  return std::make_shared<CopyKernel>(out, src);
}

std::shared_ptr<Kernel> make_arange_kernel(const TensorView& out, const ScalarValue& start,
                                           const ScalarValue& step) {
  return std::make_shared<ArangeKernel>(out, start, step);
}

std::shared_ptr<Kernel> make_binary_kernel(const TensorView& out, const BinaryArgs& args) {
  return std::make_shared<BinaryKernel>(out, args);
}

std::shared_ptr<Kernel> make_logical_not_kernel(const TensorView& out, const TensorView& self) {
  return std::make_shared<LogicalNotKernel>(out, self);
}

// ---------------------------------------------------------------------------------------------
// Element access for the kernels of other files (same conversions as the kernels above).

double load_double(aclDataType dtype, const void* p) {
  return load<double>(dtype, static_cast<const char*>(p));
}

int64_t load_int64(aclDataType dtype, const void* p) {
  return load<int64_t>(dtype, static_cast<const char*>(p));
}

void store_double(aclDataType dtype, void* p, double v) {
  store<double>(dtype, static_cast<char*>(p), v);
}

void store_int64(aclDataType dtype, void* p, int64_t v) {
  store<int64_t>(dtype, static_cast<char*>(p), v);
}

}  // namespace ops
}  // namespace simcann
