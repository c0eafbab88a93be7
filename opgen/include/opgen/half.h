// opgen 16-bit floating-point element types: opgen::half (IEEE 754 binary16, MindSpore
// float16, numpy float16) and opgen::bfloat16 (MindSpore bfloat16: the top 16 bits of a
// float32). Both are 2-byte, trivially copyable wrappers of their bit pattern, so a tensor's
// data pointer can be viewed as `half *` / `bfloat16 *` directly.
//
// Arithmetic is computed in float (opgen::compute_t<half> == float): `a * b` on two halves
// gives the exact float product, rounded only when stored back into a half. Mixed operands
// follow the usual promotions of the compute type (half + double is a double). Conversions
// into half / bfloat16 round to nearest, ties to even, from float, double and integers alike
// (doubles are rounded once, not via float); overflow gives +-inf, NaN stays NaN (quiet), and
// half's subnormals are kept. std::numeric_limits, std::common_type and std::isnan/isinf work.
//
// Shipped with opgen (not generated). Framework-free.
#ifndef OPGEN_HALF_H_
#define OPGEN_HALF_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "opgen/device.h"

namespace opgen {

namespace detail {

OPGEN_HD inline uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

OPGEN_HD inline float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// The conversions are branch-free on the CPU (every case computed, then selected), so that a
// loop over 16-bit elements vectorises: with the branchy forms an add of two 4M-element half arrays
// took 14.9 ms (AVX2 copy, one thread, CPU time), 4.5 ms now with the bits stored directly (see
// operator= below; float32: 2.1 ms). Both directions were checked against the branchy forms on
// every float and every half bit pattern. Device code uses the hardware conversions.

/// float -> binary16 bits, round to nearest even; inf/NaN kept (NaN made quiet; in device code
/// the hardware conversion, whose NaN is the canonical 0x7FFF).
OPGEN_HD inline uint16_t f32_to_f16_bits(float f) {
#if defined(__CUDA_ARCH__)
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  const uint32_t nan = 0x7E00u | ((ax >> 13) & 0x3FFu);
  // normal halves: rebias the exponent from 127 to 15 and round the 13 dropped bits to nearest
  // even (a carry runs into the exponent, and from the largest half into inf, correctly)
  const uint32_t normal = (ax - 0x38000000u + 0xFFFu + ((ax >> 13) & 1u)) >> 13;
  // below 2^-14 (subnormal halves): |f| + 0.5 in float rounds |f| to a multiple of 2^-24, to
  // nearest even, in the low bits of 0.5's significand
  const uint32_t sub = f32_bits(f32_from_bits(ax) + 0.5f) - 0x3F000000u;
  uint32_t r = ax < 0x38800000u ? sub : normal;
  r = ax >= 0x477FF000u ? 0x7C00u : r;  // >= 65520: rounds to inf
  r = ax > 0x7F800000u ? nan : r;
  return static_cast<uint16_t>(r | sign);
#endif
}

/// binary16 bits -> float (exact).
OPGEN_HD inline float f16_bits_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<unsigned short>(h)));
  return f;
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = static_cast<uint32_t>(h & 0x7FFFu);
  const uint32_t normal = (em << 13) + ((127u - 15u) << 23);  // rebias the exponent from 15 to 127
  const uint32_t infnan = (em << 13) | 0x7F800000u;
  // subnormal m * 2^-24: (1 + m / 2^10) * 2^-14 - 2^-14, exact in float
  const uint32_t sub = f32_bits(f32_from_bits((113u << 23) + (em << 13)) - f32_from_bits(113u << 23));
  const uint32_t r = em >= 0x7C00u ? infnan : (em >= 0x0400u ? normal : sub);
  return f32_from_bits(r | sign);
#endif
}

/// float -> bfloat16 bits, round to nearest even; NaN kept (made quiet; in device code for
/// sm_80 and later the hardware conversion, whose NaN is the canonical 0x7FFF).
OPGEN_HD inline uint16_t f32_to_bf16_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  const uint32_t x = f32_bits(f);
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);  // a select, not a branch
#endif
}

/// bfloat16 bits -> float (exact).
OPGEN_HD inline float bf16_bits_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

