// opgen kernel support: typed tensor views, broadcasting, reduce-to-shape, a parallel loop
// and scalar math. Framework-free: included by the aot C ABI kernels (no MindSpore headers)
// and by the Function<T> translation units alike, so one kernel body serves both paths.
//
// Element types a kernel body may see, and the type its scalar expressions compute in
// (opgen::compute_t<E>):
//
//   dtype     C++ element type   compute_t   MindSpore TypeId       aot dtypes[i]
//   float16   opgen::half        float       kNumberTypeFloat16     "float16"
//   bfloat16  opgen::bfloat16    float       kNumberTypeBFloat16    "bfloat16"
//   float32   float              float       kNumberTypeFloat32     "float32"
//   float64   double             double      kNumberTypeFloat64     "float64"
//   int8..64  int8_t..int64_t    itself      kNumberTypeInt8..64    "int8".."int64"
//   uint8..64 uint8_t..uint64_t  itself      kNumberTypeUInt8..64   "uint8".."uint64"
//   bool      bool               bool        kNumberTypeBool        "bool"
//
// The C++ side of each row is also available as traits: opgen::ms::type_id_v<E> (ms.h) and
// opgen::aot::dtype_name_v<E> (aot.h). half and bfloat16 (opgen/half.h) convert to and from
// float implicitly, compute in float, and work with opgen::math, std::numeric_limits and
// std::common_type.
//
// Shipped with opgen (not generated). Shapes are row-major and contiguous.
#ifndef OPGEN_KERNEL_H_
#define OPGEN_KERNEL_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "opgen/half.h"
#if !defined(OPGEN_DEVICE_CUDA)
#include "opgen/parallel.h"
#endif

// Vector math (see "vector loops" below): declared at global scope, where glibc declares them.
#if defined(OPGEN_VECTOR_MATH) && defined(__x86_64__) && defined(__GLIBC__) && !defined(__clang__) && \
    !defined(OPGEN_DEVICE_CUDA)
#if __GLIBC_PREREQ(2, 35)
#define OPGEN_LIBMVEC 1
// The same declarations glibc's <bits/math-vector.h> makes under -ffast-math only: they tell
// GCC that a vector variant (_ZGV*_expf...) of each function exists in libmvec.
#define OPGEN_SIMD_FN __attribute__((__simd__("notinbranch")))
extern "C" {
float expf(float) noexcept OPGEN_SIMD_FN;
float logf(float) noexcept OPGEN_SIMD_FN;
float tanhf(float) noexcept OPGEN_SIMD_FN;
float erff(float) noexcept OPGEN_SIMD_FN;
float log1pf(float) noexcept OPGEN_SIMD_FN;
float expm1f(float) noexcept OPGEN_SIMD_FN;
float powf(float, float) noexcept OPGEN_SIMD_FN;
double exp(double) noexcept OPGEN_SIMD_FN;
double log(double) noexcept OPGEN_SIMD_FN;
double tanh(double) noexcept OPGEN_SIMD_FN;
double erf(double) noexcept OPGEN_SIMD_FN;
double log1p(double) noexcept OPGEN_SIMD_FN;
double expm1(double) noexcept OPGEN_SIMD_FN;
double pow(double, double) noexcept OPGEN_SIMD_FN;
}
#undef OPGEN_SIMD_FN
#endif
#endif

namespace opgen {

using Shape = std::vector<int64_t>;

/// A user-facing kernel error (bad shape, index out of range...). The aot entry points turn it
/// into a non-zero return code; the Function<T> path into a Python ValueError.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What both paths say, after "<op>(): ", when a kernel throws a value that is not a
/// std::exception (`throw 42`).
inline constexpr const char *kNotAnException =
    "the kernel threw a value that is not a std::exception (throw opgen::Error(\"why\") to say why)";

namespace detail {
#ifdef OPGEN_CHECKED
/// `name` points into OPGEN_NAME_VIEWS's argument text ("x, y, out"): the name runs to the
/// next comma.
[[noreturn]] inline void out_of_bounds(const char *name, int64_t item, const char *what, int64_t i, int64_t n,
                                       const char *unit) {
  std::string view = "a view";
  if (name) {
    const char *end = name;
    while (*end && *end != ',' && *end != ' ') ++end;
    view = "'" + std::string(name, end) + "'";
  }
  if (item >= 0) view += "[" + std::to_string(item) + "]";
  throw Error("checked mode: " + std::string(what) + " " + std::to_string(i) + " is out of bounds for view " +
              view + " of " + std::to_string(n) + " " + unit);
}

/// Checked mode's guard of one writable CPU view (opgen/sanitize.h): the view sees `copy`, which
/// is followed by guard bytes and an inaccessible page, and is written back to `original` when
/// the kernel is done. `name`, `item` and `role` are what OPGEN_NAME_VIEWS_AS says of the view
/// whose data is `copy` (null, -1 and 0 until it does), for the error that names it.
struct Guarded {
  void *original;
  unsigned char *copy;
  size_t bytes;       // the buffer's size: what the view may write
  size_t guard;       // guard bytes after it
  void *base;         // the mapping (copy, guard bytes, inaccessible page)
  size_t mapped;      // its size
  const char *name;   // into OPGEN_NAME_VIEWS's argument text
  int64_t item;       // position in a dynamic input's list, or -1
  char role;          // 'o' output, 'w' input written in place, 'g' gradient, 0 unknown
};

/// The guards of the entry point running on this thread (opgen::ShadowScope in checked mode),
/// or null outside one.
inline std::vector<Guarded> *&active_guards() {
  thread_local std::vector<Guarded> *active = nullptr;
  return active;
}

/// Names the guard whose copy `data` is, if any (a view of read-only or device memory has none).
inline void name_guard(const void *data, const char *name, int64_t item, char role) {
  std::vector<Guarded> *guards = active_guards();
  if (guards == nullptr || data == nullptr) return;
  for (auto &g : *guards) {
    if (g.copy == data) {
      g.name = name;
      g.item = item;
      g.role = role;
    }
  }
}

/// The next name in OPGEN_NAME_VIEWS's argument text (a string literal: it outlives the views).
inline const char *next_name(const char **names) {
  const char *p = *names;
  while (*p == ' ' || *p == ',') ++p;
  const char *e = p;
  while (*e && *e != ',') ++e;
  *names = e;
  return p;
}
/// The next role in OPGEN_NAME_VIEWS_AS's role string (0 past its end).
inline char next_role(const char **roles) {
  if (**roles == 0) return 0;
  return *(*roles)++;
}
template <typename V>
auto name_one(const V &v, const char *name, char role, int) -> decltype(v.items, void()) {
  for (size_t k = 0; k < v.items.size(); ++k) {
    v.items[k].name = name;
    v.items[k].item = static_cast<int64_t>(k);
    name_guard(v.items[k].data, name, static_cast<int64_t>(k), role);
  }
}
template <typename V>
void name_one(const V &v, const char *name, char role, long) {
  v.name = name;
  name_guard(v.data, name, -1, role);
}
template <typename... V>
void name_views(const char *roles, const char *names, const V &...views) {
  (name_one(views, next_name(&names), next_role(&roles), 0), ...);
}
#endif
}  // namespace detail

// OPGEN_NAME_VIEWS(x, y, out) names a kernel's views for checked mode's errors;
// OPGEN_NAME_VIEWS_AS("--o", x, y, out) also gives each view's role, one character each ('o' an
// output, 'w' an input written in place, 'g' an input's gradient, '-' read only), which an error
// about a write past the end of a view states. Generated kernels call the latter first.
#ifdef OPGEN_CHECKED
#define OPGEN_NAME_VIEWS(...) ::opgen::detail::name_views("", #__VA_ARGS__, __VA_ARGS__)
#define OPGEN_NAME_VIEWS_AS(roles, ...) ::opgen::detail::name_views(roles, #__VA_ARGS__, __VA_ARGS__)
#else
#define OPGEN_NAME_VIEWS(...) ((void)0)
#define OPGEN_NAME_VIEWS_AS(roles, ...) ((void)0)
#endif

/// A typed view of one contiguous, row-major tensor. `T` is `const E` for inputs.
/// `data` is nullptr for a gradient that is not needed (test with `if (view)`).
template <typename T>
struct View {
  T *data = nullptr;
  const int64_t *shape = nullptr;
  int ndim = 0;
  int64_t numel = 0;

#ifdef OPGEN_CHECKED
  // Checked mode (OPGEN_CHECK=1, opgen build --checked, opgen test): every element access and
  // dim() is bounds-checked; a miss throws opgen::Error naming the view (named by the kernel's
  // OPGEN_NAME_VIEWS prologue) and the index, which the op reports as its error.
  mutable const char *name = nullptr;
  mutable int64_t item = -1;  // position in its list, for a view of a dynamic input

