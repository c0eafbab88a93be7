// opgen bridge between MindSpore tensors (Function<T> path, MindSpore 2.10) and kernel views.
//
// Facts this relies on (verified on MindSpore 2.10 CPU): Function / AutogradContext live in
// mindspore::pynative::autograd and need "include/pynative/backward/function.h" (not pulled in
// by ms_extension.h on CPU); tensor data must be read through ->cpu() (data_c() of an incoming
// gradient read directly gave zeros).
//
// Shipped with opgen (not generated).
#ifndef OPGEN_MS_H_
#define OPGEN_MS_H_

#include <string>
#include <vector>

#include "ms_extension.h"
#include "include/pynative/backward/function.h"
#include "opgen/kernel.h"

namespace opgen {
namespace ms {

using mindspore::TypeId;
using mindspore::tensor::TensorPtr;
using TensorPtrList = std::vector<TensorPtr>;

/// Host-resident, contiguous version of `t` whose data_c() kernels may read.
inline TensorPtr host(const TensorPtr &t) {
  if (t == nullptr) return t;
  TensorPtr c = t->is_contiguous() ? t : mindspore::kernel::pyboost::contiguous(t);
  return c->cpu();
}

/// Fresh output tensor of `dtype` and `shape` (data uninitialised until a kernel writes it).
inline TensorPtr empty(TypeId dtype, const Shape &shape) {
  return std::make_shared<mindspore::tensor::Tensor>(dtype, shape);
}

template <typename E>
In<E> in(const TensorPtr &t) {
  if (t == nullptr) return In<E>{};
  const auto &s = t->shape();
  return make_view<const E>(static_cast<const E *>(t->data_c()), s.data(), static_cast<int>(s.size()));
}

template <typename E>
Out<E> out(const TensorPtr &t) {
  if (t == nullptr) return Out<E>{};
  const auto &s = t->shape();
  return make_view<E>(static_cast<E *>(t->data_c()), s.data(), static_cast<int>(s.size()));
}

/// A view with `shape` but no data: stands for a tensor the backward pass did not keep.
template <typename E>
In<E> shape_only(const Shape &shape) {
  In<E> v;
  v.shape = shape.data();
  v.ndim = static_cast<int>(shape.size());
  v.numel = numel_of(shape.data(), v.ndim);
  return v;
}

inline const char *dtype_name(TypeId t) {
  switch (t) {
    case mindspore::kNumberTypeFloat16: return "float16";
    case mindspore::kNumberTypeBFloat16: return "bfloat16";
    case mindspore::kNumberTypeFloat32: return "float32";
    case mindspore::kNumberTypeFloat64: return "float64";
    case mindspore::kNumberTypeInt8: return "int8";
    case mindspore::kNumberTypeInt16: return "int16";
    case mindspore::kNumberTypeInt32: return "int32";
    case mindspore::kNumberTypeInt64: return "int64";
    case mindspore::kNumberTypeUInt8: return "uint8";
    case mindspore::kNumberTypeUInt16: return "uint16";
    case mindspore::kNumberTypeUInt32: return "uint32";
    case mindspore::kNumberTypeUInt64: return "uint64";
    case mindspore::kNumberTypeBool: return "bool";
    case mindspore::kNumberTypeComplex64: return "complex64";
    case mindspore::kNumberTypeComplex128: return "complex128";
    default: return "unknown";
  }
}

/// Raises a Python TypeError naming the op, the dtypes it got and the rows it supports.
[[noreturn]] inline void unsupported_dtypes(const char *op, const std::vector<std::string> &names,
                                            const std::vector<TypeId> &got, const char *rows) {
  std::string msg = std::string(op) + "(): unsupported dtypes (";
  for (size_t i = 0; i < got.size(); ++i) {
    msg += names[i] + "=" + dtype_name(got[i]);
    if (i + 1 < got.size()) msg += ", ";
  }
  msg += "); supported dtype_format rows: " + std::string(rows);
  throw pybind11::type_error(msg);
}

[[noreturn]] inline void kernel_error(const char *op, const std::exception &e) {
  throw pybind11::value_error(std::string(op) + "(): " + e.what());
}

}  // namespace ms
}  // namespace opgen

#endif  // OPGEN_MS_H_