/// double -> float rounded to odd: the nearest float toward zero, with its last bit set when
/// inexact. Rounding that float to a type with at most 22 significand bits (half, bfloat16)
/// gives the correctly rounded result of the double (no double rounding).
OPGEN_HD inline float f64_to_f32_round_odd(double d) {
#if defined(__CUDA_ARCH__)
  const float z = __double2float_rz(d);  // toward zero (+-FLT_MAX beyond it; inf and NaN kept)
  if (d != d || static_cast<double>(z) == d) return z;
  return f32_from_bits(f32_bits(z) | 1u);
#else
  const float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  uint32_t u = f32_bits(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --u;  // rounded away from zero: step back
  return f32_from_bits(u | 1u);
#endif
}

/// The float a value goes through on its way to a 16-bit float.
template <typename T>
OPGEN_HD inline float to_f32_for_narrowing(T v) {
  if constexpr (std::is_same<T, float>::value) {
    return v;
  } else if constexpr (std::is_integral<T>::value && sizeof(T) <= 2) {
    return static_cast<float>(v);  // exact
  } else {
    return f64_to_f32_round_odd(static_cast<double>(v));
  }
}

struct from_bits_t {};

}  // namespace detail

/// IEEE 754 binary16 (MindSpore float16, numpy float16). Computes in float.
struct half {
  uint16_t bits;

  half() = default;  // uninitialised, like float
  /// Rounds `v` (any arithmetic type) to the nearest half, ties to even.
  template <typename T, std::enable_if_t<std::is_arithmetic<T>::value, int> = 0>
  OPGEN_HD half(T v) : bits(detail::f32_to_f16_bits(detail::to_f32_for_narrowing(v))) {}  // NOLINT: implicit
  OPGEN_HD constexpr half(uint16_t b, detail::from_bits_t) : bits(b) {}

  /// Assigns `v` (any arithmetic type), rounded as the constructor rounds it. `q[j] = expr;` in a
  /// vector loop stores the bits directly; `q[j] = half(expr);` copies a temporary, which GCC's
  /// `omp simd` loops (OPGEN_SIMD) do not vectorise.
  template <typename T, std::enable_if_t<std::is_arithmetic<T>::value, int> = 0>
  half &operator=(T v) {
    bits = detail::f32_to_f16_bits(detail::to_f32_for_narrowing(v));
    return *this;
  }
  /// The half with bit pattern `b`.
  OPGEN_HD static constexpr half from_bits(uint16_t b) { return half(b, detail::from_bits_t{}); }
  /// Exact value as float.
  OPGEN_HD operator float() const { return detail::f16_bits_to_f32(bits); }  // NOLINT: implicit
};

/// bfloat16: sign, 8 exponent bits, 7 significand bits (float32's top half). Computes in float.
struct bfloat16 {
  uint16_t bits;

  bfloat16() = default;  // uninitialised, like float
  /// Rounds `v` (any arithmetic type) to the nearest bfloat16, ties to even.
  template <typename T, std::enable_if_t<std::is_arithmetic<T>::value, int> = 0>
  OPGEN_HD bfloat16(T v) : bits(detail::f32_to_bf16_bits(detail::to_f32_for_narrowing(v))) {}  // NOLINT: implicit
  OPGEN_HD constexpr bfloat16(uint16_t b, detail::from_bits_t) : bits(b) {}
  /// half -> bfloat16 (through its exact float value).
  OPGEN_HD explicit bfloat16(half h) : bfloat16(static_cast<float>(h)) {}

  /// Assigns `v` (any arithmetic type), rounded as the constructor rounds it. `q[j] = expr;` in a
  /// vector loop stores the bits directly; `q[j] = bfloat16(expr);` copies a temporary, which GCC's
  /// `omp simd` loops (OPGEN_SIMD) do not vectorise.
  template <typename T, std::enable_if_t<std::is_arithmetic<T>::value, int> = 0>
  bfloat16 &operator=(T v) {
    bits = detail::f32_to_bf16_bits(detail::to_f32_for_narrowing(v));
    return *this;
  }
  /// The bfloat16 with bit pattern `b`.
  OPGEN_HD static constexpr bfloat16 from_bits(uint16_t b) { return bfloat16(b, detail::from_bits_t{}); }
  /// Exact value as float.
  OPGEN_HD operator float() const { return detail::bf16_bits_to_f32(bits); }  // NOLINT: implicit
};

