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
#include <cmath>
#include <cstdint>
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
#include "opgen/parallel.h"

namespace opgen {

using Shape = std::vector<int64_t>;

/// A user-facing kernel error (bad shape, index out of range...). The aot entry points turn it
/// into a non-zero return code; the Function<T> path into a Python ValueError.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

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

/// The next name in OPGEN_NAME_VIEWS's argument text (a string literal: it outlives the views).
inline const char *next_name(const char **names) {
  const char *p = *names;
  while (*p == ' ' || *p == ',') ++p;
  const char *e = p;
  while (*e && *e != ',') ++e;
  *names = e;
  return p;
}
template <typename V>
auto name_one(const V &v, const char *name, int) -> decltype(v.items, void()) {
  for (size_t k = 0; k < v.items.size(); ++k) {
    v.items[k].name = name;
    v.items[k].item = static_cast<int64_t>(k);
  }
}
template <typename V>
void name_one(const V &v, const char *name, long) {
  v.name = name;
}
template <typename... V>
void name_views(const char *names, const V &...views) {
  (name_one(views, next_name(&names), 0), ...);
}
#endif
}  // namespace detail

#ifdef OPGEN_CHECKED
#define OPGEN_NAME_VIEWS(...) ::opgen::detail::name_views(#__VA_ARGS__, __VA_ARGS__)
#else
#define OPGEN_NAME_VIEWS(...) ((void)0)
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
  T &operator[](int64_t i) const {
    if (i < 0 || i >= numel) detail::out_of_bounds(name, item, "index", i, numel, "elements");
    return data[i];
  }
#else
  /// Size of dimension `i`; negative `i` counts from the end.
  int64_t dim(int i) const { return shape[i < 0 ? i + ndim : i]; }
  T &operator[](int64_t i) const { return data[i]; }
#endif
  explicit operator bool() const { return data != nullptr; }
  Shape shape_vector() const { return Shape(shape, shape + ndim); }
};

