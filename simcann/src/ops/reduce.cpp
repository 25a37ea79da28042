// Reductions and concatenation of the simulated device: aclnnMax / aclnnMin (all elements),
// aclnnAmax / aclnnMaxDim (over dims), aclnnReduceSum, aclnnAll / aclnnAny (over dims),
// aclnnCat. They are what torch.allclose (isclose(...).all()), torch.testing.assert_close / expecttest's assertEqual (max of the
// difference, all / any of masks) and torch.cat reach on torch_npu (SIMCANN_TRACE=1 on 2.14;
// op-plugin MaxKernelNpuOpApi.cpp `EXEC_NPU_CMD(aclnnMax, self, result)`, AllKernelNpuOpApi.cpp /
// AnyKernelNpuOpApi.cpp `(self, dims, keepdim, out)`, op_plugin_functions.yaml `exec: aclnnAmax`,
// CatKernelNpuOpApi.cpp `EXEC_NPU_CMD(aclnnCat, tensor_list, dim, out)`).
//
// Argument rules cite CANN's op sources (hicann/ops-math math/reduce_max, reduce_all, reduce_any,
// conversion/concat_d: op_api/aclnn_*.cpp and docs/aclnn*.md). Kernels read their inputs when they
// run (eagerly on the stream worker, or at every replay of a captured graph).
#include <cmath>
#include <cstring>

#include "kernel_util.h"

namespace simcann {
namespace ops {
namespace {

enum class Reduce { kMax, kMin, kAll, kAny, kSum };

// Which dims of a rank-`nd` tensor `dims` reduces (empty: all, docs/aclnnAll.md
// "如果dim为[]时，对所有维度做reduce"; a dim outside [-nd, nd) is refused).
bool reduced_mask(const std::vector<int64_t>& dims, size_t nd, std::vector<bool>* mask) {
  mask->assign(nd, dims.empty());
  const int64_t n = static_cast<int64_t>(nd);
  for (int64_t d : dims) {
    if (nd == 0 && (d == 0 || d == -1)) continue;  // a 0-dim tensor reduces over "dim 0"
    if (d < -n || d >= n) return false;
    (*mask)[static_cast<size_t>(d < 0 ? d + n : d)] = true;
  }
  return true;
}

// The number of elements left after reducing `mask` out of `sizes`.
int64_t kept_numel(const std::vector<int64_t>& sizes, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t k = 0; k < sizes.size(); ++k) n *= mask[k] ? 1 : sizes[k];
  return n;
}

// out[j] = fold of self over the reduced dims, j counting the kept positions row-major.
// kMax / kMin: the largest / smallest element; a NaN wins (PyTorch's max / amax propagate NaN; the CANN docs do not
// say otherwise); the winning element is copied bit-for-bit when out has self's type.
// kAll / kAny: every / some element non-zero (NaN counts as non-zero), stored as 1 / 0.
// kSum: the sum in out's type (accumulated in double for a floating out, rounded once; in int64,
// wrapping like out's type, otherwise; a bool out is "any").
// With `indices` (aclnnMaxDim, one reduced dim): the position along that dim of the first
// largest element (PyTorch's CPU max(dim) keeps the first of equal maxima).
class ReduceKernel : public Kernel {
 public:
  ReduceKernel(Reduce kind, const TensorView& out, const TensorView& self, std::vector<bool> mask,
               const TensorView* indices = nullptr)
      : kind_(kind),
        out_(out),
        self_(self),
        mask_(std::move(mask)),
        has_indices_(indices != nullptr) {
    if (has_indices_) indices_ = *indices;
  }

