// aclnnMatmul of the simulated device: torch.matmul / `@` on torch_npu (op-plugin
// MatmulKernelNpuOpApi.cpp matmul_implement_npu: EXEC_NPU_CMD(aclnnMatmul, self, mat2, out,
// cubeMathType)), for 1-D to 6-D operands with broadcast batch dimensions and float32 / float16 /
// bfloat16 elements. (aclnnMm / aclnnAddmm, 2-D float32, stay in nn.cpp.) TorchAir's smoke test
// (tests/smoke/aclgraph_test.py, the batch_matmul_transpose tests) multiplies float16 [B, M, K] by
// [B, K, N].
//
// Rules, from CANN's op source (hicann/ops-nn matmul/mat_mul_v3/op_api/aclnn_matmul.cpp):
//   self, mat2, out non-null (ACLNN_ERR_PARAM_NULLPTR);
//   each of FLOAT, FLOAT16, BF16 (DTYPE_SUPPORT_LIST; BF16 on the 910B family, which the
//   simulated device is); KEEP_DTYPE (cubeMathType 0) with a FLOAT self and a FLOAT16 out refused
//   (CheckDtypeValid);
//   neither operand 0-d, at most 6 dims (MAX_SUPPORT_MATMUL_DIMS_NUMS), the k axes equal (self's
//   last; mat2's first when it is 1-D or 2-D, its second-to-last otherwise), the batch dims (all
//   but the last two) broadcastable (CheckShapeValid): ACLNN_ERR_PARAM_INVALID otherwise;
//   out of torch.matmul's shape (the op reshapes its result to out's view shape).
// Computation: out[..., i, j] = sum_p self[..., i, p] * mat2[..., p, j], summed in double and
// rounded once to out's dtype. The cube unit multiplies 16-bit inputs exactly and accumulates in
// float32 (cubeMathType chooses HF32 / FP16 paths for float32 inputs); this model is at least as
// precise, so results agree with the hardware's within float32 accumulation error, not bit for bit.
#include <algorithm>
#include <vector>

#include "kernel_util.h"

namespace simcann {
namespace ops {
namespace {

constexpr size_t kMaxDims = 6;

class MatmulNdKernel : public Kernel {
 public:
  // a: [batch..., m, k], b: [batch..., k, n] (views already expanded to the broadcast batch),
  // out: [batch..., m, n] as a view with the same element order.
  MatmulNdKernel(const TensorView& out, const TensorView& a, const TensorView& b, int64_t batch,
                 int64_t m, int64_t k, int64_t n)
      : out_(out), a_(a), b_(b), batch_(batch), m_(m), k_(k), n_(n) {}