  int64_t dim(int i) const {
    if (i < -ndim || i >= ndim) detail::out_of_bounds(name, item, "dim", i, ndim, "dimensions");
    return shape[i < 0 ? i + ndim : i];
  }
#if !defined(OPGEN_DEVICE_CUDA)
  T &operator[](int64_t i) const {
    if (i < 0 || i >= numel) detail::out_of_bounds(name, item, "index", i, numel, "elements");
    return data[i];
  }
#endif
#else
  /// Size of dimension `i`; negative `i` counts from the end.
  int64_t dim(int i) const { return shape[i < 0 ? i + ndim : i]; }
#if !defined(OPGEN_DEVICE_CUDA)
  T &operator[](int64_t i) const { return data[i]; }
#endif
#endif
#if defined(OPGEN_DEVICE_CUDA)
  // On CUDA a view's data is device memory: an element is read or written in device code only
  // (a __device__ functor or a kernel of the body's own), so host code that indexes a view (a raw
  // CPU loop, x[i]) is a compile error at the body's YAML line ("calling a __device__ function
  // from a __host__ function"), not a crash at run time. dim() and the shape stay host-side.
  __device__ T &operator[](int64_t i) const { return data[i]; }
#endif
  explicit operator bool() const { return data != nullptr; }
  Shape shape_vector() const { return Shape(shape, shape + ndim); }
};

template <typename E>
using In = View<const E>;
template <typename E>
using Out = View<E>;

/// A read-only view of what `v` views: an input the op writes in place (`writes: true`, an
/// opgen::Out) passed where an opgen::In is taken, e.g. opgen::map(acc, f, opgen::as_in(acc), x).
template <typename T>
View<const T> as_in(const View<T> &v) {
  View<const T> r;
  r.data = v.data;
  r.shape = v.shape;
  r.ndim = v.ndim;
  r.numel = v.numel;
#ifdef OPGEN_CHECKED
  r.name = v.name;
  r.item = v.item;
#endif
  return r;
}

inline int64_t numel_of(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

template <typename E>
View<E> make_view(E *data, const int64_t *shape, int ndim) {
  View<E> v;
  v.data = data;
  v.shape = shape;
  v.ndim = ndim;
  v.numel = numel_of(shape, ndim);
  return v;
}

/// The type scalar expressions are evaluated in: float for the 16-bit floats, E otherwise.
template <typename E>
struct compute_type {
  using type = E;
};
template <>
struct compute_type<half> {
  using type = float;
};
template <>
struct compute_type<bfloat16> {
  using type = float;
};
template <typename E>
using compute_t = typename compute_type<std::remove_cv_t<E>>::type;

/// The type an elementwise expression over tensors of element types E... is evaluated in: the
/// usual arithmetic conversions of their compute types, so float inputs with a bool output
/// (`x > y`) compare as floats, and int32 with int64 computes in int64.
template <typename... E>
using common_compute_t = std::common_type_t<compute_t<E>...>;

// ------------------------------------------------------------------------------ shapes

inline std::string shape_str(const Shape &s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    out += std::to_string(s[i]);
    if (i + 1 < s.size() || s.size() == 1) out += ",";
    if (i + 1 < s.size()) out += " ";
  }
  return out + ")";
}

/// NumPy broadcasting of several shapes. Throws opgen::Error when they are incompatible.
inline Shape broadcast_shape(const std::vector<Shape> &shapes) {
  size_t nd = 0;
  for (const auto &s : shapes) nd = std::max(nd, s.size());
  Shape out(nd, 1);
  for (const auto &s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[nd - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string msg = "shapes cannot be broadcast together:";
      for (const auto &t : shapes) msg += " " + shape_str(t);
      throw Error(msg);
    }
  }
  return out;
}

inline Shape broadcast_shape(std::initializer_list<Shape> shapes) { return broadcast_shape(std::vector<Shape>(shapes)); }

// ------------------------------------------------------------------------- broadcasting

/// Strides (in elements) that map an index of `out_shape` onto a broadcast input `in`.
/// Throws opgen::Error when `in` does not broadcast to `out_shape` (an output shape rule that
/// its inputs do not fit), which would otherwise read past the input or give a wrong answer.
inline Shape broadcast_strides(const Shape &out_shape, const int64_t *in_shape, int in_ndim) {
  size_t nd = out_shape.size();
  Shape strides(nd, 0);
  int64_t stride = 1;
  for (int i = in_ndim - 1; i >= 0; --i) {
    const size_t back = static_cast<size_t>(in_ndim - i);  // position from the end
    if (back > nd || (in_shape[i] != 1 && in_shape[i] != out_shape[nd - back])) {
      throw Error("an input of shape " + shape_str(Shape(in_shape, in_shape + in_ndim)) +
                  " does not broadcast to the output shape " + shape_str(out_shape));
    }
    size_t o = nd - static_cast<size_t>(in_ndim - i);
    strides[o] = in_shape[i] == 1 ? 0 : stride;
    stride *= in_shape[i];
  }
  return strides;
}

/// Walks the indices of `out_shape` in order, keeping each input's broadcast offset.
template <size_t N>
struct BroadcastCursor {
  Shape shape;
  std::vector<Shape> strides;
  Shape index;
  int64_t offset[N > 0 ? N : 1] = {};