static_assert(sizeof(half) == 2 && alignof(half) == 2, "half must be 2 bytes");
static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2, "bfloat16 must be 2 bytes");
static_assert(std::is_trivially_copyable<half>::value && std::is_trivially_copyable<bfloat16>::value,
              "16-bit floats must be trivially copyable");

/// True for opgen::half and opgen::bfloat16.
template <typename T>
struct is_low_float : std::false_type {};
template <>
struct is_low_float<half> : std::true_type {};
template <>
struct is_low_float<bfloat16> : std::true_type {};

namespace detail {
template <typename T>
struct promote_low {
  using type = T;
};
template <>
struct promote_low<half> {
  using type = float;
};
template <>
struct promote_low<bfloat16> {
  using type = float;
};
template <typename T>
using promote_low_t = typename promote_low<std::decay_t<T>>::type;

template <typename T>
constexpr bool is_operand_v = std::is_arithmetic<std::decay_t<T>>::value || is_low_float<std::decay_t<T>>::value;

/// Enabled when one operand is a 16-bit float and the other one a 16-bit float or a number.
template <typename A, typename B>
using enable_low_op_t = std::enable_if_t<
    (is_low_float<std::decay_t<A>>::value || is_low_float<std::decay_t<B>>::value) && is_operand_v<A> && is_operand_v<B>,
    int>;
}  // namespace detail

// Binary arithmetic and comparisons: computed on the operands' compute types.
#define OPGEN_LOW_FLOAT_BINARY_OP(op)                                                       \
  template <typename A, typename B, detail::enable_low_op_t<A, B> = 0>                      \
  OPGEN_HD inline auto operator op(A a, B b) {                                                       \
    return static_cast<detail::promote_low_t<A>>(a) op static_cast<detail::promote_low_t<B>>(b); \
  }
OPGEN_LOW_FLOAT_BINARY_OP(+)
OPGEN_LOW_FLOAT_BINARY_OP(-)
OPGEN_LOW_FLOAT_BINARY_OP(*)
OPGEN_LOW_FLOAT_BINARY_OP(/)
OPGEN_LOW_FLOAT_BINARY_OP(==)
OPGEN_LOW_FLOAT_BINARY_OP(!=)
OPGEN_LOW_FLOAT_BINARY_OP(<)
OPGEN_LOW_FLOAT_BINARY_OP(<=)
OPGEN_LOW_FLOAT_BINARY_OP(>)
OPGEN_LOW_FLOAT_BINARY_OP(>=)
#undef OPGEN_LOW_FLOAT_BINARY_OP

/// Negation flips the sign bit (exact).
OPGEN_HD inline half operator-(half h) { return half::from_bits(static_cast<uint16_t>(h.bits ^ 0x8000u)); }
OPGEN_HD inline bfloat16 operator-(bfloat16 h) { return bfloat16::from_bits(static_cast<uint16_t>(h.bits ^ 0x8000u)); }
/// Unary plus gives the compute value.
OPGEN_HD inline float operator+(half h) { return static_cast<float>(h); }
OPGEN_HD inline float operator+(bfloat16 h) { return static_cast<float>(h); }

// Compound assignment: computed in the compute type, rounded once into the left operand.
#define OPGEN_LOW_FLOAT_COMPOUND_OP(T, op)                                          \
  template <typename B, std::enable_if_t<detail::is_operand_v<B>, int> = 0>         \
  OPGEN_HD inline T &operator op##=(T &a, B b) {                                             \
    a = T(static_cast<float>(a) op static_cast<detail::promote_low_t<B>>(b));      \
    return a;                                                                       \
  }
OPGEN_LOW_FLOAT_COMPOUND_OP(half, +)
OPGEN_LOW_FLOAT_COMPOUND_OP(half, -)
OPGEN_LOW_FLOAT_COMPOUND_OP(half, *)
OPGEN_LOW_FLOAT_COMPOUND_OP(half, /)
OPGEN_LOW_FLOAT_COMPOUND_OP(bfloat16, +)
OPGEN_LOW_FLOAT_COMPOUND_OP(bfloat16, -)
OPGEN_LOW_FLOAT_COMPOUND_OP(bfloat16, *)
OPGEN_LOW_FLOAT_COMPOUND_OP(bfloat16, /)
#undef OPGEN_LOW_FLOAT_COMPOUND_OP

