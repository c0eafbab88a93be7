// opgen aot support: MindSpore's C ABI for func_type="aot" kernels on CPU.
//
//   extern "C" int f(int nparam, void **params, int *ndims, int64_t **shapes,
//                    const char **dtypes, void *stream, void *extra);
//   extern "C" int fInit(int *ndims, int64_t **shapes, const char **dtypes, AotExtra *extra);
//
// `extra` points to MindSpore's AotExtraImpl (mindspore/ccsrc/utils/custom_aot_extra.h,
// MindSpore 2.10). Including that header drags in MindSpore's IR; this file instead declares
// the same class layout (same virtual functions in the same order, same members), so the aot
// library needs no MindSpore headers. Build with -D_GLIBCXX_USE_CXX11_ABI=0, as MindSpore is.
//
// Shipped with opgen (not generated).
#ifndef OPGEN_AOT_H_
#define OPGEN_AOT_H_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "opgen/kernel.h"
#include "opgen/rules.h"
#include "opgen/sanitize.h"

namespace opgen {
namespace aot {

/// Layout twin of mindspore::AotKernelData.
class AotKernelData {
 public:
  AotKernelData() = default;
  virtual ~AotKernelData() = default;
};

/// Layout twin of mindspore::AotExtra (virtual functions in declaration order).
class AotExtra {
 public:
  virtual ~AotExtra() = default;
  virtual bool HasAttr(std::string name) = 0;
  virtual bool GetAttrBool(std::string name) = 0;
  virtual int64_t GetAttrInt(std::string name) = 0;
  virtual float GetAttrFloat(std::string name) = 0;
  virtual std::string GetAttrStr(std::string name) = 0;
  virtual std::vector<int64_t> GetAttrIntVec(std::string name) = 0;
  virtual std::vector<float> GetAttrFloatVec(std::string name) = 0;
  virtual std::vector<std::vector<int64_t>> GetAttrInt2DVec(std::string name) = 0;
  virtual std::vector<std::vector<float>> GetAttrFloat2DVec(std::string name) = 0;

  std::vector<size_t> workspace_;
  AotKernelData *kernel_data_{nullptr};
};

/// AotKernelData carrying an op's typed attrs (cached by the op's Init function).
template <typename A>
struct KernelAttrs : AotKernelData {
  A attrs;
};

/// Return codes of opgen's aot entry points (0 is success, as MindSpore expects).
enum Status : int {
  kOk = 0,
  kBadParamCount = 1,
  kUnsupportedDtype = 2,
  kKernelError = 3,
  kInternalError = 4,
  kMissingAttr = 5,
};

// A kernel error (an index out of range, a user's opgen::Error...) leaves the entry point as a
// std::runtime_error "<op>(): <message>". MindSpore 2.10's CPU aot kernel catches a
// std::exception from the function it calls and raises RuntimeError("For 'Custom' on CPU,
// operator failed when executing user defined file <lib>! Error message is <op>(): <message>")
// in PyNative and GRAPH_MODE alike, whereas for a non-zero return code it drops any message
// ("Return value from CPU AOT kernel(...)'s function(...) is 3"; verified, see
// docs/robustness.md). Never returns; typed int so that `return report_kernel_error(...)` reads
// like the other exits.
[[noreturn]] inline int report_kernel_error(const char *op, const char *what) {
  throw std::runtime_error(std::string(op) + "(): " + what);
}

/// Reads attr `name` of C++ type `A` from AotExtra. Lists, strings and lists of strings arrive
/// length-prefixed as int (or float) vectors -- AotExtra has no getter for them, and an empty
/// list attr is never sent -- in the format of opgen.runtime.encode_attr; decoding throws
/// opgen::Error on a malformed value. Lists of lists arrive as they are (GetAttrInt2DVec).
template <typename A>
A get_attr(AotExtra *extra, const char *name);
template <>
inline int64_t get_attr<int64_t>(AotExtra *e, const char *n) { return e->GetAttrInt(n); }
template <>
inline float get_attr<float>(AotExtra *e, const char *n) { return e->GetAttrFloat(n); }
template <>
inline bool get_attr<bool>(AotExtra *e, const char *n) { return e->GetAttrBool(n); }

namespace detail {
template <typename V>
size_t prefixed_size(const std::vector<V> &v, const char *name) {
  if (v.empty() || v[0] < 0 || static_cast<size_t>(v[0]) + 1 > v.size()) {
    throw Error(std::string("malformed attr '") + name + "'");
  }
  return static_cast<size_t>(v[0]);
}
inline std::string take_string(const std::vector<int64_t> &v, size_t *pos, const char *name) {
  if (*pos >= v.size() || v[*pos] < 0 || *pos + 1 + static_cast<size_t>(v[*pos]) > v.size()) {
    throw Error(std::string("malformed attr '") + name + "'");
  }
  const size_t len = static_cast<size_t>(v[*pos]);
  std::string s;
  for (size_t i = 0; i < len; ++i) s.push_back(static_cast<char>(v[*pos + 1 + i]));
  *pos += 1 + len;
  return s;
}
}  // namespace detail

template <>
inline std::vector<int64_t> get_attr<std::vector<int64_t>>(AotExtra *e, const char *n) {
  const std::vector<int64_t> v = e->GetAttrIntVec(n);
  const size_t len = detail::prefixed_size(v, n);
  return std::vector<int64_t>(v.begin() + 1, v.begin() + 1 + static_cast<std::ptrdiff_t>(len));
}
template <>
inline std::vector<float> get_attr<std::vector<float>>(AotExtra *e, const char *n) {
  const std::vector<float> v = e->GetAttrFloatVec(n);
  const size_t len = detail::prefixed_size(v, n);
  return std::vector<float>(v.begin() + 1, v.begin() + 1 + static_cast<std::ptrdiff_t>(len));
}
template <>
inline std::vector<bool> get_attr<std::vector<bool>>(AotExtra *e, const char *n) {
  const std::vector<int64_t> v = get_attr<std::vector<int64_t>>(e, n);
  return std::vector<bool>(v.begin(), v.end());
}
template <>
inline std::vector<std::vector<int64_t>> get_attr<std::vector<std::vector<int64_t>>>(AotExtra *e, const char *n) {
  return e->GetAttrInt2DVec(n);  // sent as a nested list (encode_attr): empty rows arrive intact
}
template <>
inline std::vector<std::vector<float>> get_attr<std::vector<std::vector<float>>>(AotExtra *e, const char *n) {
  return e->GetAttrFloat2DVec(n);
}
template <>
inline std::string get_attr<std::string>(AotExtra *e, const char *n) {
  const std::vector<int64_t> v = e->GetAttrIntVec(n);
  size_t pos = 0;
  return detail::take_string(v, &pos, n);
}
template <>
inline std::vector<std::string> get_attr<std::vector<std::string>>(AotExtra *e, const char *n) {
  const std::vector<int64_t> v = e->GetAttrIntVec(n);
  const size_t count = detail::prefixed_size(v, n);
  std::vector<std::string> out;
  size_t pos = 1;
  for (size_t i = 0; i < count; ++i) out.push_back(detail::take_string(v, &pos, n));
  return out;
}

/// True when the dtypes of the flattened params equal `row`, where group g (an input, output or
/// gradient) contributes `counts[g]` params of dtype row[g] (0 for an absent optional input,
/// N for a dynamic one), and the counts add up to nparam.
inline bool match_groups(int nparam, const char **dtypes, const char *const *row, const int64_t *counts,
                         int ngroups) {
  int p = 0;
  for (int g = 0; g < ngroups; ++g) {
    for (int64_t c = 0; c < counts[g]; ++c, ++p) {
      if (p >= nparam || dtypes[p] == nullptr || std::strcmp(dtypes[p], row[g]) != 0) return false;
    }
  }
  return p == nparam;
}

/// Walks the flattened params in order, handing out typed views.
struct Cursor {
  void **params;
  int *ndims;
  int64_t **shapes;
  int next = 0;