  aclError run() const override {
    const std::vector<char*> po = element_addresses(out_);
    const std::vector<char*> ps = element_addresses(self_);
    std::vector<const char*> best(po.size(), nullptr);         // kMax
    std::vector<int> truth(po.size(), kind_ == Reduce::kAll);  // kAll / kAny
    std::vector<double> fsum(po.size(), 0.0);                    // kSum, floating out
    std::vector<int64_t> isum(po.size(), 0);                     // kSum, otherwise
    std::vector<int64_t> where(po.size(), 0);                    // indices
    const size_t nd = self_.sizes.size();
    std::vector<int64_t> idx(nd, 0);
    for (const char* p : ps) {
      size_t j = 0;
      int64_t along = 0;
      for (size_t k = 0; k < nd; ++k) {
        if (!mask_[k]) j = j * static_cast<size_t>(self_.sizes[k]) + static_cast<size_t>(idx[k]);
        if (mask_[k]) along = idx[k];
      }
      if (kind_ == Reduce::kSum) {
        add(p, &fsum[j], &isum[j]);
      } else if (fold(p, &best[j], &truth[j])) {
        where[j] = along;
      }
      for (size_t k = nd; k-- > 0;) {
        if (++idx[k] < self_.sizes[k]) break;
        idx[k] = 0;
      }
    }
    for (size_t j = 0; j < po.size(); ++j) {
      if (kind_ == Reduce::kSum) {
        emit_sum(po[j], fsum[j], isum[j]);
      } else {
        emit(po[j], best[j], truth[j]);
      }
    }
    if (has_indices_) {
      const std::vector<char*> pi = element_addresses(indices_);
      for (size_t j = 0; j < pi.size(); ++j) store_int64(indices_.dtype, pi[j], where[j]);
    }
    return ACL_SUCCESS;
  }

  std::vector<MemRange> ranges() const override {
    return view_ranges({&self_}, {&out_, has_indices_ ? &indices_ : nullptr});
  }

 private:
  // a beats b: a > b for kMax, a < b for kMin; a NaN beats everything.
  bool beats(const char* a, const char* b) const {
    const bool min = kind_ == Reduce::kMin;
    if (!dtype_is_floating(self_.dtype)) {
      const int64_t x = load_int64(self_.dtype, a), y = load_int64(self_.dtype, b);
      return min ? x < y : x > y;
    }
    const double x = load_double(self_.dtype, a), y = load_double(self_.dtype, b);
    if (std::isnan(y)) return false;
    return std::isnan(x) || (min ? x < y : x > y);
  }

  // Folds element `p` in; true when it became the new maximum (kMax).
  bool fold(const char* p, const char** best, int* truth) const {
    if (kind_ == Reduce::kMax || kind_ == Reduce::kMin) {
      if (*best != nullptr && !beats(p, *best)) return false;
      *best = p;
      return true;
    }
    const bool nonzero = dtype_is_floating(self_.dtype) ? load_double(self_.dtype, p) != 0.0
                                                        : load_int64(self_.dtype, p) != 0;
    if (kind_ == Reduce::kAll) *truth = *truth && nonzero;
    if (kind_ == Reduce::kAny) *truth = *truth || nonzero;
    return false;
  }

  void add(const char* p, double* fsum, int64_t* isum) const {
    if (dtype_is_floating(out_.dtype)) {
      *fsum += load_double(self_.dtype, p);
    } else {
      // Input cast to the integral out type first (aclnnReduceSum's dtype), then summed.
      *isum = static_cast<int64_t>(static_cast<uint64_t>(*isum) +
                                   static_cast<uint64_t>(load_int64(self_.dtype, p)));
    }
  }

  void emit_sum(char* out, double fsum, int64_t isum) const {
    if (dtype_is_floating(out_.dtype)) {
      store_double(out_.dtype, out, fsum);
    } else {
      store_int64(out_.dtype, out, isum);
    }
  }

  void emit(char* out, const char* best, int truth) const {
    if (kind_ != Reduce::kMax && kind_ != Reduce::kMin) {
      store_int64(out_.dtype, out, truth ? 1 : 0);
    } else if (out_.dtype == self_.dtype) {
      std::memcpy(out, best, dtype_size(self_.dtype));
    } else if (dtype_is_floating(self_.dtype)) {
      store_double(out_.dtype, out, load_double(self_.dtype, best));
    } else {
      store_int64(out_.dtype, out, load_int64(self_.dtype, best));
    }
  }

