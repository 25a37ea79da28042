// aclnn meta objects: aclCreateTensor / aclCreateScalar / aclCreateIntArray / ... and their
// destroyers and getters.
//
// Prototypes: op-plugin op_plugin/utils/op_api_common_base.h (typedefs `_aclCreateTensor`,
// `_aclCreateScalar`, `_aclDestroyTensor`, ... which torch_npu resolves with dlsym from the opapi
// library) and MaskedSelectKernelNpuOpApi.cpp (`aclGetViewShape`, result freed with delete[]).
// Values passed to aclCreateScalar: op-plugin ConvertType(const at::Scalar&) passes a double with
// ACL_DOUBLE, an int64_t with ACL_INT64, a bool with ACL_BOOL (complex is not supported here).
#include <cstring>
#include <new>

#include "handoff.h"
#include "ops_internal.h"

using simcann::ops::ScalarValue;
using simcann::ops::TensorView;

struct aclTensor {
  TensorView view;
};
struct aclScalar {
  ScalarValue value;
  bool valid = true;
};
// The arrays and lists: a copy of the elements passed to aclCreateXxx (see new_list below).
struct aclIntArray {
  std::vector<int64_t> items;
};
struct aclFloatArray {
  std::vector<float> items;
};
struct aclBoolArray {
  std::vector<bool> items;
};
struct aclTensorList {
  std::vector<const aclTensor*> items;
};
struct aclScalarList {
  std::vector<const aclScalar*> items;
};

namespace simcann {
namespace ops {

// Note [Handles handed over through torch_npu's task queue]: each accessor acquires the handle.
const TensorView& view_of(const aclTensor* t) {
  handle_used(t);
  return t->view;
}
const ScalarValue& value_of(const aclScalar* s) {
  handle_used(s);
  return s->value;
}
std::vector<const aclTensor*> tensor_list_of(const aclTensorList* l) {
  handle_used(l);
  return l == nullptr ? std::vector<const aclTensor*>{} : l->items;
}
std::vector<int64_t> int_array_of(const aclIntArray* a) {
  handle_used(a);
  return a == nullptr ? std::vector<int64_t>{} : a->items;
}

namespace {

// The value of type T at `p` (any alignment).
template <typename T>
T get(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool set_floating(ScalarValue* out, double v) {
  out->as_double = v;
  out->as_int = static_cast<int64_t>(v);
  out->is_floating = true;
  return true;
}

bool set_integral(ScalarValue* out, int64_t v) {
  out->as_int = v;
  out->as_double = static_cast<double>(v);
  return true;
}

// Reads a host scalar of type `dtype` from `p`. Returns false for types we do not model.
bool read_scalar(const void* p, aclDataType dtype, ScalarValue* out) {
  out->dtype = dtype;
  switch (dtype) {
    case ACL_DOUBLE:
      return set_floating(out, get<double>(p));
    case ACL_FLOAT:
      return set_floating(out, get<float>(p));
    case ACL_INT64:
      return set_integral(out, get<int64_t>(p));
    case ACL_INT32:
      return set_integral(out, get<int32_t>(p));
    case ACL_BOOL:
      return set_integral(out, get<bool>(p) ? 1 : 0);
    default:
      return false;
  }
}

template <typename T>
void assign(std::vector<T>* dst, const T* src, uint64_t n) {
  if (src != nullptr) dst->assign(src, src + n);
}

// A new array / list holding a copy of value[0, size) (empty for a null `value`); null when out of
// memory.
template <typename List, typename T>
List* new_list(const T* value, uint64_t size) {
  auto* l = new (std::nothrow) List();
  if (l != nullptr) assign(&l->items, value, size);
  handle_created(l);  // Note [Handles handed over through torch_npu's task queue]
  return l;
}

// aclDestroyXxx of a descriptor that owns nothing else.
template <typename T>
int destroy(const T* object) {
  handle_used(object);
  delete object;
  return 0;
}

}  // namespace
}  // namespace ops
}  // namespace simcann

extern "C" {

aclTensor* aclCreateTensor(const int64_t* view_dims, uint64_t view_dims_num, aclDataType data_type,
                           const int64_t* stride, int64_t offset, aclFormat format,
                           const int64_t* storage_dims, uint64_t storage_dims_num,
                           void* tensor_data) {
  auto* t = new (std::nothrow) aclTensor();
  if (t == nullptr) return nullptr;
  TensorView& v = t->view;
  v.dtype = data_type;
  v.format = format;
  simcann::ops::assign(&v.sizes, view_dims, view_dims_num);
  if (stride != nullptr) {
    simcann::ops::assign(&v.strides, stride, view_dims_num);
  } else {
    // No strides given: contiguous (row-major).
    v.strides.assign(v.sizes.size(), 1);
    for (size_t k = v.sizes.size(); k > 1; --k)
      v.strides[k - 2] = v.strides[k - 1] * v.sizes[k - 1];
  }
  v.offset = offset;
  simcann::ops::assign(&v.storage_dims, storage_dims, storage_dims_num);
  v.data = tensor_data;
  simcann::handle_created(t);  // Note [Handles handed over through torch_npu's task queue]
  return t;
}

aclScalar* aclCreateScalar(void* value, aclDataType data_type) {
  if (value == nullptr) return nullptr;
  auto* s = new (std::nothrow) aclScalar();
  if (s == nullptr) return nullptr;
  // An unsupported scalar type is remembered and rejected by the op that receives it, with a
  // message naming the op (an aclnn op receiving an invalid scalar fails in GetWorkspaceSize).
  s->valid = simcann::ops::read_scalar(value, data_type, &s->value);
  s->value.dtype = data_type;
  simcann::handle_created(s);  // Note [Handles handed over through torch_npu's task queue]
  return s;
}

aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  return simcann::ops::new_list<aclIntArray>(value, size);
}

aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size) {
  return simcann::ops::new_list<aclFloatArray>(value, size);
}

aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  return simcann::ops::new_list<aclBoolArray>(value, size);
}

aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
  return simcann::ops::new_list<aclTensorList>(value, size);
}

aclScalarList* aclCreateScalarList(const aclScalar* const* value, uint64_t size) {
  return simcann::ops::new_list<aclScalarList>(value, size);
}

int aclDestroyTensor(const aclTensor* tensor) { return simcann::ops::destroy(tensor); }
int aclDestroyScalar(const aclScalar* scalar) { return simcann::ops::destroy(scalar); }
int aclDestroyIntArray(const aclIntArray* array) { return simcann::ops::destroy(array); }
int aclDestroyFloatArray(const aclFloatArray* array) { return simcann::ops::destroy(array); }
int aclDestroyBoolArray(const aclBoolArray* array) { return simcann::ops::destroy(array); }

// A tensor list owns its tensors (CANN acl_meta.h: aclDestroyTensorList destroys the elements).
int aclDestroyTensorList(const aclTensorList* array) {
  if (array == nullptr) return 0;
  simcann::handle_used(array);
  for (const aclTensor* t : array->items) simcann::ops::destroy(t);
  delete array;
  return 0;
}

int aclDestroyScalarList(const aclScalarList* array) {
  if (array == nullptr) return 0;
  simcann::handle_used(array);
  for (const aclScalar* s : array->items) simcann::ops::destroy(s);
  delete array;
  return 0;
}

int aclGetViewShape(const aclTensor* tensor, int64_t** view_dims, uint64_t* view_dims_num) {
  if (tensor == nullptr || view_dims == nullptr || view_dims_num == nullptr) {
    return simcann::ops::kErrNullptr;
  }
  const simcann::ops::TensorView& v = simcann::ops::view_of(tensor);
  const auto& sizes = v.produced_sizes ? *v.produced_sizes : v.sizes;
  *view_dims = new int64_t[sizes.empty() ? 1 : sizes.size()];
  for (size_t k = 0; k < sizes.size(); ++k) (*view_dims)[k] = sizes[k];
  *view_dims_num = sizes.size();
  return 0;
}

}  // extern "C"

namespace simcann {
namespace ops {

aclnnStatus check_scalar(const char* op, const char* what, const aclScalar* s) {
  if (s == nullptr) {
    set_error("simcann: %s: %s is a null aclScalar", op, what);
    return kErrNullptr;
  }
  if (!s->valid) {
    set_error("simcann: %s: %s has scalar type %s (%d), which the simulated op does not support",
              op, what, dtype_name(s->value.dtype), static_cast<int>(s->value.dtype));
    return kErrInvalid;
  }
  return kOk;
}

}  // namespace ops
}  // namespace simcann