  BroadcastCursor(const Shape &out_shape, const std::vector<Shape> &in_strides)
      : shape(out_shape), strides(in_strides), index(out_shape.size(), 0) {}

  void seek(int64_t linear) {
    for (size_t k = 0; k < N; ++k) offset[k] = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      index[d] = shape[d] == 0 ? 0 : linear % shape[d];
      linear = shape[d] == 0 ? 0 : linear / shape[d];
      for (size_t k = 0; k < N; ++k) offset[k] += index[d] * strides[k][d];
    }
  }
  void next() {
    for (size_t d = shape.size(); d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) offset[k] += strides[k][d];
      if (index[d] < shape[d]) return;
      for (size_t k = 0; k < N; ++k) offset[k] -= strides[k][d] * index[d];
      index[d] = 0;
    }
  }
};

template <typename A, typename B>
bool same_shape(const View<A> &a, const View<B> &b) {
  return a.ndim == b.ndim && std::equal(a.shape, a.shape + a.ndim, b.shape);
}

// ------------------------------------------------------------------------ vector loops
//
// Element-wise loops are `#pragma omp simd` loops when built with -fopenmp-simd (the SIMD
// directives only, no OpenMP runtime), which opgen's builds pass together with
// -DOPGEN_OMP_SIMD, -fno-math-errno and -fno-trapping-math (opgen.build.kernel_flags). Calls to
// exp, log, tanh, erf, log1p, expm1 and pow inside them vectorise to glibc's vector math library
// (libmvec, 4 ulp at most) when OPGEN_VECTOR_MATH is defined and -lmvec linked (declarations at
// the top of this file). Without these macros the loops are the same code, scalar. On x86-64
// each contiguous loop is compiled three times, for the baseline ISA (SSE2: 4 floats per libmvec
// call), for AVX2+FMA (8 floats) and for AVX-512 (16 floats), chosen at run time: a library built
// on one machine runs on any x86-64. (opgen::math::tanh and opgen::math::erf in float are plain
// arithmetic, not libmvec: see tanh_float and erf_float.)

#if defined(OPGEN_OMP_SIMD) && (defined(__GNUC__) || defined(__clang__))
/// Marks a loop whose iterations are independent: vectorise it (with -fopenmp-simd).
#define OPGEN_SIMD _Pragma("omp simd")
/// The same, for a loop that sums into `var` (reassociation allowed: lanes sum separately);
/// several variables are one list: OPGEN_SIMD_SUM(a, b).
#define OPGEN_SIMD_SUM(...) _Pragma(OPGEN_STR_(omp simd reduction(+ : __VA_ARGS__)))
#define OPGEN_STR_(...) #__VA_ARGS__
#elif defined(__GNUC__) && !defined(__clang__)
#define OPGEN_SIMD _Pragma("GCC ivdep")
#define OPGEN_SIMD_SUM(...)
#else
#define OPGEN_SIMD
#define OPGEN_SIMD_SUM(...)
#endif
/// Independent iterations, without an OpenMP construct (an exception may leave the loop).
#if defined(__GNUC__) && !defined(__clang__)
#define OPGEN_IVDEP _Pragma("GCC ivdep")
#else
#define OPGEN_IVDEP
#endif
// Kept for kernel bodies written against the old name.
#define OPGEN_VECTORIZE_LOOP OPGEN_SIMD


// ------------------------------------------------- portable loops (both devices, opgen/devices.md)

/// In a functor of opgen::for_each_index: reports a bad input found at one index (an index out of
/// range, a value outside the op's domain) by its code (opgen::cuda::ErrorCode, opgen/device.h).
/// On the CPU it throws opgen::Error(error_message(code)), which for_each_index rethrows; in CUDA
/// device code it records the code in the unit's device error word and returns, so the functor
/// gives its element a defined value (or writes nothing) and the body calls
/// opgen::check_device_errors() after the loop, which throws the same opgen::Error on the host.
OPGEN_HD inline void raise_in_kernel(unsigned code) {
#if defined(__CUDA_ARCH__)
  cuda::raise_on_device(code);
#else
  throw Error(cuda::error_message(code));
#endif
}

/// The groups of a reduction of a row-major array of shape `shape` to `kept` (shape with 1 on the
/// reduced axes: reduce_shape(..., true)): group g (kept element g, row-major) holds the `count`
/// elements at base(g) + offset(r), r in [0, count). Plain data with OPGEN_HD members: a functor
/// of for_each_index captures it by value and walks its group on either device. Built on the
/// host by reduce_groups.
struct ReduceGroups {
  static constexpr int kMaxDims = 16;
  int nkept = 0, nreduced = 0;  // dims of size > 1 of each kind, innermost first
  int64_t kept_size[kMaxDims] = {}, kept_stride[kMaxDims] = {};
  int64_t red_size[kMaxDims] = {}, red_stride[kMaxDims] = {};
  int64_t groups = 1, count = 1;

  /// Offset (elements) of group g's first element.
  OPGEN_HD int64_t base(int64_t g) const {
    int64_t off = 0;
    for (int d = 0; d < nkept; ++d) {
      off += (g % kept_size[d]) * kept_stride[d];
      g /= kept_size[d];
    }
    return off;
  }
  /// Offset (elements) of the r-th element of a group from its first.
  OPGEN_HD int64_t offset(int64_t r) const {
    int64_t off = 0;
    for (int d = 0; d < nreduced; ++d) {
      off += (r % red_size[d]) * red_stride[d];
      r /= red_size[d];
    }
    return off;
  }
};