namespace detail {
/// std::common_type of a 16-bit float and T (no `type` when T is not a number).
template <typename Low, typename T, typename = void>
struct common_with_low {};
template <typename Low, typename T>
struct common_with_low<Low, T, std::enable_if_t<is_operand_v<T>>> {
  using type = std::conditional_t<std::is_same<std::decay_t<T>, Low>::value, Low,
                                  std::common_type_t<float, promote_low_t<T>>>;
};
}  // namespace detail

}  // namespace opgen

namespace std {

template <typename T>
struct common_type<opgen::half, T> : opgen::detail::common_with_low<opgen::half, T> {};
template <typename T>
struct common_type<T, opgen::half> : opgen::detail::common_with_low<opgen::half, T> {};
template <>
struct common_type<opgen::half, opgen::half> {
  using type = opgen::half;
};
template <typename T>
struct common_type<opgen::bfloat16, T> : opgen::detail::common_with_low<opgen::bfloat16, T> {};
template <typename T>
struct common_type<T, opgen::bfloat16> : opgen::detail::common_with_low<opgen::bfloat16, T> {};
template <>
struct common_type<opgen::bfloat16, opgen::bfloat16> {
  using type = opgen::bfloat16;
};
template <>
struct common_type<opgen::half, opgen::bfloat16> {
  using type = float;
};
template <>
struct common_type<opgen::bfloat16, opgen::half> {
  using type = float;
};

template <>
class numeric_limits<opgen::half> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  OPGEN_HD static constexpr opgen::half min() noexcept { return opgen::half::from_bits(0x0400); }
  OPGEN_HD static constexpr opgen::half lowest() noexcept { return opgen::half::from_bits(0xFBFF); }
  OPGEN_HD static constexpr opgen::half max() noexcept { return opgen::half::from_bits(0x7BFF); }
  OPGEN_HD static constexpr opgen::half epsilon() noexcept { return opgen::half::from_bits(0x1400); }
  OPGEN_HD static constexpr opgen::half round_error() noexcept { return opgen::half::from_bits(0x3800); }
  OPGEN_HD static constexpr opgen::half infinity() noexcept { return opgen::half::from_bits(0x7C00); }
  OPGEN_HD static constexpr opgen::half quiet_NaN() noexcept { return opgen::half::from_bits(0x7E00); }
  OPGEN_HD static constexpr opgen::half signaling_NaN() noexcept { return opgen::half::from_bits(0x7D00); }
  OPGEN_HD static constexpr opgen::half denorm_min() noexcept { return opgen::half::from_bits(0x0001); }
};

template <>
class numeric_limits<opgen::bfloat16> {
 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  OPGEN_HD static constexpr opgen::bfloat16 min() noexcept { return opgen::bfloat16::from_bits(0x0080); }
  OPGEN_HD static constexpr opgen::bfloat16 lowest() noexcept { return opgen::bfloat16::from_bits(0xFF7F); }
  OPGEN_HD static constexpr opgen::bfloat16 max() noexcept { return opgen::bfloat16::from_bits(0x7F7F); }
  OPGEN_HD static constexpr opgen::bfloat16 epsilon() noexcept { return opgen::bfloat16::from_bits(0x3C00); }
  OPGEN_HD static constexpr opgen::bfloat16 round_error() noexcept { return opgen::bfloat16::from_bits(0x3F00); }
  OPGEN_HD static constexpr opgen::bfloat16 infinity() noexcept { return opgen::bfloat16::from_bits(0x7F80); }
  OPGEN_HD static constexpr opgen::bfloat16 quiet_NaN() noexcept { return opgen::bfloat16::from_bits(0x7FC0); }
  OPGEN_HD static constexpr opgen::bfloat16 signaling_NaN() noexcept { return opgen::bfloat16::from_bits(0x7F81); }
  OPGEN_HD static constexpr opgen::bfloat16 denorm_min() noexcept { return opgen::bfloat16::from_bits(0x0001); }
};

}  // namespace std

#endif  // OPGEN_HALF_H_
