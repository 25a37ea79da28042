// The aclnn operators a small training step needs: random normal, matmul (mm / matmul / addmm),
// relu and its backward (threshold_backward), sum over dims (bias gradients), mse loss and its
// backward. float32 only (the element type of a default torch module); any other dtype fails
// loudly naming the op.
//
// Which ones torch_npu calls (SIMCANN_TRACE=1 with torch.npu.make_graphed_callables on a 2-layer
// MLP, torch_npu 2.10 and 2.13; op-plugin op_plugin/ops/opapi/*KernelNpuOpApi.cpp):
//   torch.randn / normal_         -> aclnnInplaceNormal(selfRef, mean, std, seed, offset)
//   Linear forward / backward     -> aclnnMatmul (matmul_nd.cpp) / aclnnMm / aclnnAddmm
//                                    (cubeMathType ignored: float32 is computed in float here)
//   relu / relu_                  -> aclnnRelu / aclnnInplaceRelu
//   relu backward                 -> aclnnThresholdBackward(gradOutput, self, threshold, gradInput)
//   sum(dim) (bias gradient)      -> aclnnReduceSum(self, dim, keepDim, dtype, out) (reduce.cpp)
//   SGD step (_foreach_add_)      -> aclnnForeachAddListV2(x1, x2, alpha, out)
//   torch._foreach_copy_(dst, src)-> aclnnForeachCopy(src, dst)
//   mse_loss / backward           -> aclnnMseLoss(self, target, reduction, out) /
//                                    aclnnMseLossBackward(gradOutput, self, target, reduction, out)
// Prototypes: CANN aclnn API reference (aclnn_inplace_normal.h, aclnn_mm.h, aclnn_matmul.h,
// aclnn_addmm.h, aclnn_relu.h, aclnn_threshold_backward.h, aclnn_reduce_sum.h, aclnn_mse_loss.h,
// aclnn_mse_loss_backward.h) and the argument order of op-plugin's EXEC_NPU_CMD calls.
//
// Every kernel gathers its inputs when it runs (on the stream's worker, and again at every replay
// of a captured graph), computes in float (sums accumulate in double), and scatters its outputs
// through the output views' strides. Random normal: the device draws from Philox keyed by
// (seed, offset); we draw from splitmix64 keyed the same way, so the same (seed, offset) gives the
// same numbers here but not the hardware's numbers.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#include "kernel_util.h"