  aclError run() const override {
    const std::vector<char*> pa = element_addresses(a_);
    const std::vector<char*> pb = element_addresses(b_);
    const std::vector<char*> po = element_addresses(out_);
    for (int64_t t = 0; t < batch_; ++t) {
      for (int64_t i = 0; i < m_; ++i) {
        for (int64_t j = 0; j < n_; ++j) {
          double acc = 0.0;
          for (int64_t p = 0; p < k_; ++p) {
            acc += load_double(a_.dtype, pa[static_cast<size_t>((t * m_ + i) * k_ + p)]) *
                   load_double(b_.dtype, pb[static_cast<size_t>((t * k_ + p) * n_ + j)]);
          }
          store_double(out_.dtype, po[static_cast<size_t>((t * m_ + i) * n_ + j)], acc);
        }
      }
    }
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override { return view_ranges({&a_, &b_}, {&out_}); }

 private:
  TensorView out_, a_, b_;
  int64_t batch_, m_, k_, n_;
};

// `v` as [batch..., r, c] expanded (zero strides) to the batch shape `batch`.
TensorView expand_batch(const TensorView& v, const std::vector<int64_t>& batch) {
  TensorView e = v;
  const size_t vb = v.sizes.size() - 2, nb = batch.size();
  e.sizes = batch;
  e.strides.assign(nb, 0);
  for (size_t k = 0; k < vb; ++k) {
    if (v.sizes[k] != 1) e.strides[nb - vb + k] = v.strides[k];
  }
  e.sizes.push_back(v.sizes[vb]);
  e.sizes.push_back(v.sizes[vb + 1]);
  e.strides.push_back(v.strides[vb]);
  e.strides.push_back(v.strides[vb + 1]);
  return e;
}

aclnnStatus matmul_nd(const char* op, const aclTensor* self, const aclTensor* mat2,
                      const aclTensor* out, int8_t cube_math_type, uint64_t* ws,
                      aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "mat2", mat2));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  TensorView a = view_of(self), b = view_of(mat2);
  const TensorView& o = view_of(out);
  SIMCANN_CHECK(check_dtypes(op, {&a, &b, &o}, {ACL_FLOAT, ACL_FLOAT16, ACL_BF16},
                             "self, mat2 and out must be float32, float16 or bfloat16"));
  if (cube_math_type == 0 && a.dtype == ACL_FLOAT && o.dtype == ACL_FLOAT16) {
    return invalid(op, "KEEP_DTYPE: a float32 self needs a float32 out, not float16");
  }
  const size_t da = a.sizes.size(), db = b.sizes.size();
  if (da == 0 || db == 0) return invalid(op, "0-d operands are not supported");
  if (da > kMaxDims || db > kMaxDims) return invalid(op, "operands have more than 6 dimensions");
  // 1-D operands as torch.matmul reads them: self [k] -> [1, k], mat2 [k] -> [k, 1]; those unit
  // dims are not in out's shape.
  std::vector<int64_t> want;
  if (da == 1) {
    a.sizes.insert(a.sizes.begin(), 1);
    a.strides.insert(a.strides.begin(), 0);
  }
  if (db == 1) {
    b.sizes.push_back(1);
    b.strides.push_back(0);
  }
  const int64_t m = a.sizes[a.sizes.size() - 2], k = a.sizes.back();
  const int64_t k2 = b.sizes[b.sizes.size() - 2], n = b.sizes.back();
  if (k != k2) return invalid(op, "the k axes of self and mat2 differ");
  std::vector<int64_t> ba(a.sizes.begin(), a.sizes.end() - 2), bb(b.sizes.begin(), b.sizes.end() - 2);
  std::vector<int64_t> batch;
  if (!broadcast_shape(ba, bb, &batch)) return invalid(op, "the batch dimensions do not broadcast");
  want = batch;
  if (da > 1) want.push_back(m);
  if (db > 1) want.push_back(n);
  if (o.sizes != want) return invalid(op, "out does not have torch.matmul's result shape");
  int64_t nbatch = 1;
  for (int64_t s : batch) nbatch *= s;
  TensorView oo = o;  // out as [batch..., m, n]: re-insert the dims a 1-D operand dropped
  if (da == 1) {
    oo.sizes.insert(oo.sizes.end() - (db > 1 ? 1 : 0), 1);
    oo.strides.insert(oo.strides.end() - (db > 1 ? 1 : 0), 0);
  }
  if (db == 1) {
    oo.sizes.push_back(1);
    oo.strides.push_back(0);
  }
  auto kernel = std::make_shared<MatmulNdKernel>(oo, expand_batch(a, batch), expand_batch(b, batch),
                                                 nbatch, m, k, n);
  return finish_op(op, kernel, ws, ex);
}

}  // namespace
}  // namespace ops
}  // namespace simcann

extern "C" {

// aclnn_matmul.h: aclnnMatmulGetWorkspaceSize(self, mat2, out, int8_t cubeMathType, ...).
aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor* self, const aclTensor* mat2,
                                        aclTensor* out, int8_t cubeMathType, uint64_t* ws,
                                        aclOpExecutor** ex) {
  return simcann::ops::matmul_nd("aclnnMatmul", self, mat2, out, cubeMathType, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnMatmul)

}  // extern "C"
