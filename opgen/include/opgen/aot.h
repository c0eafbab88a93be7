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
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "opgen/kernel.h"

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

/// Reads attr `name` of C++ type `A` from AotExtra.
template <typename A>
A get_attr(AotExtra *extra, const char *name);
template <>
inline int64_t get_attr<int64_t>(AotExtra *e, const char *n) { return e->GetAttrInt(n); }
template <>
inline float get_attr<float>(AotExtra *e, const char *n) { return e->GetAttrFloat(n); }
template <>
inline bool get_attr<bool>(AotExtra *e, const char *n) { return e->GetAttrBool(n); }
template <>
inline std::string get_attr<std::string>(AotExtra *e, const char *n) { return e->GetAttrStr(n); }
template <>
inline std::vector<int64_t> get_attr<std::vector<int64_t>>(AotExtra *e, const char *n) {
  return e->GetAttrIntVec(n);
}
template <>
inline std::vector<float> get_attr<std::vector<float>>(AotExtra *e, const char *n) {
  return e->GetAttrFloatVec(n);
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
  return make_view<E>(static_cast<E *>(params[i]), shapes[i], ndims[i]);
}

}  // namespace aot
}  // namespace opgen

#endif  // OPGEN_AOT_H_
