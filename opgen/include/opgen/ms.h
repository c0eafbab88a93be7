// opgen bridge between MindSpore tensors (Function<T> path, MindSpore 2.10) and kernel views.
//
// Facts this relies on (verified on MindSpore 2.10 CPU): Function / AutogradContext live in
// mindspore::pynative::autograd and need "include/pynative/backward/function.h" (not pulled in
// by ms_extension.h on CPU); tensor data must be read through ->cpu() (data_c() of an incoming
// gradient read directly gave zeros).
//
// Output allocation: empty() takes outputs from MindSpore's CPU memory pool (opgen/ms_support.cc).
//
// Build cost: this header includes only "include/pynative/backward/function.h" (Function<T>,
// AutogradContext, Tensor, MakeValue; ~9 CPU s per unit), not "ms_extension.h" (~35 CPU s). The
// helpers that need the heavy pyboost/runtime headers (host, empty, the error raisers, none) are
// declared here and defined in opgen/ms_support.cc, which opgen build compiles once per machine
// (per MindSpore version, compiler and opgen) and links into every extension. The bindings unit
// adds opgen/ms_bind.h (pybind11's TensorPtr caster).
//
// Shipped with opgen (not generated).
#ifndef OPGEN_MS_H_
#define OPGEN_MS_H_

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "include/pynative/backward/function.h"
#include "opgen/kernel.h"
#include "opgen/rules.h"
#include "opgen/sanitize.h"