  template <typename E>
  View<E> one() {
    View<E> v = make_view<E>(shadow(static_cast<E *>(params[next]), numel_of(shapes[next], ndims[next])),
                             shapes[next], ndims[next]);
    ++next;
    return v;
  }
  /// An optional input: a view when present (count 1), an empty view when absent (count 0).
  template <typename E>
  View<E> maybe(int64_t count) {
    return count ? one<E>() : View<E>{};
  }
  /// A dynamic input of `count` tensors.
  template <typename E>
  ViewList<E> list(int64_t count) {
    ViewList<E> l;
    for (int64_t i = 0; i < count; ++i) l.items.push_back(one<E>());
    return l;
  }
};

/// Fills the placeholder output of an op that writes an input in place (one float, 0): a Custom
/// primitive has an output, and a graph keeps the op through it (opgen.backends.mindspore.graph.keep).
inline void done(const View<float> &placeholder) {
  if (placeholder.data != nullptr && placeholder.numel > 0) placeholder.data[0] = 0.0f;
}

/// The `dtypes[i]` string MindSpore passes to an aot kernel for element type E (see the dtype
/// table in opgen/kernel.h); verified on MindSpore 2.10 CPU for float16 and bfloat16 too.
template <typename E>
struct dtype_name;
#define OPGEN_AOT_DTYPE_NAME(T, NAME)               \
  template <>                                       \
  struct dtype_name<T> {                            \
    static constexpr const char *value = NAME;      \
  };
OPGEN_AOT_DTYPE_NAME(half, "float16")
OPGEN_AOT_DTYPE_NAME(bfloat16, "bfloat16")
OPGEN_AOT_DTYPE_NAME(float, "float32")
OPGEN_AOT_DTYPE_NAME(double, "float64")
OPGEN_AOT_DTYPE_NAME(int8_t, "int8")
OPGEN_AOT_DTYPE_NAME(int16_t, "int16")
OPGEN_AOT_DTYPE_NAME(int32_t, "int32")
OPGEN_AOT_DTYPE_NAME(int64_t, "int64")
OPGEN_AOT_DTYPE_NAME(uint8_t, "uint8")
OPGEN_AOT_DTYPE_NAME(uint16_t, "uint16")
OPGEN_AOT_DTYPE_NAME(uint32_t, "uint32")
OPGEN_AOT_DTYPE_NAME(uint64_t, "uint64")
OPGEN_AOT_DTYPE_NAME(bool, "bool")
#undef OPGEN_AOT_DTYPE_NAME
template <typename E>
constexpr const char *dtype_name_v = dtype_name<std::remove_cv_t<E>>::value;

/// True when every dtypes[i] equals expected[i] (both nparam long).
inline bool dtypes_match(int nparam, const char **dtypes, const char *const *expected) {
  for (int i = 0; i < nparam; ++i) {
    if (dtypes[i] == nullptr || std::strcmp(dtypes[i], expected[i]) != 0) return false;
  }
  return true;
}

/// View over params[i] with element type E.
template <typename E>
View<E> view(void **params, int *ndims, int64_t **shapes, int i) {
  return make_view<E>(shadow(static_cast<E *>(params[i]), numel_of(shapes[i], ndims[i])), shapes[i], ndims[i]);
}

}  // namespace aot
}  // namespace opgen

#endif  // OPGEN_AOT_H_