template <typename E>
using In = View<const E>;
template <typename E>
using Out = View<E>;

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
inline Shape broadcast_shape(std::initializer_list<Shape> shapes) {
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

#if defined(__clang__)
#define OPGEN_VECTORIZE_LOOP _Pragma("clang loop vectorize(enable)")
#elif defined(__GNUC__)
#define OPGEN_VECTORIZE_LOOP _Pragma("GCC ivdep")
#else
#define OPGEN_VECTORIZE_LOOP
#endif

namespace detail {
/// Elements per block of the flat loop: a fixed trip count the compiler vectorises even at -O2
/// (CustomOpBuilder's level, whose cheap cost model skips loops that need a scalar epilogue).
constexpr int64_t kVectorBlock = 16;

/// o[i] = f(p[i]...) for i in [b, e): fixed-size blocks, then the tail. Outputs never overlap
/// inputs except element by element (o == p allowed), so the blocks carry no dependence.
template <typename OutE, typename C, typename F, typename Ptrs, size_t... K>
inline void flat_range(OutE *o, F &f, const Ptrs &p, int64_t b, int64_t e, std::index_sequence<K...>) {
  int64_t i = b;
  for (; i + kVectorBlock <= e; i += kVectorBlock) {
    OPGEN_VECTORIZE_LOOP
    for (int64_t k = 0; k < kVectorBlock; ++k) o[i + k] = static_cast<OutE>(f(static_cast<C>(std::get<K>(p)[i + k])...));
  }
  for (; i < e; ++i) o[i] = static_cast<OutE>(f(static_cast<C>(std::get<K>(p)[i])...));
}

template <typename OutE, typename F, typename Tuple, size_t... K>
void map_impl(Out<OutE> out, const Shape &iter_shape, F &f, const Tuple &ins, std::index_sequence<K...>) {
  // f sees every element in the common compute type (float inputs of a bool output stay float)
  using C = common_compute_t<OutE, std::remove_pointer_t<decltype(std::get<K>(ins).data)>...>;
  constexpr size_t N = sizeof...(K);
  const bool flat = ((std::get<K>(ins).numel == out.numel && same_shape(std::get<K>(ins), out)) && ... && true);
  if (flat) {
    OutE *const o = out.data;
    const auto ptrs = std::make_tuple(std::get<K>(ins).data...);
    parallel_for(out.numel, [&](int64_t b, int64_t e) { flat_range<OutE, C>(o, f, ptrs, b, e, std::index_sequence<K...>{}); });
    return;
  }
  std::vector<Shape> strides{broadcast_strides(iter_shape, std::get<K>(ins).shape, std::get<K>(ins).ndim)...};
  parallel_for(out.numel, [&](int64_t b, int64_t e) {
    BroadcastCursor<N> cur(iter_shape, strides);
    cur.seek(b);
    for (int64_t i = b; i < e; ++i) {
      out.data[i] = static_cast<OutE>(f(static_cast<C>(std::get<K>(ins).data[cur.offset[K]])...));
      cur.next();
    }
  });
}

template <typename OutE, typename F, typename Tuple, size_t... K>
void map_reduce_impl(Out<OutE> grad, const Shape &iter_shape, F &f, const Tuple &ins, std::index_sequence<K...>) {
  using C = common_compute_t<OutE, std::remove_pointer_t<decltype(std::get<K>(ins).data)>...>;
  constexpr size_t N = sizeof...(K);
  int64_t total = numel_of(iter_shape.data(), static_cast<int>(iter_shape.size()));
  const bool same = static_cast<size_t>(grad.ndim) == iter_shape.size() &&
                    std::equal(grad.shape, grad.shape + grad.ndim, iter_shape.begin());
  std::vector<Shape> strides{broadcast_strides(iter_shape, std::get<K>(ins).shape, std::get<K>(ins).ndim)...};
  if (same) {
    parallel_for(total, [&](int64_t b, int64_t e) {
      BroadcastCursor<N> cur(iter_shape, strides);
      cur.seek(b);
      for (int64_t i = b; i < e; ++i) {
        grad.data[i] = static_cast<OutE>(f(static_cast<C>(std::get<K>(ins).data[cur.offset[K]])...));
        cur.next();
      }
    });
    return;
  }
  // Reduce to the (broadcast) shape of the input: accumulate in the compute type.
  Shape gstrides = broadcast_strides(iter_shape, grad.shape, grad.ndim);
  std::vector<C> acc(static_cast<size_t>(grad.numel), C(0));
  BroadcastCursor<N> cur(iter_shape, strides);
  BroadcastCursor<1> gcur(iter_shape, {gstrides});
  cur.seek(0);
  gcur.seek(0);
  for (int64_t i = 0; i < total; ++i) {
    acc[static_cast<size_t>(gcur.offset[0])] += f(static_cast<C>(std::get<K>(ins).data[cur.offset[K]])...);
    cur.next();
    gcur.next();
  }
  for (int64_t i = 0; i < grad.numel; ++i) grad.data[i] = static_cast<OutE>(acc[static_cast<size_t>(i)]);
}
}  // namespace detail

/// out[i] = f(ins[broadcast(i)]...) over out's shape (NumPy broadcasting of the inputs).
template <typename OutE, typename F, typename... InE>
void map(Out<OutE> out, F &&f, In<InE>... ins) {
  detail::map_impl(out, out.shape_vector(), f, std::make_tuple(ins...), std::index_sequence_for<InE...>{});
}

/// Evaluates f over `iter_shape` (the broadcast output shape) and sums the result into
/// `grad`, whose shape broadcasts to `iter_shape`: the gradient of a broadcast input.
template <typename OutE, typename F, typename... InE>
void map_reduce_to(Out<OutE> grad, const Shape &iter_shape, F &&f, In<InE>... ins) {
  detail::map_reduce_impl(grad, iter_shape, f, std::make_tuple(ins...), std::index_sequence_for<InE...>{});
}

// ------------------------------------------------------------------------------- math
// Each function computes in compute_t of its argument type (float for half and bfloat16) and
// returns the argument type (the common type for two arguments).
namespace math {
template <typename C>
C exp(C x) { return static_cast<C>(std::exp(static_cast<compute_t<C>>(x))); }
template <typename C>
C log(C x) { return static_cast<C>(std::log(static_cast<compute_t<C>>(x))); }
template <typename C>
C sqrt(C x) { return static_cast<C>(std::sqrt(static_cast<compute_t<C>>(x))); }
template <typename C>
C rsqrt(C x) {
  using K = compute_t<C>;
  return static_cast<C>(K(1) / std::sqrt(static_cast<K>(x)));
}
template <typename C>
C tanh(C x) { return static_cast<C>(std::tanh(static_cast<compute_t<C>>(x))); }
template <typename C>
C sigmoid(C x) {
  using K = compute_t<C>;
  return static_cast<C>(K(1) / (K(1) + std::exp(-static_cast<K>(x))));
}
template <typename C>
C abs(C x) {
  using K = compute_t<C>;
  const K v = static_cast<K>(x);
  return static_cast<C>(v < K(0) ? -v : v);
}
template <typename C>
C erf(C x) { return static_cast<C>(std::erf(static_cast<compute_t<C>>(x))); }
template <typename C>
C log1p(C x) { return static_cast<C>(std::log1p(static_cast<compute_t<C>>(x))); }
template <typename C>
C expm1(C x) { return static_cast<C>(std::expm1(static_cast<compute_t<C>>(x))); }
template <typename C>
C sign(C x) {
  using K = compute_t<C>;
  const K v = static_cast<K>(x);
  return static_cast<C>((K(0) < v) - (v < K(0)));
}
/// a / b, the `/` of elementwise expressions. For integers it throws opgen::Error (which the op
/// reports as an exception naming it) where the hardware would raise SIGFPE and kill the
/// process: division by zero, and the minimum value divided by -1.
template <typename A, typename B>
auto div(A a, B b) -> decltype(a / b) {
  using R = decltype(a / b);
  if constexpr (std::is_integral_v<R>) {
    if (b == B(0)) throw Error("integer division by zero");
    if constexpr (std::is_signed_v<R>) {
      if (R(b) == R(-1) && R(a) == std::numeric_limits<R>::min()) throw Error("integer division overflows");
    }
  }
  return a / b;
}
template <typename A, typename B>
auto maximum(A a, B b) -> std::common_type_t<A, B> {
  using R = std::common_type_t<A, B>;
  using K = compute_t<R>;
  const K x = static_cast<K>(static_cast<R>(a)), y = static_cast<K>(static_cast<R>(b));
  return static_cast<R>(x > y ? x : y);
}
template <typename A, typename B>
auto minimum(A a, B b) -> std::common_type_t<A, B> {
  using R = std::common_type_t<A, B>;
  using K = compute_t<R>;
  const K x = static_cast<K>(static_cast<R>(a)), y = static_cast<K>(static_cast<R>(b));
  return static_cast<R>(x < y ? x : y);
}
template <typename A, typename B>
auto pow(A a, B b) -> std::common_type_t<A, B> {
  using R = std::common_type_t<A, B>;
  using K = compute_t<R>;
  return static_cast<R>(std::pow(static_cast<K>(static_cast<R>(a)), static_cast<K>(static_cast<R>(b))));
}
}  // namespace math

}  // namespace opgen

#endif  // OPGEN_KERNEL_H_