namespace opgen {
namespace ms {

using mindspore::TypeId;
using mindspore::tensor::TensorPtr;
using TensorPtrList = std::vector<TensorPtr>;
using mindspore::pynative::autograd::AutogradContext;

/// Host-resident, contiguous version of `t` whose data_c() kernels may read (opgen/ms_support.cc).
/// A view (slice, transpose, broadcast) is copied by opgen's parallel loops, else by MindSpore.
TensorPtr host(const TensorPtr &t);

/// The memory of `t`, an input the op writes in place (opgen/ms_support.cc): the tensor's own CPU
/// memory (its device address when it has one, else its host data), after the work MindSpore
/// still has queued for it. Writes through it are what later reads of `t` see; no copy is made.
/// Throws pybind11::value_error naming `op` and input `name` when `t` is not contiguous (a view of
/// another tensor: the write would have to go through its strides) or not in CPU memory.
void *writable(const TensorPtr &t, const char *op, const char *name);

/// A view over `data`, the memory writable() returned for `t`, with `t`'s shape.
template <typename E>
View<E> view_at(void *data, const TensorPtr &t) {
  const auto &s = t->shape();
  return make_view<E>(shadow(static_cast<E *>(data), numel_of(s.data(), static_cast<int>(s.size()))), s.data(),
                      static_cast<int>(s.size()));
}

/// The gradients of a concatenation's inputs as views of its output gradient `dout` (no copy):
/// tensor i is `dout` narrowed along `axis` (negative counts from the end) to the extent of
/// `shapes[i]` on that axis, starting where tensor i-1 ended -- MindSpore's own concat bprop
/// (pyboost narrow_view). Generated for a spec's `kernel.grad_views` input whose output's shape
/// rule is concat(xs, axis) (opgen/ms_support.cc).
TensorPtrList split_view(const TensorPtr &dout, int64_t axis, const std::vector<Shape> &shapes);

/// The gradient of a sum's input as a view of its output gradient `dout` (no copy): `dout`
/// reshaped to `kept` (the reduced shape with reduced axes kept as 1s), then broadcast to
/// `shape` with stride 0 over the reduced axes -- MindSpore's own ReduceSum bprop (pyboost
/// broadcast_to_view). Generated for a spec's `kernel.grad_views` input whose output's shape
/// rule is reduce(x, axis, keep_dims) (opgen/ms_support.cc).
TensorPtr unreduce_view(const TensorPtr &dout, const Shape &kept, const Shape &shape);

/// Output tensor of `dtype` and `shape` for a kernel to fill: its data is NOT initialised.
///
/// Taken from MindSpore's CPU memory pool (no zero fill, no page faults once the pool holds the
/// memory); a plain host tensor (zero-filled on first access) below 4 KB, for empty shapes, or if
/// the pool is unavailable (opgen/ms_support.cc).
TensorPtr empty(TypeId dtype, const Shape &shape);

/// mindspore::TypeId of kernel element type E (see the dtype table in opgen/kernel.h).
template <typename E>
struct type_id;
template <>
struct type_id<half> : std::integral_constant<TypeId, mindspore::kNumberTypeFloat16> {};
template <>
struct type_id<bfloat16> : std::integral_constant<TypeId, mindspore::kNumberTypeBFloat16> {};
template <>
struct type_id<float> : std::integral_constant<TypeId, mindspore::kNumberTypeFloat32> {};
template <>
struct type_id<double> : std::integral_constant<TypeId, mindspore::kNumberTypeFloat64> {};
template <>
struct type_id<int8_t> : std::integral_constant<TypeId, mindspore::kNumberTypeInt8> {};
template <>
struct type_id<int16_t> : std::integral_constant<TypeId, mindspore::kNumberTypeInt16> {};
template <>
struct type_id<int32_t> : std::integral_constant<TypeId, mindspore::kNumberTypeInt32> {};
template <>
struct type_id<int64_t> : std::integral_constant<TypeId, mindspore::kNumberTypeInt64> {};
template <>
struct type_id<uint8_t> : std::integral_constant<TypeId, mindspore::kNumberTypeUInt8> {};
template <>
struct type_id<uint16_t> : std::integral_constant<TypeId, mindspore::kNumberTypeUInt16> {};
template <>
struct type_id<uint32_t> : std::integral_constant<TypeId, mindspore::kNumberTypeUInt32> {};
template <>
struct type_id<uint64_t> : std::integral_constant<TypeId, mindspore::kNumberTypeUInt64> {};
template <>
struct type_id<bool> : std::integral_constant<TypeId, mindspore::kNumberTypeBool> {};
template <typename E>
constexpr TypeId type_id_v = type_id<std::remove_cv_t<E>>::value;

// MindSpore stores float16 / bfloat16 elements as 2-byte bit patterns, as opgen::half and
// opgen::bfloat16 do: a tensor's data pointer is viewed as `half *` directly.
static_assert(sizeof(mindspore::Float16) == sizeof(half), "MindSpore float16 layout differs from opgen::half");
static_assert(sizeof(mindspore::BFloat16) == sizeof(bfloat16), "MindSpore bfloat16 layout differs");

/// A fresh output tensor for element type E (see empty()).
template <typename E>
TensorPtr empty_for(const Shape &shape) {
  return empty(type_id_v<E>, shape);
}

template <typename E>
In<E> in(const TensorPtr &t) {
  if (t == nullptr) return In<E>{};
  const auto &s = t->shape();
  return make_view<const E>(shadow(static_cast<const E *>(t->data_c()), numel_of(s.data(), static_cast<int>(s.size()))),
                            s.data(), static_cast<int>(s.size()));
}

template <typename E>
Out<E> out(const TensorPtr &t) {
  if (t == nullptr) return Out<E>{};
  const auto &s = t->shape();
  return make_view<E>(shadow(static_cast<E *>(t->data_c()), numel_of(s.data(), static_cast<int>(s.size()))), s.data(),
                      static_cast<int>(s.size()));
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
[[noreturn]] void unsupported_dtypes(const char *op, const std::vector<std::string> &names,
                                     const std::vector<TypeId> &got, const char *rows);

/// Raises a Python ValueError "<op>(): <what the kernel said>".
[[noreturn]] void kernel_error(const char *op, const std::exception &e);

/// Raises a Python MemoryError "<op>(): out of memory (<what>)": a std::bad_alloc while the
/// op reads its inputs (a lazily initialised 2**62-element tensor) or allocates its outputs.
[[noreturn]] void memory_error(const char *op, const std::bad_alloc &e);

// ------------------------------------------------------------ optional and dynamic inputs

/// Stand-in passed to Function<T>::Apply for an absent optional input: Apply dereferences every
/// TensorPtr argument, so None cannot travel as nullptr. Never written, never differentiated.
const TensorPtr &none();

/// The Function<T> argument for an optional input given from Python (None -> none()).
inline TensorPtr optional_arg(const std::optional<TensorPtr> &t) { return t.has_value() && *t ? *t : none(); }

/// Host copy of an optional input, nullptr when absent.
inline TensorPtr host_optional(const TensorPtr &t) { return (t == nullptr || t == none()) ? nullptr : host(t); }

inline TensorPtrList host_list(const TensorPtrList &ts) {
  TensorPtrList out;
  out.reserve(ts.size());
  for (const auto &t : ts) out.push_back(host(t));
  return out;
}

template <typename E>
InList<E> in_list(const TensorPtrList &ts) {
  InList<E> l;
  for (const auto &t : ts) l.items.push_back(in<E>(t));
  return l;
}

template <typename E>
InList<E> shape_only_list(const std::vector<Shape> &shapes) {
  InList<E> l;
  for (const auto &s : shapes) l.items.push_back(shape_only<E>(s));
  return l;
}

template <typename E>
OutList<E> out_list(const TensorPtrList &ts) {
  OutList<E> l;
  for (const auto &t : ts) l.items.push_back(out<E>(t));
  return l;
}

/// Whether `t` has dtype `want`; an absent optional input (nullptr) matches any row.
inline bool dtype_is(const TensorPtr &t, TypeId want) { return t == nullptr || t->data_type() == want; }
inline bool dtype_is(const TensorPtrList &ts, TypeId want) {
  for (const auto &t : ts) {
    if (t->data_type() != want) return false;
  }
  return true;
}

/// Appends "name=dtype" entries describing an argument, for unsupported-dtype messages.
inline void describe(std::vector<std::string> *names, std::vector<TypeId> *got, const std::string &name,
                     const TensorPtr &t) {
  if (t == nullptr) return;
  names->push_back(name);
  got->push_back(t->data_type());
}
inline void describe(std::vector<std::string> *names, std::vector<TypeId> *got, const std::string &name,
                     const TensorPtrList &ts) {
  for (size_t i = 0; i < ts.size(); ++i) describe(names, got, name + "[" + std::to_string(i) + "]", ts[i]);
}

inline std::vector<Shape> shapes_of(const TensorPtrList &ts) {
  std::vector<Shape> out;
  for (const auto &t : ts) out.push_back(t->shape());
  return out;
}

inline bool need_any(AutogradContext *ctx, const TensorPtrList &ts) {
  for (const auto &t : ts) {
    if (ctx->NeedGrad(t)) return true;
  }
  return false;
}

// ------------------------------------------------ values kept in AutogradContext::saved_data

/// `[n1, x.., n2, y.., ...]` for items {x.., y.., ...} (strings, shapes): one int64 vector,
/// each item prefixed by its length; split_length_prefixed() reads it back.
template <typename Item>
mindspore::ValuePtr keep_length_prefixed(const std::vector<Item> &v) {
  std::vector<int64_t> enc;
  for (const auto &item : v) {
    enc.push_back(static_cast<int64_t>(item.size()));
    enc.insert(enc.end(), item.begin(), item.end());
  }
  return mindspore::MakeValue(enc);
}

inline mindspore::ValuePtr keep_shapes(const std::vector<Shape> &v) { return keep_length_prefixed(v); }

/// Stores an attr or shape for Backward; strings, bool/str lists and lists of shapes are kept
/// as int64 vectors (MakeValue has no overloads for them).
inline mindspore::ValuePtr keep(int64_t v) { return mindspore::MakeValue(v); }
inline mindspore::ValuePtr keep(float v) { return mindspore::MakeValue(v); }
inline mindspore::ValuePtr keep(bool v) { return mindspore::MakeValue(v); }
inline mindspore::ValuePtr keep(const std::vector<int64_t> &v) { return mindspore::MakeValue(v); }
inline mindspore::ValuePtr keep(const std::vector<float> &v) { return mindspore::MakeValue(v); }
inline mindspore::ValuePtr keep(const std::vector<bool> &v) {
  return mindspore::MakeValue(std::vector<int64_t>(v.begin(), v.end()));
}
inline mindspore::ValuePtr keep(const std::string &v) {
  return mindspore::MakeValue(std::vector<int64_t>(v.begin(), v.end()));
}
inline mindspore::ValuePtr keep(const std::vector<std::string> &v) { return keep_length_prefixed(v); }
inline mindspore::ValuePtr keep(const std::vector<Shape> &v) { return keep_shapes(v); }
/// A list[list[float]] attr: a tuple of tuples (MakeValue nests; GetValue reads it back).
inline mindspore::ValuePtr keep(const std::vector<std::vector<float>> &v) { return mindspore::MakeValue(v); }

/// The items of `[n1, x.., n2, y.., ...]` as keep_length_prefixed() writes them.
template <typename Item>
std::vector<Item> split_length_prefixed(const std::vector<int64_t> &enc) {
  std::vector<Item> out;
  for (size_t p = 0; p < enc.size();) {
    const size_t len = static_cast<size_t>(enc[p]);
    out.emplace_back(enc.begin() + static_cast<std::ptrdiff_t>(p + 1),
                     enc.begin() + static_cast<std::ptrdiff_t>(p + 1 + len));
    p += 1 + len;
  }
  return out;
}

template <typename A>
A restore(const mindspore::ValuePtr &v) {
  if constexpr (std::is_same_v<A, std::vector<bool>>) {
    const auto enc = mindspore::GetValue<std::vector<int64_t>>(v);
    return A(enc.begin(), enc.end());
  } else if constexpr (std::is_same_v<A, std::string>) {
    const auto enc = mindspore::GetValue<std::vector<int64_t>>(v);
    return A(enc.begin(), enc.end());
  } else if constexpr (std::is_same_v<A, std::vector<std::string>> || std::is_same_v<A, std::vector<Shape>>) {
    return split_length_prefixed<typename A::value_type>(mindspore::GetValue<std::vector<int64_t>>(v));
  } else {
    return mindspore::GetValue<A>(v);
  }
}

}  // namespace ms
}  // namespace opgen

#endif  // OPGEN_MS_H_
