// aclnnSoftmax of the simulated device: torch.softmax / aten._softmax on torch_npu (op-plugin
// op_plugin/config/op_plugin_functions.yaml `_softmax` / `_softmax.out`: `exec: aclnnSoftmax,
// self, dim, out`, out of self's dtype, or float32 with half_to_float). TorchAir's smoke test
// (tests/smoke/aclgraph_test.py, test_aclgraph_scope_with_post_pass) reaches it after aclnnSqrt.
//
// Rules, from CANN's op source (hicann/ops-nn activation/softmax_v2/op_api/aclnn_softmax.cpp):
//   self and out non-null (ACLNN_ERR_PARAM_NULLPTR); an empty self computes nothing;
//   self and out of FLOAT, FLOAT16, DOUBLE, BF16 (ASCEND910B_DTYPE_SUPPORT_LIST);
//   dim in [-n, n), a 0-d self counting as 1-d (CheckDim); at most 8 dims (AXIS_LIMIT) and out of
//   self's shape (CheckShape): ACLNN_ERR_PARAM_INVALID otherwise.
//   Computation: SoftmaxV2 in self's dtype over a contiguous copy, then Cast to out's dtype and a
//   ViewCopy into out (so a float16 self with a float32 out is rounded to float16 first).
// Each slice along dim: exp(x - max) / sum(exp(x - max)) (the subtract-the-maximum form CANN's
// softmax docs describe, e.g. ops-math aclnnLogSoftmaxV2.md "减去最大值"), in double, rounded once
// to self's dtype, then to out's. The kernel's internal precision for 16-bit inputs is not
// documented; results match torch's CPU softmax within its float tolerances (test_op_softmax.py).
// A slice with NaN or +inf, or all -inf, gives NaN (as torch's CPU softmax does).
#include <cmath>
#include <limits>

#include "kernel_util.h"

namespace simcann {
namespace ops {
namespace {

constexpr size_t kAxisLimit = 8;

class SoftmaxKernel : public Kernel {
 public:
  SoftmaxKernel(const TensorView& out, const TensorView& self, int64_t dim)
      : out_(out), self_(self), dim_(dim) {}

  aclError run() const override {
    const std::vector<char*> ps = element_addresses(self_);
    const std::vector<char*> po = element_addresses(out_);
    const std::vector<int64_t>& sz = self_.sizes;
    int64_t len = sz.empty() ? 1 : sz[static_cast<size_t>(dim_)], inner = 1;
    for (size_t k = static_cast<size_t>(dim_) + 1; k < sz.size(); ++k) inner *= sz[k];
    const int64_t outer = len * inner == 0 ? 0 : static_cast<int64_t>(ps.size()) / (len * inner);
    std::vector<double> x(static_cast<size_t>(len));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        auto at = [&](int64_t d) { return static_cast<size_t>((o * len + d) * inner + in); };
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t d = 0; d < len; ++d) {
          x[static_cast<size_t>(d)] = load_double(self_.dtype, ps[at(d)]);
          m = std::fmax(m, x[static_cast<size_t>(d)]);  // a NaN element makes the slice NaN below
        }
        double sum = 0.0;
        for (int64_t d = 0; d < len; ++d) {
          x[static_cast<size_t>(d)] = std::exp(x[static_cast<size_t>(d)] - m);
          sum += x[static_cast<size_t>(d)];
        }
        for (int64_t d = 0; d < len; ++d) {
          const double y = round_to(self_.dtype, x[static_cast<size_t>(d)] / sum);  // SoftmaxV2
          store_double(out_.dtype, po[at(d)], y);                                    // Cast
        }
      }
    }
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({&self_}, {&out_}); }

 private:
  TensorView out_;
  TensorView self_;
  int64_t dim_;  // normalised, in [0, n) (0 for a 0-d self)
};

aclnnStatus softmax(const char* op, const aclTensor* self, int64_t dim, const aclTensor* out,
                    uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView &s = view_of(self), &o = view_of(out);
  if (s.numel() == 0) return finish_op(op, std::make_shared<KernelList>(
                                               std::vector<std::shared_ptr<Kernel>>{}), ws, ex);
  SIMCANN_CHECK(check_dtypes(op, {&s, &o}, {ACL_FLOAT, ACL_FLOAT16, ACL_DOUBLE, ACL_BF16},
                             "self and out must be float32, float16, bfloat16 or float64"));
  const int64_t n = s.sizes.empty() ? 1 : static_cast<int64_t>(s.sizes.size());
  if (dim < -n || dim >= n) return invalid(op, "dim out of the range of self's dimensions");
  if (s.sizes.size() > kAxisLimit) return invalid(op, "self has more than 8 dimensions");
  SIMCANN_CHECK(check_same_shape(op, s, o));
  const int64_t d = s.sizes.empty() ? 0 : (dim < 0 ? dim + n : dim);
  return finish_op(op, std::make_shared<SoftmaxKernel>(o, s, d), ws, ex);
}

}  // namespace
}  // namespace ops
}  // namespace simcann

extern "C" {

// aclnn_softmax.h: aclnnSoftmaxGetWorkspaceSize(self, dim, out, workspaceSize, executor).
aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor* self, int64_t dim, aclTensor* out,
                                         uint64_t* ws, aclOpExecutor** ex) {
  return simcann::ops::softmax("aclnnSoftmax", self, dim, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnSoftmax)

}  // extern "C"