  Reduce kind_;
  TensorView out_;
  TensorView self_;
  std::vector<bool> mask_;
  bool has_indices_;
  TensorView indices_;
};

aclnnStatus reduce(const char* op, Reduce kind, const aclTensor* self,
                   const std::vector<int64_t>& dims, const aclTensor* out, uint64_t* ws,
                   aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView &s = view_of(self), &o = view_of(out);
  std::vector<bool> mask;
  if (!reduced_mask(dims, s.sizes.size(), &mask)) return invalid(op, "dim out of range");
  // A max over nothing has no value (MaxKernelNpuOpApi.cpp refuses numel() == 0 before the call;
  // amax over an empty reduced dim is refused by PyTorch the same way).
  if ((kind == Reduce::kMax || kind == Reduce::kMin) && s.numel() == 0) {
    return invalid(op, "cannot reduce an empty tensor");
  }
  if (o.numel() != kept_numel(s.sizes, mask)) {
    return invalid(op, "out has the wrong number of elements for the reduced shape");
  }
  // aclnn_max.cpp / aclnnAll / aclnnAny: out's dtype is in the op's list; an out of another type
  // than self's is converted here (All / Any: BOOL or UINT8 in the docs).
  return finish_op(op, std::make_shared<ReduceKernel>(kind, o, s, std::move(mask)), ws, ex);
}

// aclnnReduceSum(self, dim, keepDim, dtype, out): out has type `dtype` (docs/aclnnReduceSum.md);
// torch.sum of a bool / integer tensor sums into int64.
aclnnStatus reduce_sum(const char* op, const aclTensor* self, const std::vector<int64_t>& dims,
                       aclDataType dtype, const aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "out", out));
  if (view_of(out).dtype != dtype) return invalid(op, "out's dtype is not the dtype argument");
  return reduce(op, Reduce::kSum, self, dims, out, ws, ex);
}

// aclnnMaxDim(self, dim, keepdim, out, indices): the maximum along one dim and where it is
// (docs/aclnnMaxDim.md; indices INT64 / INT32).
aclnnStatus max_dim(const char* op, const aclTensor* self, int64_t dim, const aclTensor* out,
                    const aclTensor* indices, uint64_t* ws, aclOpExecutor** ex) {
  SIMCANN_CHECK(check_tensor(op, "self", self));
  SIMCANN_CHECK(check_tensor(op, "out", out));
  SIMCANN_CHECK(check_tensor(op, "indices", indices));
  const TensorView &s = view_of(self), &o = view_of(out), &i = view_of(indices);
  if (i.dtype != ACL_INT64 && i.dtype != ACL_INT32) return invalid(op, "indices: int64 or int32");
  std::vector<bool> mask;
  if (!reduced_mask({dim}, s.sizes.size(), &mask)) return invalid(op, "dim out of range");
  if (s.numel() == 0) return invalid(op, "cannot reduce an empty tensor");
  const int64_t kept = kept_numel(s.sizes, mask);
  if (o.numel() != kept || i.numel() != kept) {
    return invalid(op, "out / indices have the wrong number of elements for the reduced shape");
  }
  if (o.dtype != s.dtype) return invalid(op, "out must have self's dtype");
  return finish_op(op, std::make_shared<ReduceKernel>(Reduce::kMax, o, s, std::move(mask), &i), ws,
                   ex);
}

// ---- cat -------------------------------------------------------------------------------------