/// The ReduceGroups of `shape` reduced to `kept` (same rank, each kept dim 1 or shape's). Throws
/// opgen::Error when kept does not fit shape or more than ReduceGroups::kMaxDims dims of either
/// kind have a size above 1.
inline ReduceGroups reduce_groups(const Shape &shape, const Shape &kept) {
  if (kept.size() != shape.size()) throw Error("reduce_groups: the kept shape's rank differs from the array's");
  ReduceGroups g;
  int64_t stride = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    const int64_t n = shape[k];
    if (kept[k] != 1 && kept[k] != n) throw Error("reduce_groups: the kept shape does not fit the array");
    if (n != 1) {
      const bool reduced = kept[k] == 1;
      int &nd = reduced ? g.nreduced : g.nkept;
      if (nd == ReduceGroups::kMaxDims) throw Error("reduce_groups: more than 16 dimensions of one kind");
      (reduced ? g.red_size : g.kept_size)[nd] = n;
      (reduced ? g.red_stride : g.kept_stride)[nd] = stride;
      ++nd;
      (reduced ? g.count : g.groups) *= n;
    }
    stride *= n;
  }
  return g;
}

#if !defined(OPGEN_DEVICE_CUDA)  // the CPU loops; opgen/cuda.h has the CUDA ones
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(OPGEN_NO_DISPATCH)
#define OPGEN_AVX2_DISPATCH 1
#define OPGEN_TARGET_AVX2 __attribute__((target("avx2,fma")))
// x86-64-v4's vector ISA: 16 floats per instruction and libmvec's _ZGVeN16v_* variants.
#define OPGEN_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#endif

namespace detail {
/// The vector ISA whose copies of the loops this CPU runs (checked once per library): 0 the
/// baseline (SSE2), 1 AVX2+FMA, 2 AVX-512 (F, VL, BW, DQ). The environment variable OPGEN_ISA
/// (`baseline`, `avx2`, `avx512`) caps it, to test or compare the copies on one machine.
OPGEN_HIDDEN inline int isa_level() {
#if defined(OPGEN_AVX2_DISPATCH)
  static const int level = [] {
    __builtin_cpu_init();
    int cpu = 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      cpu = (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
                ? 2
                : 1;
    }
    const char *cap = std::getenv("OPGEN_ISA");
    if (cap != nullptr) {
      const std::string c(cap);
      if (c == "baseline") return 0;
      if (c == "avx2") return cpu < 1 ? cpu : 1;
    }
    return cpu;
  }();
  return level;
#else
  return 0;
#endif
}

/// Calls body() from a function compiled for AVX-512 / AVX2+FMA when the CPU has them, else from
/// the baseline one. `body` is inlined into each, so its loops are vectorised for that ISA.
/// MaxLevel (an isa_level value) caps the choice for a loop measured faster in a narrower copy.
template <typename Body>
#if defined(OPGEN_AVX2_DISPATCH)
OPGEN_TARGET_AVX512 __attribute__((flatten))
#endif
inline void run_avx512(Body &body) {
  body();
}
template <typename Body>
#if defined(OPGEN_AVX2_DISPATCH)
OPGEN_TARGET_AVX2 __attribute__((flatten))
#endif
inline void run_avx2(Body &body) {
  body();
}
template <typename Body>
inline void run_base(Body &body) {
  body();
}
template <int MaxLevel = 2, typename Body>
inline void dispatch_isa(Body &&body) {
  switch (std::min(isa_level(), MaxLevel)) {
    case 2: run_avx512(body); break;
    case 1: run_avx2(body); break;
    default: run_base(body); break;
  }
}

/// p[i] as C. A bool is read as its byte (0 or 1): GCC does not vectorise a loop that loads
/// bools ("no vectype"), and `where`'s bool condition kept its loop scalar (6 GB/s).
template <typename C, typename P>
inline __attribute__((always_inline)) C load(const P *p, int64_t i) {
  if constexpr (std::is_same_v<std::remove_cv_t<P>, bool>) {
    return static_cast<C>(reinterpret_cast<const unsigned char *>(p)[i]);
  } else {
    return static_cast<C>(p[i]);
  }
}

/// o = v as OutE. A 16-bit float is assigned the compute value (its operator= stores the rounded
/// bits): `o = OutE(v)` copies a temporary, which an `omp simd` loop does not vectorise.
template <typename OutE, typename V>
inline __attribute__((always_inline)) void store(OutE &o, const V &v) {
  if constexpr (is_low_float<OutE>::value) {
    o = v;
  } else {
    o = static_cast<OutE>(v);
  }
}

/// o[i] = f(p[i]...) for i in [0, n). Outputs never overlap inputs except element by element
/// (o == p allowed), so iterations are independent.
template <typename OutE, typename C, typename F, typename... P>
inline __attribute__((always_inline)) void simd_loop(OutE *o, const F &f, int64_t n, const P *...p) {
  if constexpr (!noexcept(f(static_cast<C>(*p)...))) {
    // f may throw (an integer `/` by zero, a body's opgen::Error): an exception must not leave a
    // `#pragma omp simd` loop (GCC ends the process with std::terminate there), so these loops
    // carry no OpenMP directive and the error reaches the op's caller; blocks of a fixed trip
    // count still let GCC vectorise what it can prove safe. Functions declared noexcept (the
    // generated elementwise lambdas that cannot throw) take the omp simd loops below.
    constexpr int64_t kBlock = 16;
    int64_t i = 0;
    for (; i + kBlock <= n; i += kBlock) {
      OPGEN_IVDEP
      for (int64_t k = 0; k < kBlock; ++k) detail::store(o[i + k], f(detail::load<C>(p, i + k)...));
    }
    for (; i < n; ++i) detail::store(o[i], f(detail::load<C>(p, i)...));
    return;
  }
#if defined(OPGEN_OMP_SIMD)
  OPGEN_SIMD
  for (int64_t i = 0; i < n; ++i) detail::store(o[i], f(detail::load<C>(p, i)...));
#else
  // Without -fopenmp-simd: blocks of a fixed trip count, which GCC's -O2 vectoriser (the "very
  // cheap" cost model: no loop that needs a scalar epilogue) still takes, then the tail.
  constexpr int64_t kBlock = 16;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    OPGEN_SIMD
    for (int64_t k = 0; k < kBlock; ++k) detail::store(o[i + k], f(detail::load<C>(p, i + k)...));
  }
  for (; i < n; ++i) detail::store(o[i], f(detail::load<C>(p, i)...));
#endif
}

template <typename OutE, typename C, typename F, typename... P>
#if defined(OPGEN_AVX2_DISPATCH)
OPGEN_TARGET_AVX2
#endif
void simd_loop_avx2(OutE *o, const F &f, int64_t n, const P *...p) {
  simd_loop<OutE, C>(o, f, n, p...);
}
template <typename OutE, typename C, typename F, typename... P>
#if defined(OPGEN_AVX2_DISPATCH)
OPGEN_TARGET_AVX512
#endif
void simd_loop_avx512(OutE *o, const F &f, int64_t n, const P *...p) {
  simd_loop<OutE, C>(o, f, n, p...);
}
template <typename OutE, typename C, typename F, typename... P>
void simd_loop_base(OutE *o, const F &f, int64_t n, const P *...p) {
  simd_loop<OutE, C>(o, f, n, p...);
}