namespace simcann {
namespace ops {
namespace {

using Values = std::vector<float>;
using Compute = std::function<void(const std::vector<Values>& in, std::vector<Values>* out)>;

// The elements of a float32 view in row-major order of its sizes.
Values gather(const TensorView& v) {
  Values out(static_cast<size_t>(v.numel()));
  const size_t nd = v.sizes.size();
  std::vector<int64_t> idx(nd, 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t off = v.offset;
    for (size_t k = 0; k < nd; ++k) off += idx[k] * v.strides[k];
    std::memcpy(&out[i], static_cast<const char*>(v.data) + off * 4, 4);
    for (size_t k = nd; k-- > 0;) {
      if (++idx[k] < v.sizes[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

void scatter(const TensorView& v, const Values& vals) {
  const size_t nd = v.sizes.size();
  std::vector<int64_t> idx(nd, 0);
  for (size_t i = 0; i < vals.size(); ++i) {
    int64_t off = v.offset;
    for (size_t k = 0; k < nd; ++k) off += idx[k] * v.strides[k];
    std::memcpy(static_cast<char*>(v.data) + off * 4, &vals[i], 4);
    for (size_t k = nd; k-- > 0;) {
      if (++idx[k] < v.sizes[k]) break;
      idx[k] = 0;
    }
  }
}

MemRange span(const TensorView& v, bool write) {
  if (v.numel() == 0) return MemRange{};
  int64_t hi = v.offset;
  for (size_t k = 0; k < v.sizes.size(); ++k) hi += (v.sizes[k] - 1) * v.strides[k];
  const char* lo = static_cast<const char*>(v.data) + v.offset * 4;
  const size_t n = static_cast<size_t>((hi - v.offset + 1) * 4);
  return write ? MemRange::dev_write(lo, n) : MemRange::dev_read(lo, n);
}

// A kernel over float32 views: gathers `ins`, runs `fn`, scatters into `outs`.
class FloatKernel : public Kernel {
 public:
  FloatKernel(std::vector<TensorView> ins, std::vector<TensorView> outs, Compute fn)
      : ins_(std::move(ins)), outs_(std::move(outs)), fn_(std::move(fn)) {}
  aclError run() const override {
    std::vector<Values> in;
    for (const TensorView& v : ins_) in.push_back(gather(v));
    std::vector<Values> out;
    for (const TensorView& v : outs_) out.emplace_back(static_cast<size_t>(v.numel()), 0.0f);
    fn_(in, &out);
    for (size_t i = 0; i < outs_.size(); ++i) scatter(outs_[i], out[i]);
    return ACL_SUCCESS;
  }
  std::vector<MemRange> ranges() const override {
    std::vector<MemRange> r;
    for (const TensorView& v : ins_) {
      if (v.numel() != 0) r.push_back(span(v, false));
    }
    for (const TensorView& v : outs_) {
      if (v.numel() != 0) r.push_back(span(v, true));
    }
    return r;
  }

 private:
  std::vector<TensorView> ins_;
  std::vector<TensorView> outs_;
  Compute fn_;
};

aclnnStatus finish(const char* op, std::shared_ptr<Kernel> kernel, uint64_t* ws,
                   aclOpExecutor** ex) {
  if (ws == nullptr || ex == nullptr) {
    set_error("simcann: %s: null workspaceSize or executor out-parameter", op);
    return kErrNullptr;
  }
  *ws = 0;
  *ex = make_executor(op, std::move(kernel));
  return kOk;
}

// A float32 tensor argument (these ops model float32 only).
aclnnStatus check_f32(const char* op, const char* what, const aclTensor* t) {
  const aclnnStatus st = check_tensor(op, what, t);
  if (st != kOk) return st;
  if (view_of(t).dtype != ACL_FLOAT) {
    set_error("simcann: %s: %s has dtype %s; the simulator models this op for float32 only", op,
              what, dtype_name(view_of(t).dtype));
    return kErrInvalid;
  }
  return kOk;
}

aclnnStatus bad_shape(const char* op, const char* why) {
  set_error("simcann: %s: %s", op, why);
  return kErrInvalid;
}

aclnnStatus submit(const char* op, std::vector<TensorView> ins, std::vector<TensorView> outs,
                   Compute fn, uint64_t* ws, aclOpExecutor** ex) {
  return finish(op, std::make_shared<FloatKernel>(std::move(ins), std::move(outs), std::move(fn)),
                ws, ex);
}

// ---- random normal ---------------------------------------------------------------------------

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Fills its output with normal numbers: float32 draws rounded to the output type (float32,
// float16, bfloat16: torch.randn(dtype=...) on npu; op-plugin NormalKernelNpuOpApi.cpp passes the
// tensor itself). Box-Muller on two uniforms in (0, 1] per element.
class NormalKernel : public Kernel {
 public:
  NormalKernel(const TensorView& out, float mean, float std, int64_t seed, int64_t offset)
      : out_(out), mean_(mean), std_(std), seed_(seed), offset_(offset) {}

  aclError run() const override {
    uint64_t state =
        static_cast<uint64_t>(seed_) * 0x100000001b3ULL ^ static_cast<uint64_t>(offset_);
    for (char* p : element_addresses(out_)) {
      const double u1 = (static_cast<double>(splitmix64(&state) >> 11) + 1.0) / 9007199254740992.0;
      const double u2 = static_cast<double>(splitmix64(&state) >> 11) / 9007199254740992.0;
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
      store_double(out_.dtype, p, static_cast<float>(mean_ + std_ * z));
    }
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({}, {&out_}); }

 private:
  TensorView out_;
  float mean_;
  float std_;
  int64_t seed_;
  int64_t offset_;
};

aclnnStatus normal(const char* op, const aclTensor* self, float mean, float std, int64_t seed,
                   int64_t offset, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "selfRef", self));
  const aclDataType dt = view_of(self).dtype;
  if (dt != ACL_FLOAT && dt != ACL_FLOAT16 && dt != ACL_BF16) {
    set_error("simcann: %s: selfRef has dtype %s; the simulator models float32, float16 and "
              "bfloat16", op, dtype_name(dt));
    return kErrInvalid;
  }
  if (!(std >= 0.0f)) return bad_shape(op, "std must be >= 0");
  return finish(op, std::make_shared<NormalKernel>(view_of(self), mean, std, seed, offset), ws, ex);
}

// ---- matmul ----------------------------------------------------------------------------------

// out[m, n] = beta * bias[m, n] (broadcast) + alpha * sum_k a[m, k] * b[k, n].
aclnnStatus matmul2d(const char* op, const aclTensor* bias, const aclTensor* a, const aclTensor* b,
                     double beta, double alpha, const aclTensor* out, uint64_t* ws,
                     aclOpExecutor** ex) {
  SIMCANN_CHECK(check_f32(op, "self", a));
  SIMCANN_CHECK(check_f32(op, "mat2", b));
  SIMCANN_CHECK(check_f32(op, "out", out));
  const TensorView &va = view_of(a), &vb = view_of(b), &vo = view_of(out);
  if (va.sizes.size() != 2 || vb.sizes.size() != 2 || vo.sizes.size() != 2) {
    return bad_shape(op, "the simulator models 2-D matrix products only");
  }
  const int64_t m = va.sizes[0], k = va.sizes[1], n = vb.sizes[1];
  if (vb.sizes[0] != k || vo.sizes[0] != m || vo.sizes[1] != n) {
    return bad_shape(op, "matrix shapes do not match");
  }
  std::vector<TensorView> ins = {va, vb};
  if (bias != nullptr) {
    SIMCANN_CHECK(check_f32(op, "self", bias));
    TensorView vbias = view_of(bias);
    SIMCANN_CHECK(check_broadcast(op, vo, vbias));
    // Broadcast the bias to [m, n] with zero strides (right-aligned, NumPy rules).
    TensorView full = vbias;
    full.sizes = {m, n};
    full.strides = {0, 0};
    const size_t nd = vbias.sizes.size();
    for (size_t i = 0; i < nd; ++i) {
      const size_t d = 2 - nd + i;
      if (vbias.sizes[i] != 1) full.strides[d] = vbias.strides[i];
    }
    ins.push_back(full);
  }
  const bool has_bias = bias != nullptr;
  Compute fn = [m, k, n, beta, alpha, has_bias](const std::vector<Values>& in,
                                                std::vector<Values>* o) {
    Values& r = (*o)[0];
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p) acc += double(in[0][i * k + p]) * in[1][p * n + j];
        double v = alpha * acc;
        if (has_bias) v += beta * in[2][i * n + j];
        r[i * n + j] = static_cast<float>(v);
      }
    }
  };
  return submit(op, ins, {vo}, fn, ws, ex);
}

// ---- relu / threshold backward ---------------------------------------------------------------

aclnnStatus relu(const char* op, const aclTensor* self, const aclTensor* out, uint64_t* ws,
                 aclOpExecutor** ex) {
  SIMCANN_CHECK(check_f32(op, "self", self));
  SIMCANN_CHECK(check_f32(op, "out", out));
  if (view_of(self).sizes != view_of(out).sizes) return bad_shape(op, "self and out differ");
  Compute fn = [](const std::vector<Values>& in, std::vector<Values>* o) {
    for (size_t i = 0; i < in[0].size(); ++i) (*o)[0][i] = in[0][i] > 0.0f ? in[0][i] : 0.0f;
  };
  return submit(op, {view_of(self)}, {view_of(out)}, fn, ws, ex);
}

// gradInput = self <= threshold ? 0 : gradOutput (PyTorch threshold_backward).
aclnnStatus threshold_backward(const char* op, const aclTensor* grad, const aclTensor* self,
                               const aclScalar* threshold, const aclTensor* out, uint64_t* ws,
                               aclOpExecutor** ex) {
  SIMCANN_CHECK(check_f32(op, "gradOutput", grad));
  SIMCANN_CHECK(check_f32(op, "self", self));
  SIMCANN_CHECK(check_f32(op, "gradInput", out));
  SIMCANN_CHECK(check_scalar(op, "threshold", threshold));
  const TensorView& vo = view_of(out);
  if (view_of(grad).sizes != vo.sizes || view_of(self).sizes != vo.sizes) {
    return bad_shape(op, "gradOutput, self and gradInput must have one shape");
  }
  const double t = value_of(threshold).is_floating ? value_of(threshold).as_double
                                                   : static_cast<double>(value_of(threshold).as_int);
  Compute fn = [t](const std::vector<Values>& in, std::vector<Values>* o) {
    for (size_t i = 0; i < in[0].size(); ++i) (*o)[0][i] = in[1][i] <= t ? 0.0f : in[0][i];
  };
  return submit(op, {view_of(grad), view_of(self)}, {vo}, fn, ws, ex);
}

// (reduce sum: reduce.cpp, every element type.)

// ---- mse loss --------------------------------------------------------------------------------

// reduction (at::Reduction): 0 none, 1 mean, 2 sum.
aclnnStatus mse_loss(const char* op, const aclTensor* self, const aclTensor* target,
                     int64_t reduction, const aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_f32(op, "self", self));
  SIMCANN_CHECK(check_f32(op, "target", target));
  SIMCANN_CHECK(check_f32(op, "out", out));
  if (view_of(self).sizes != view_of(target).sizes) return bad_shape(op, "self and target differ");
  if (reduction < 0 || reduction > 2) return bad_shape(op, "reduction must be 0, 1 or 2");
  if (reduction != 0 && view_of(out).numel() != 1) return bad_shape(op, "out must be a scalar");
  Compute fn = [reduction](const std::vector<Values>& in, std::vector<Values>* o) {
    double acc = 0.0;
    for (size_t i = 0; i < in[0].size(); ++i) {
      const float d = in[0][i] - in[1][i];
      if (reduction == 0) (*o)[0][i] = d * d;
      acc += double(d) * d;
    }
    if (reduction == 1) acc /= static_cast<double>(in[0].size());
    if (reduction != 0) (*o)[0][0] = static_cast<float>(acc);
  };
  return submit(op, {view_of(self), view_of(target)}, {view_of(out)}, fn, ws, ex);
}

// out = gradOutput * 2 * (self - target) [/ numel for mean]; gradOutput broadcast.
aclnnStatus mse_loss_backward(const char* op, const aclTensor* grad, const aclTensor* self,
                              const aclTensor* target, int64_t reduction, const aclTensor* out,
                              uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_f32(op, "gradOutput", grad));
  SIMCANN_CHECK(check_f32(op, "self", self));
  SIMCANN_CHECK(check_f32(op, "target", target));
  SIMCANN_CHECK(check_f32(op, "out", out));
  const TensorView& vo = view_of(out);
  if (view_of(self).sizes != vo.sizes || view_of(target).sizes != vo.sizes) {
    return bad_shape(op, "self, target and out must have one shape");
  }
  if (reduction < 0 || reduction > 2) return bad_shape(op, "reduction must be 0, 1 or 2");
  SIMCANN_CHECK(check_broadcast(op, vo, view_of(grad)));
  TensorView vg = view_of(grad);
  TensorView full = vg;  // broadcast to out's shape
  full.sizes = vo.sizes;
  full.strides.assign(vo.sizes.size(), 0);
  for (size_t i = 0; i < vg.sizes.size(); ++i) {
    const size_t d = vo.sizes.size() - vg.sizes.size() + i;
    if (vg.sizes[i] != 1) full.strides[d] = vg.strides[i];
  }
  const double norm = reduction == 1 ? 2.0 / static_cast<double>(vo.numel()) : 2.0;
  Compute fn = [norm](const std::vector<Values>& in, std::vector<Values>* o) {
    for (size_t i = 0; i < in[1].size(); ++i) {
      (*o)[0][i] = static_cast<float>(norm * (in[1][i] - in[2][i]) * in[0][i]);
    }
  };
  return submit(op, {full, view_of(self), view_of(target)}, {vo}, fn, ws, ex);
}

// ---- foreach add (optimizer steps) -----------------------------------------------------------

// out[i] = x1[i] + alpha * x2[i] for every i: one kernel over the whole list.
aclnnStatus foreach_add_list(const char* op, const aclTensorList* x1, const aclTensorList* x2,
                             const aclScalar* alpha, const aclTensorList* out, uint64_t* ws,
                             aclOpExecutor** ex) {
  const std::vector<const aclTensor*> a = tensor_list_of(x1), b = tensor_list_of(x2),
                                      o = tensor_list_of(out);
  if (a.empty() || a.size() != b.size() || a.size() != o.size()) {
    return bad_shape(op, "x1, x2 and out must be non-empty lists of one length");
  }
  SIMCANN_CHECK(check_scalar(op, "alpha", alpha));
  const ScalarValue& av = value_of(alpha);
  const double al = av.is_floating ? av.as_double : static_cast<double>(av.as_int);
  std::vector<TensorView> ins, outs;
  for (size_t i = 0; i < a.size(); ++i) {
    SIMCANN_CHECK(check_f32(op, "x1", a[i]));
    SIMCANN_CHECK(check_f32(op, "x2", b[i]));
    SIMCANN_CHECK(check_f32(op, "out", o[i]));
    if (view_of(a[i]).sizes != view_of(o[i]).sizes || view_of(b[i]).sizes != view_of(o[i]).sizes) {
      return bad_shape(op, "x1[i], x2[i] and out[i] must have one shape");
    }
    ins.push_back(view_of(a[i]));
    ins.push_back(view_of(b[i]));
    outs.push_back(view_of(o[i]));
  }
  Compute fn = [al](const std::vector<Values>& in, std::vector<Values>* r) {
    for (size_t t = 0; t < r->size(); ++t) {
      const Values &x = in[2 * t], &y = in[2 * t + 1];
      // Rounded like PyTorch's CPU add: x + (float)(alpha) * y in float.
      for (size_t i = 0; i < x.size(); ++i) (*r)[t][i] = x[i] + static_cast<float>(al) * y[i];
    }
  };
  return submit(op, ins, outs, fn, ws, ex);
}

// ---- foreach copy ----------------------------------------------------------------------------

// (KernelList, kernel_util.h: a foreach op is one launch on the device.)

// dst[i] = src[i] (any element types make_copy_kernel converts; shapes must match).
aclnnStatus foreach_copy(const char* op, const aclTensorList* src, const aclTensorList* dst,
                         uint64_t* ws, aclOpExecutor** ex) {
  const std::vector<const aclTensor*> s = tensor_list_of(src), d = tensor_list_of(dst);
  if (s.empty() || s.size() != d.size()) {
    return bad_shape(op, "x and y must be non-empty lists of one length");
  }
  std::vector<std::shared_ptr<Kernel>> parts;
  for (size_t i = 0; i < s.size(); ++i) {
    SIMCANN_CHECK(check_tensor(op, "x", s[i]));
    SIMCANN_CHECK(check_tensor(op, "y", d[i]));
    if (view_of(s[i]).sizes != view_of(d[i]).sizes) return bad_shape(op, "x[i] and y[i] differ");
    parts.push_back(make_copy_kernel(view_of(d[i]), view_of(s[i])));
  }
  return finish(op, std::make_shared<KernelList>(std::move(parts)), ws, ex);
}

}  // namespace
}  // namespace ops
}  // namespace simcann