// out = the tensors concatenated along `dim`: each is copied (converting to out's type: the list
// promotes, docs/aclnnCat.md "互推导关系") into the slice of out it fills. Every tensor has
// out's rank and out's sizes except along `dim`; a 1-D empty tensor is skipped (op-plugin
// already drops them: CatKernelNpuOpApi.cpp cat_dest_tensor_list_opapi).
aclnnStatus cat(const char* op, const aclTensorList* tensors, int64_t dim, const aclTensor* out,
                uint64_t* ws, aclOpExecutor** ex) {
  const std::vector<const aclTensor*> list = tensor_list_of(tensors);
  if (list.empty()) return invalid(op, "tensors must not be empty");
  SIMCANN_CHECK(check_tensor(op, "out", out));
  const TensorView& o = view_of(out);
  const int64_t nd = static_cast<int64_t>(o.sizes.size());
  if (nd == 0) return invalid(op, "cannot concatenate 0-dim tensors");
  if (dim < -nd || dim >= nd) return invalid(op, "dim out of range");
  const size_t d = static_cast<size_t>(dim < 0 ? dim + nd : dim);
  std::vector<std::shared_ptr<Kernel>> parts;
  int64_t at = 0;
  for (const aclTensor* t : list) {
    SIMCANN_CHECK(check_tensor(op, "tensors[i]", t));
    const TensorView& v = view_of(t);
    if (v.sizes.size() == 1 && v.sizes[0] == 0) continue;
    if (v.sizes.size() != o.sizes.size()) return invalid(op, "tensors must have out's rank");
    for (size_t k = 0; k < v.sizes.size(); ++k) {
      if (k != d && v.sizes[k] != o.sizes[k]) {
        return invalid(op, "tensors must match out's sizes except along dim");
      }
    }
    TensorView slice = o;
    slice.offset += at * o.strides[d];
    slice.sizes[d] = v.sizes[d];
    at += v.sizes[d];
    if (at > o.sizes[d]) return invalid(op, "out is too small along dim");
    parts.push_back(make_copy_kernel(slice, v));
  }
  if (at != o.sizes[d]) return invalid(op, "out's size along dim is not the sum of the tensors'");
  return finish_op(op, std::make_shared<KernelList>(std::move(parts)), ws, ex);
}

}  // namespace
}  // namespace ops
}  // namespace simcann

namespace so = simcann::ops;

extern "C" {

// docs/aclnnMax.md: (self, out, ...): the largest of all elements (aclnn_max.cpp reduces every
// dim, GetMaxDimListForTensor).
aclnnStatus aclnnMaxGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* ws,
                                     aclOpExecutor** ex) {
  return so::reduce("aclnnMax", so::Reduce::kMax, self, {}, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnMax)

// docs/aclnnMin.md: (self, out, ...): the smallest of all elements (torch.min(); tensor printing).
aclnnStatus aclnnMinGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* ws,
                                     aclOpExecutor** ex) {
  return so::reduce("aclnnMin", so::Reduce::kMin, self, {}, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnMin)

// docs/aclnnAmax.md: (self, const aclIntArray* dim, bool keepDim, out, ...).
aclnnStatus aclnnAmaxGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim, bool keepDim,
                                      aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  (void)keepDim;  // only changes out's shape, which out already has
  return so::reduce("aclnnAmax", so::Reduce::kMax, self, so::int_array_of(dim), out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnAmax)

// docs/aclnnAll.md / aclnnAny.md: (self, const aclIntArray* dim, bool keepdim, out, ...).
aclnnStatus aclnnAllGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim, bool keepdim,
                                     aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  (void)keepdim;
  return so::reduce("aclnnAll", so::Reduce::kAll, self, so::int_array_of(dim), out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnAll)

aclnnStatus aclnnAnyGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim, bool keepdim,
                                     aclTensor* out, uint64_t* ws, aclOpExecutor** ex) {
  (void)keepdim;
  return so::reduce("aclnnAny", so::Reduce::kAny, self, so::int_array_of(dim), out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnAny)

// docs/aclnnReduceSum.md: (self, const aclIntArray* dim, bool keepDim, aclDataType dtype, out).
aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim,
                                           bool keepDim, aclDataType dtype, aclTensor* out,
                                           uint64_t* ws, aclOpExecutor** ex) {
  (void)keepDim;
  return so::reduce_sum("aclnnReduceSum", self, so::int_array_of(dim), dtype, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnReduceSum)

// docs/aclnnMaxDim.md: (self, int64_t dim, bool keepdim, out, indices, ...).
aclnnStatus aclnnMaxDimGetWorkspaceSize(const aclTensor* self, int64_t dim, bool keepdim,
                                        aclTensor* out, aclTensor* indices, uint64_t* ws,
                                        aclOpExecutor** ex) {
  (void)keepdim;
  return so::max_dim("aclnnMaxDim", self, dim, out, indices, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnMaxDim)

// docs/aclnnCat.md: (const aclTensorList* tensors, int64_t dim, out, ...).
aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList* tensors, int64_t dim, aclTensor* out,
                                     uint64_t* ws, aclOpExecutor** ex) {
  return so::cat("aclnnCat", tensors, dim, out, ws, ex);
}
SIMCANN_ACLNN_LAUNCH(aclnnCat)

}  // extern "C"