/// The contiguous loop for the CPU it runs on, in the copy for the widest ISA up to MaxIsa (an
/// isa_level value): o[i] = f(p[i]...), i in [0, n).
template <typename OutE, typename C, int MaxIsa, typename F, typename Ptrs, size_t... K>
inline void flat_loop(OutE *o, F &f, const Ptrs &p, int64_t n, std::index_sequence<K...>) {
  switch (std::min(isa_level(), MaxIsa)) {
    case 2: simd_loop_avx512<OutE, C>(o, f, n, std::get<K>(p)...); break;
    case 1: simd_loop_avx2<OutE, C>(o, f, n, std::get<K>(p)...); break;
    default: simd_loop_base<OutE, C>(o, f, n, std::get<K>(p)...); break;
  }
}

/// Elements per block of the row-broadcast loop: a broadcast input's value is repeated into a
/// block-sized buffer on the stack so that the block runs the contiguous vector loop.
constexpr int64_t kRowBlock = 256;

/// How `map` walks a broadcast: the output as `rows` x `inner` (the longest run of trailing
/// dimensions over which every input either advances contiguously or stays on one element).
struct RowPlan {
  int64_t inner = 1;                    // elements per row
  std::vector<bool> contiguous;         // per input: advances along the row (else: repeats one value)
  size_t row_dim = 0;                   // the row is dimensions row_dim.. of the shape
};

inline RowPlan row_plan(const Shape &shape, const std::vector<Shape> &strides) {
  RowPlan plan;
  const size_t n = strides.size();
  plan.contiguous.assign(n, false);
  int d = static_cast<int>(shape.size()) - 1;
  while (d >= 0 && shape[static_cast<size_t>(d)] == 1) --d;  // size-1 dims change nothing
  if (d < 0) return plan;
  plan.row_dim = static_cast<size_t>(d);
  for (size_t k = 0; k < n; ++k) plan.contiguous[k] = strides[k][static_cast<size_t>(d)] == 1;
  for (size_t k = 0; k < n; ++k)
    if (!plan.contiguous[k] && strides[k][static_cast<size_t>(d)] != 0) return plan;  // cannot happen
  plan.inner = shape[static_cast<size_t>(d)];
  for (int e = d - 1; e >= 0; --e) {
    const int64_t len = shape[static_cast<size_t>(e)];
    if (len == 1) {
      plan.row_dim = static_cast<size_t>(e);
      continue;
    }
    bool ok = true;
    for (size_t k = 0; k < n && ok; ++k) {
      const int64_t st = strides[k][static_cast<size_t>(e)];
      ok = plan.contiguous[k] ? st == plan.inner : st == 0;
    }
    if (!ok) break;
    plan.inner *= len;
    plan.row_dim = static_cast<size_t>(e);
  }
  return plan;
}

/// A cursor over the dimensions before the row (shape[0, plan.row_dim)): its offsets are each
/// row's first element, seek(r) goes to row r and next() steps one row (seeking every row cost
/// two divisions per dimension: 7% of a [1024] -> [4096, 1024] broadcast_to).
template <size_t N>
BroadcastCursor<N> row_cursor(const Shape &shape, const std::vector<Shape> &strides, const RowPlan &plan) {
  const auto head = [&](const Shape &s) {
    return Shape(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(plan.row_dim));
  };
  std::vector<Shape> outer;
  for (const Shape &st : strides) outer.push_back(head(st));
  return BroadcastCursor<N>(head(shape), outer);
}

template <int MaxIsa, typename OutE, typename F, typename Tuple, size_t... K>
void map_impl(Out<OutE> out, const Shape &iter_shape, F &f, const Tuple &ins, std::index_sequence<K...>) {
  // f sees every element in the common compute type (float inputs of a bool output stay float)
  using C = common_compute_t<OutE, std::remove_pointer_t<decltype(std::get<K>(ins).data)>...>;
  constexpr size_t N = sizeof...(K);
  constexpr std::index_sequence<K...> ks{};
  const bool flat = ((std::get<K>(ins).numel == out.numel && same_shape(std::get<K>(ins), out)) && ... && true);
  if (flat) {
    // Contiguous inputs of the output's shape (the common case): one vector loop.
    OutE *const o = out.data;
    const auto ptrs = std::make_tuple(std::get<K>(ins).data...);
    parallel_for(out.numel, [&](int64_t b, int64_t e) {
      const auto p = std::make_tuple(std::get<K>(ptrs) + b...);
      flat_loop<OutE, C, MaxIsa>(o + b, f, p, e - b, ks);
    });
    return;
  }
  std::vector<Shape> strides{broadcast_strides(iter_shape, std::get<K>(ins).shape, std::get<K>(ins).ndim)...};
  const RowPlan plan = row_plan(iter_shape, strides);
  if (plan.inner >= 16) {
    // Rows of `inner` elements: each input is contiguous along a row or repeats one value (a
    // bias added to every row, a per-row scale...). Blocks of a row run the vector loop.
    const int64_t inner = plan.inner;
    // Every input contiguous along the row (a [1024] bias added to [4096, 1024]): no buffer to
    // fill, so each row is one vector loop (blocks of kRowBlock cost a call and a loop prologue
    // per 256 elements). A repeated value is copied into a block-sized buffer first.
    const bool whole_rows = (plan.contiguous[K] && ... && true);
    const int64_t step = whole_rows ? inner : kRowBlock;
    const BroadcastCursor<N> rows = row_cursor<N>(iter_shape, strides, plan);
    parallel_for(out.numel, [&](int64_t b, int64_t e) {
      BroadcastCursor<N> cur = rows;
      cur.seek(b / inner);
      std::tuple<std::remove_cv_t<std::remove_pointer_t<decltype(std::get<K>(ins).data)>>...> held;
      std::tuple<std::array<std::remove_cv_t<std::remove_pointer_t<decltype(std::get<K>(ins).data)>>, kRowBlock>...> bufs;
      int64_t pos = b % inner;  // where in its row the chunk starts; later rows start at 0
      for (int64_t i = b; i < e; pos = 0, cur.next()) {
        const int64_t row_end = std::min(e, i - pos + inner);
        ((std::get<K>(held) = std::get<K>(ins).data[cur.offset[K]]), ...);
        const int64_t fill = std::min(kRowBlock, row_end - i);
        ((plan.contiguous[K] ? void() : void(std::fill_n(std::get<K>(bufs).data(), fill, std::get<K>(held)))), ...);
        for (int64_t j = i; j < row_end; j += step) {
          const int64_t len = std::min(step, row_end - j);
          const auto p = std::make_tuple((plan.contiguous[K] ? std::get<K>(ins).data + cur.offset[K] + pos + (j - i)
                                                             : std::get<K>(bufs).data())...);
          flat_loop<OutE, C, MaxIsa>(out.data + j, f, p, len, ks);
        }
        i = row_end;
      }
    });
    return;
  }
  parallel_for(out.numel, [&](int64_t b, int64_t e) {
    BroadcastCursor<N> cur(iter_shape, strides);
    cur.seek(b);
    for (int64_t i = b; i < e; ++i) {
      out.data[i] = static_cast<OutE>(f(static_cast<C>(std::get<K>(ins).data[cur.offset[K]])...));
      cur.next();
    }
  });
}