namespace so = simcann::ops;

extern "C" {

// CANN aclnn_inplace_normal.h: aclnnInplaceNormalGetWorkspaceSize(const aclTensor* selfRef,
// float mean, float std, int64_t seed, int64_t offset, ...).
aclnnStatus aclnnInplaceNormalGetWorkspaceSize(const aclTensor* selfRef, float mean, float std,
                                               int64_t seed, int64_t offset, uint64_t* ws,
                                               aclOpExecutor** ex) {
  return so::normal("aclnnInplaceNormal", selfRef, mean, std, seed, offset, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceNormal)

// CANN aclnn_mm.h: (self, mat2, out, int8_t cubeMathType, ...).
aclnnStatus aclnnMmGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2, aclTensor* out,
                                    int8_t cubeMathType, uint64_t* ws, aclOpExecutor** ex) {
  (void)cubeMathType;
  return so::matmul2d("aclnnMm", nullptr, self, mat2, 0.0, 1.0, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnMm)

// aclnnMatmul (N-D, broadcast batch, 16-bit types too): matmul_nd.cpp.

// CANN aclnn_addmm.h: (self, mat1, mat2, beta, alpha, out, int8_t cubeMathType, ...):
// out = beta * self + alpha * (mat1 @ mat2).
aclnnStatus aclnnAddmmGetWorkspaceSize(const aclTensor* self, const aclTensor* mat1,
                                       const aclTensor* mat2, const aclScalar* beta,
                                       const aclScalar* alpha, aclTensor* out, int8_t cubeMathType,
                                       uint64_t* ws, aclOpExecutor** ex) {
  (void)cubeMathType;
  const char* op = "aclnnAddmm";
  if (so::check_scalar(op, "beta", beta) != so::kOk) return so::kErrInvalid;
  if (so::check_scalar(op, "alpha", alpha) != so::kOk) return so::kErrInvalid;
  auto as_double = [](const aclScalar* s) {
    const so::ScalarValue& v = so::value_of(s);
    return v.is_floating ? v.as_double : static_cast<double>(v.as_int);
  };
  return so::matmul2d(op, self, mat1, mat2, as_double(beta), as_double(alpha), out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnAddmm)

// CANN aclnn_relu.h: aclnnRelu(self, out), aclnnInplaceRelu(selfRef).
aclnnStatus aclnnReluGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* ws,
                                      aclOpExecutor** ex) {
  return so::relu("aclnnRelu", self, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnRelu)

aclnnStatus aclnnInplaceReluGetWorkspaceSize(aclTensor* selfRef, uint64_t* ws, aclOpExecutor** ex) {
  return so::relu("aclnnInplaceRelu", selfRef, selfRef, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnInplaceRelu)

// CANN aclnn_threshold_backward.h: (gradOutput, self, threshold, gradInput, ...).
aclnnStatus aclnnThresholdBackwardGetWorkspaceSize(const aclTensor* gradOutput,
                                                   const aclTensor* self,
                                                   const aclScalar* threshold, aclTensor* gradInput,
                                                   uint64_t* ws, aclOpExecutor** ex) {
  return so::threshold_backward("aclnnThresholdBackward", gradOutput, self, threshold, gradInput,
                                ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnThresholdBackward)

// CANN aclnn_mse_loss.h: (self, target, int64_t reduction, out, ...).
aclnnStatus aclnnMseLossGetWorkspaceSize(const aclTensor* self, const aclTensor* target,
                                         int64_t reduction, aclTensor* out, uint64_t* ws,
                                         aclOpExecutor** ex) {
  return so::mse_loss("aclnnMseLoss", self, target, reduction, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnMseLoss)

// CANN aclnn_mse_loss_backward.h: (gradOutput, self, target, int64_t reduction, out, ...).
aclnnStatus aclnnMseLossBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                 const aclTensor* target, int64_t reduction,
                                                 aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  return so::mse_loss_backward("aclnnMseLossBackward", gradOutput, self, target, reduction, out, ws,
                               ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnMseLossBackward)

// CANN aclnn_foreach_add_list_v2.h: (x1, x2, alpha, out, ...); torch._foreach_add_(list, list,
// alpha=) (op-plugin ForeachAddKernelNpuOpApi.cpp, SGD's multi-tensor step).
aclnnStatus aclnnForeachAddListV2GetWorkspaceSize(const aclTensorList* x1, const aclTensorList* x2,
                                                  const aclScalar* alpha, aclTensorList* out,
                                                  uint64_t* ws, aclOpExecutor** ex) {
  return so::foreach_add_list("aclnnForeachAddListV2", x1, x2, alpha, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnForeachAddListV2)

// CANN aclnn_foreach_copy.h: (x, y, ...): y[i] = x[i]; op-plugin ForeachCopyKernelOpApi.cpp:
// EXEC_NPU_CMD(aclnnForeachCopy, src, dst) for torch._foreach_copy_(dst, src) (TorchAir copies
// user inputs into its static buffers with it).
aclnnStatus aclnnForeachCopyGetWorkspaceSize(const aclTensorList* x, aclTensorList* y,
                                             uint64_t* ws, aclOpExecutor** ex) {
  return so::foreach_copy("aclnnForeachCopy", x, y, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnForeachCopy)

}  // extern "C"