template <int MaxIsa, typename OutE, typename F, typename Tuple, size_t... K>
void map_reduce_impl(Out<OutE> grad, const Shape &iter_shape, F &f, const Tuple &ins, std::index_sequence<K...>) {
  using C = common_compute_t<OutE, std::remove_pointer_t<decltype(std::get<K>(ins).data)>...>;
  constexpr size_t N = sizeof...(K);
  constexpr std::index_sequence<K...> ks{};
  const int64_t total = numel_of(iter_shape.data(), static_cast<int>(iter_shape.size()));
  const bool same = static_cast<size_t>(grad.ndim) == iter_shape.size() &&
                    std::equal(grad.shape, grad.shape + grad.ndim, iter_shape.begin());
  if (same) {
    map_impl<MaxIsa>(grad, iter_shape, f, ins, ks);
    return;
  }
  // Reduce to the (broadcast) shape of the input: f's values computed a block of a row at a
  // time by the vector loop, then summed into an accumulator of the compute type (double for
  // float, whose long sums would lose digits).
  using A = std::conditional_t<std::is_same_v<C, float>, double, C>;
  std::vector<Shape> strides{broadcast_strides(iter_shape, std::get<K>(ins).shape, std::get<K>(ins).ndim)...,
                             broadcast_strides(iter_shape, grad.shape, grad.ndim)};
  const RowPlan plan = row_plan(iter_shape, strides);
  std::vector<A> acc(static_cast<size_t>(grad.numel), A(0));
  const int64_t inner = plan.inner;
  if (inner < 16 && total > 0) {
    BroadcastCursor<N + 1> cur(iter_shape, strides);
    cur.seek(0);
    for (int64_t i = 0; i < total; ++i, cur.next())
      acc[static_cast<size_t>(cur.offset[N])] += A(f(static_cast<C>(std::get<K>(ins).data[cur.offset[K]])...));
  }
  BroadcastCursor<N + 1> cur = row_cursor<N + 1>(iter_shape, strides, plan);
  std::tuple<std::remove_cv_t<std::remove_pointer_t<decltype(std::get<K>(ins).data)>>...> held;
  std::tuple<std::array<std::remove_cv_t<std::remove_pointer_t<decltype(std::get<K>(ins).data)>>, kRowBlock>...> bufs;
  std::array<C, kRowBlock> vals;
  for (int64_t i = 0; i < total && inner >= 16; i += inner, cur.next()) {
    ((std::get<K>(held) = std::get<K>(ins).data[cur.offset[K]]), ...);
    const int64_t fill = std::min(kRowBlock, inner);
    ((plan.contiguous[K] ? void() : void(std::fill_n(std::get<K>(bufs).data(), fill, std::get<K>(held)))), ...);
    A *const g = acc.data() + cur.offset[N];
    const bool g_contiguous = plan.contiguous[N];
    for (int64_t j = 0; j < inner; j += kRowBlock) {
      const int64_t len = std::min(kRowBlock, inner - j);
      const auto p = std::make_tuple((plan.contiguous[K] ? std::get<K>(ins).data + cur.offset[K] + j
                                                         : std::get<K>(bufs).data())...);
      flat_loop<C, C, MaxIsa>(vals.data(), f, p, len, ks);
      if (g_contiguous) {
        OPGEN_SIMD
        for (int64_t t = 0; t < len; ++t) g[j + t] += A(vals[static_cast<size_t>(t)]);
      } else {
        A s = 0;
        OPGEN_SIMD_SUM(s)
        for (int64_t t = 0; t < len; ++t) s += A(vals[static_cast<size_t>(t)]);
        g[0] += s;
      }
    }
  }
  for (int64_t i = 0; i < grad.numel; ++i) grad.data[i] = static_cast<OutE>(acc[static_cast<size_t>(i)]);
}
}  // namespace detail

/// dst[i] = src[i] for i in [0, n): std::copy, split over the thread pool when n is large (one
/// thread rarely reaches the memory bandwidth of a copy).
template <typename E>
void parallel_copy(const E *src, int64_t n, E *dst) {
  parallel_for(n, [&](int64_t b, int64_t e) { std::copy(src + b, src + e, dst + b); });
}


/// out[i] = f(ins[broadcast(i)]...) over out's shape (NumPy broadcasting of the inputs). MaxIsa
/// caps the vector ISA of the loop (kMemoryBoundIsa for a memory-bound f; default: the widest).
template <int MaxIsa = 2, typename OutE, typename F, typename... InE>
void map(Out<OutE> out, F &&f, In<InE>... ins) {
  detail::map_impl<MaxIsa>(out, out.shape_vector(), f, std::make_tuple(ins...), std::index_sequence_for<InE...>{});
}

/// Evaluates f over `iter_shape` (the broadcast output shape) and sums the result into
/// `grad`, whose shape broadcasts to `iter_shape`: the gradient of a broadcast input.
template <int MaxIsa = 2, typename OutE, typename F, typename... InE>
void map_reduce_to(Out<OutE> grad, const Shape &iter_shape, F &&f, In<InE>... ins) {
  detail::map_reduce_impl<MaxIsa>(grad, iter_shape, f, std::make_tuple(ins...), std::index_sequence_for<InE...>{});
}

/// Calls f(i) once for every i in [0, n), in no set order and possibly concurrently: the portable
/// loop of a kernel body (docs/kernel-api.md "On CUDA"). On the CPU, chunks of indices run on the
/// thread pool (parallel_for, a chunk worth kParallelGrain element operations, `cost` being the
/// operations of one call: a row's length when f does a row); on CUDA (opgen/cuda.h) a
/// grid-stride kernel gives each index a thread, on the current stream. f is
/// `OPGEN_LAMBDA(int64_t i) { ... }`: it captures views and sizes by value, reads any element and
/// writes only the elements index i owns. The first exception f throws is rethrown here.
template <typename F>
void for_each_index(int64_t n, F &&f, int64_t cost = 1) {
  parallel_for(n, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, cost)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

/// Scratch memory of a kernel body: `n` elements of T, freed when it goes out of scope: host memory
/// on the CPU (value-initialised); on CUDA (opgen/cuda.h) device memory from the stream-ordered
/// allocator on the current stream, for the body's own launches. For what a body cannot keep in
/// its outputs (per-row statistics that a column pass reads). Throws opgen::Error when the memory
/// cannot be had.
template <typename T>
class Workspace {
 public:
  explicit Workspace(int64_t n) {
    try {
      buf_.resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
    } catch (const std::bad_alloc &) {
      throw Error("opgen::Workspace: cannot allocate " + std::to_string(n) + " elements");
    }
  }
  T *data() { return buf_.data(); }

 private:
  std::vector<T> buf_;
};

/// After a for_each_index whose functor may call raise_in_kernel: nothing on the CPU (the error
/// was thrown at once); on CUDA, synchronises the stream and throws the first code raised
/// (opgen/cuda.h).
inline void check_device_errors() {}

#endif  // !OPGEN_DEVICE_CUDA

/// The widest ISA a memory-bound map runs in: AVX2+FMA. A loop that does a few arithmetic
/// operations per element it loads (`x + y`, `x * y`, `dout * (x > 0)`) waits on memory in
/// either copy, and its AVX-512 copy measured slower (AMD EPYC Zen 4, 4096 x 1024 float32, one
/// thread: add 1.06-1.31 of torch's add with AVX-512, 0.96-1.09 with AVX2; mul 1.06-1.22 and
/// 0.81-1.11; docs/performance.md), as detail::kRowSumIsa found for row sums. A loop that
/// computes (erf, exp, tanh...) keeps AVX-512, where gelu measured 0.91-1.04 against 1.19-1.31.
/// The generator passes it for an elementwise expression without such a function
/// (opgen.exprs.Expr.memory_bound); a kernel body may too: `opgen::map<opgen::kMemoryBoundIsa>(...)`.
/// The CUDA map (opgen/cuda.h) accepts it and ignores it.
constexpr int kMemoryBoundIsa = 1;

/// c ? a : b with both already evaluated: the `a if c else b` of elementwise expressions. A
/// loop over it vectorises to a blend (no branch to mispredict on random data). Host and device.
template <typename C>
OPGEN_HD inline C select(bool c, C a, C b) {
  return c ? a : b;
}

// ------------------------------------------------------------------------------- math
// Each function computes in compute_t of its argument type (float for half and bfloat16) and
// returns the argument type (the common type for two arguments). Every one is OPGEN_HD: CPU code
// calls std:: (libmvec in vector loops), CUDA device code CUDA's own functions (expf, exp...:
// float for float, half and bfloat16, double otherwise: detail::device_exp...).
#if defined(__CUDACC__)
namespace detail {
/// CUDA device math on a compute type K: CUDA's float function for float, its double function
/// for anything else (as std:: promotes an integer argument to double).
#define OPGEN_DEVICE_MATH1(name)                                                              \
  template <typename K>                                                                       \
  __device__ inline auto device_##name(K x) {                                                 \
    if constexpr (std::is_same_v<K, float>) {                                                 \
      return ::name##f(x);                                                                    \
    } else {                                                                                  \
      return ::name(static_cast<double>(x));                                                  \
    }                                                                                         \
  }
OPGEN_DEVICE_MATH1(exp)
OPGEN_DEVICE_MATH1(log)
OPGEN_DEVICE_MATH1(sqrt)
OPGEN_DEVICE_MATH1(tanh)
OPGEN_DEVICE_MATH1(erf)
OPGEN_DEVICE_MATH1(log1p)
OPGEN_DEVICE_MATH1(expm1)
#undef OPGEN_DEVICE_MATH1
template <typename K>
__device__ inline auto device_pow(K x, K y) {
  if constexpr (std::is_same_v<K, float>) {
    return ::powf(x, y);
  } else {
    return ::pow(static_cast<double>(x), static_cast<double>(y));
  }
}
}  // namespace detail
#endif
// std::NAME in CPU code, detail::device_NAME in CUDA device code (CPU code is unchanged).
#if defined(__CUDA_ARCH__)
#define OPGEN_MATH_(name, ...) ::opgen::detail::device_##name(__VA_ARGS__)
#else
#define OPGEN_MATH_(name, ...) std::name(__VA_ARGS__)
#endif

namespace math {
template <typename C>
OPGEN_HD C exp(C x) { return static_cast<C>(OPGEN_MATH_(exp, static_cast<compute_t<C>>(x))); }
template <typename C>
OPGEN_HD C log(C x) { return static_cast<C>(OPGEN_MATH_(log, static_cast<compute_t<C>>(x))); }
template <typename C>
OPGEN_HD C sqrt(C x) { return static_cast<C>(OPGEN_MATH_(sqrt, static_cast<compute_t<C>>(x))); }
template <typename C>
OPGEN_HD C rsqrt(C x) {
  using K = compute_t<C>;
  return static_cast<C>(K(1) / OPGEN_MATH_(sqrt, static_cast<K>(x)));
}
/// tanh in float: Eigen's `generic_fast_tanh_float` (Eigen 3.4,
/// Eigen/src/Core/MathFunctionsImpl.h, MPL-2.0): a 13/6 rational function on x clamped to
/// [-7.9988, 7.9988], evaluated as v * (p / q) so that tiny and subnormal x keep their relative
/// accuracy without Eigen's |x| < 0.0004 select (one compare-and-blend less per vector: 4% on
/// 4M floats, two threads, AVX-512). Plain arithmetic, so an OPGEN_SIMD loop vectorises it
/// without a library call: 1.6x faster than glibc's libmvec tanhf on AVX2 (4M floats, one
/// thread: 2.1 ms against 3.5 ms). MindSpore's own CPU tanh is a cheaper 7/6 Pade rational
/// (nnacl) that is 1e-4 off near |x| = 5 (1688 ulp); this one is at most 4.95 ulp (2.95e-7
/// absolute, at x = 7.17; an exhaustive check over every float with this vector loop, AVX-512
/// and FMA), +-0.99999976 at +-inf, NaN for NaN, -0 for -0.
OPGEN_HD inline float tanh_float(float x) noexcept {
  constexpr float kClamp = 7.99881172180175781f;
  const float v = x > kClamp ? kClamp : (x < -kClamp ? -kClamp : x);  // NaN stays NaN
  const float x2 = v * v;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return v * (p / q);
}
/// tanh(x) in compute_t of x: tanh_float for float, half and bfloat16; std::tanh (libmvec in
/// vector loops) for double. In CUDA device code CUDA's tanhf / tanh (at most 2 ulp).
template <typename C>
OPGEN_HD C tanh(C x) {
  using K = compute_t<C>;
#if defined(__CUDA_ARCH__)
  return static_cast<C>(detail::device_tanh(static_cast<K>(x)));
#else
  if constexpr (std::is_same_v<K, float>) {
    return static_cast<C>(tanh_float(static_cast<float>(x)));
  } else {
    return static_cast<C>(std::tanh(static_cast<K>(x)));
  }
#endif
}
template <typename C>
OPGEN_HD C sigmoid(C x) {
  using K = compute_t<C>;
  return static_cast<C>(K(1) / (K(1) + OPGEN_MATH_(exp, -static_cast<K>(x))));
}
template <typename C>
OPGEN_HD C abs(C x) {
  using K = compute_t<C>;
  const K v = static_cast<K>(x);
  return static_cast<C>(v < K(0) ? -v : v);
}
/// erf in float: the 13/8 rational function of Eigen 3.4's `generic_fast_erf_float`
/// (Eigen/src/Core/MathFunctionsImpl.h, MPL-2.0; the same coefficients as XLA's and TVM's fast
/// erf), x * P(x^2) / Q(x^2) on x clamped to [-4, 4], the result clamped to [-1, 1]. Plain
/// arithmetic, so an OPGEN_SIMD loop vectorises it without a library call (std::erf became
/// calls of glibc's libmvec `_ZGVdN8v_erff`: the exact gelu took 8x torch's, whose
/// Vectorized<float>::erf is inline arithmetic too). At most 6.5 ulp (3.9e-7 absolute, near
/// x = 3.92, where erf is within 1.3e-8 of 1) and 5.7 ulp below |x| = 3 against double erf
/// (every third float of [2^-126, 5] with this vector loop, AVX2 and FMA); tests/cpp/blocks_test.cc
/// checks it within 5e-7. +-1 at +-inf, NaN for NaN, -0 for -0.
OPGEN_HD inline float erf_float(float x) noexcept {
  const float v = x > 4.f ? 4.f : (x < -4.f ? -4.f : x);  // NaN stays NaN
  const float x2 = v * v;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  const float r = v * (p / q);
  return r > 1.f ? 1.f : (r < -1.f ? -1.f : r);  // near |x| = 4 the rational exceeds 1 by 4e-7
}
/// erf(x) in compute_t of x: erf_float for float, half and bfloat16; std::erf (libmvec in
/// vector loops, 4 ulp) for double, where a rational function of this size is not accurate. In
/// CUDA device code CUDA's erff / erf (at most 2 ulp).
template <typename C>
OPGEN_HD C erf(C x) {
  using K = compute_t<C>;
#if defined(__CUDA_ARCH__)
  return static_cast<C>(detail::device_erf(static_cast<K>(x)));
#else
  if constexpr (std::is_same_v<K, float>) {
    return static_cast<C>(erf_float(static_cast<float>(x)));
  } else {
    return static_cast<C>(std::erf(static_cast<K>(x)));
  }
#endif
}
template <typename C>
OPGEN_HD C log1p(C x) { return static_cast<C>(OPGEN_MATH_(log1p, static_cast<compute_t<C>>(x))); }
template <typename C>
OPGEN_HD C expm1(C x) { return static_cast<C>(OPGEN_MATH_(expm1, static_cast<compute_t<C>>(x))); }
template <typename C>
OPGEN_HD C sign(C x) {
  using K = compute_t<C>;
  const K v = static_cast<K>(x);
  return static_cast<C>((K(0) < v) - (v < K(0)));
}
/// a / b, the `/` of elementwise expressions. For integers it throws opgen::Error (which the op
/// reports as an exception naming it) where the hardware would raise SIGFPE and kill the
/// process: division by zero, and the minimum value divided by -1. In CUDA device code it raises
/// opgen::cuda::kIntegerDivisionByZero / kIntegerDivisionOverflow on the device error word
/// (opgen/device.h) and gives 0.
template <typename A, typename B>
OPGEN_HD auto div(A a, B b) -> decltype(a / b) {
  using R = decltype(a / b);
  if constexpr (std::is_integral_v<R>) {
#if defined(__CUDA_ARCH__)
    if (b == B(0)) {
      cuda::raise_on_device(cuda::kIntegerDivisionByZero);
      return R(0);
    }
    if constexpr (std::is_signed_v<R>) {
      constexpr R kMin = static_cast<R>(std::make_unsigned_t<R>(1) << (sizeof(R) * 8 - 1));  // numeric_limits' min
      if (R(b) == R(-1) && R(a) == kMin) {
        cuda::raise_on_device(cuda::kIntegerDivisionOverflow);
        return R(0);
      }
    }
#else
    if (b == B(0)) throw Error("integer division by zero");
    if constexpr (std::is_signed_v<R>) {
      if (R(b) == R(-1) && R(a) == std::numeric_limits<R>::min()) throw Error("integer division overflows");
    }
#endif
  }
  return a / b;
}
template <typename A, typename B>
OPGEN_HD auto maximum(A a, B b) -> std::common_type_t<A, B> {
  using R = std::common_type_t<A, B>;
  using K = compute_t<R>;
  const K x = static_cast<K>(static_cast<R>(a)), y = static_cast<K>(static_cast<R>(b));
  return static_cast<R>(x > y ? x : y);
}
template <typename A, typename B>
OPGEN_HD auto minimum(A a, B b) -> std::common_type_t<A, B> {
  using R = std::common_type_t<A, B>;
  using K = compute_t<R>;
  const K x = static_cast<K>(static_cast<R>(a)), y = static_cast<K>(static_cast<R>(b));
  return static_cast<R>(x < y ? x : y);
}
template <typename A, typename B>
OPGEN_HD auto pow(A a, B b) -> std::common_type_t<A, B> {
  using R = std::common_type_t<A, B>;
  using K = compute_t<R>;
  return static_cast<R>(OPGEN_MATH_(pow, static_cast<K>(static_cast<R>(a)), static_cast<K>(static_cast<R>(b))));
}
}  // namespace math
#undef OPGEN_MATH_

}  // namespace opgen

#if defined(OPGEN_DEVICE_CUDA)
// The CUDA building blocks (map, map_reduce_to, reductions) in place of the CPU ones; reduce.h's
// host helpers (AxisSplit, split_reduction, sum_t) as on the CPU.
#include "opgen/reduce.h"
#include "opgen/cuda.h"
#else
// The building blocks over whole rows and matrices, on top of the above.
#include "opgen/blas.h"    // opgen::gemm
#include "opgen/reduce.h"  // opgen::reduce_axes, softmax_rows...
#endif

#endif  // OPGEN_KERNEL_H_
