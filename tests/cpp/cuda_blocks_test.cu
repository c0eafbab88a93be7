// Test program for opgen's kernel layer on CUDA (opgen/cuda.h: map, map_reduce_to, reduce_sum,
// reduce_max, softmax, softmax_backward; opgen/device.h, the OPGEN_HD
// scalars of opgen/half.h and opgen/kernel.h), run by tests/test_cuda_kernel_layer.py on a
// machine with an NVIDIA GPU (compiled, not run, elsewhere).
//
// Each check runs a block on the GPU with a `[=] __host__ __device__` lambda, the spelling the
// generator emits for CUDA, and compares it with the same lambda evaluated on the host over the
// same broadcast (opgen::BroadcastCursor) with float sums accumulated in double: the scalar code
// is the CPU's (std:: math on the host, CUDA's math on the device). Prints one line per failed
// check and a summary; exits non-zero when a check failed.
//
//   nvcc -std=c++17 --extended-lambda -arch=sm_80 -I opgen/include tests/cpp/cuda_blocks_test.cu
//   (add -DOPGEN_CUBLAS -lcublas to test opgen::gemm on cuBLAS)
#define OPGEN_DEVICE_CUDA 1
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>
#include <limits>
#include <string>
#include <vector>

#include "opgen/kernel.h"

namespace cbt {
using opgen::bfloat16;
using opgen::half;  // hides CUDA's global `half` (cuda_fp16.h, which cublas_v2.h includes)
using opgen::Shape;

int g_checks = 0;
int g_failed = 0;

void expect(bool ok, const std::string &what) {
  ++g_checks;
  if (!ok) {
    ++g_failed;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

void cuda_ok(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::printf("CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/// A device copy of a host array, with its shape.
template <typename T>
struct Dev {
  Shape shape;
  T *ptr = nullptr;
  int64_t n = 0;
  /// Zeros.
  explicit Dev(const Shape &s) : shape(s), n(numel(s)) {
    cuda_ok(cudaMalloc(&ptr, sizeof(T) * static_cast<size_t>(n > 0 ? n : 1)), "cudaMalloc");
    cuda_ok(cudaMemset(ptr, 0, sizeof(T) * static_cast<size_t>(n > 0 ? n : 1)), "cudaMemset");
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  Dev(const Shape &s, const std::vector<T> &host) : Dev(s) {
    if (n > 0) cuda_ok(cudaMemcpy(ptr, host.data(), sizeof(T) * n, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // before a launch on another stream
  }
  ~Dev() { cudaFree(ptr); }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;
  /// The values, after every launch so far (T != bool).
  std::vector<T> host() const {
    std::vector<T> h(static_cast<size_t>(n));
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (n > 0) cuda_ok(cudaMemcpy(h.data(), ptr, sizeof(T) * n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return h;
  }
  /// The bytes of a bool array.
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> h(static_cast<size_t>(n) * sizeof(T));
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (n > 0) cuda_ok(cudaMemcpy(h.data(), ptr, sizeof(T) * n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return h;
  }
  opgen::In<T> in() const { return opgen::make_view<const T>(ptr, shape.data(), static_cast<int>(shape.size())); }
  opgen::Out<T> out() const { return opgen::make_view<T>(ptr, shape.data(), static_cast<int>(shape.size())); }
};

/// Deterministic values in [lo, hi).
template <typename T>
std::vector<T> values(int64_t n, double lo, double hi, unsigned seed) {
  std::vector<T> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto &x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<T>(lo + (hi - lo) * (s >> 8) / double(1 << 24));
  }
  return v;
}

double as_double(double v) { return v; }
double as_double(float v) { return v; }
double as_double(half v) { return static_cast<float>(v); }
double as_double(bfloat16 v) { return static_cast<float>(v); }
template <typename T>
double as_double(T v) {
  return static_cast<double>(v);
}

bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

/// f(h_0[off[0]], h_1[off[1]], ...) with every element in C.
template <typename C, typename F, typename Tup, size_t... K>
auto call_ref(const F &f, const Tup &hosts, const int64_t *off, std::index_sequence<K...>) {
  return f(static_cast<C>(std::get<K>(hosts)[static_cast<size_t>(off[K])])...);
}

/// The host reference of map: out[i] = f(ins[broadcast(i)]...) with the same lambda.
template <typename OutE, typename C, typename F, typename... InE>
std::vector<OutE> ref_map(const Shape &shape, F f, const Dev<InE> &...ins) {
  const auto hosts = std::make_tuple(ins.host()...);
  std::vector<Shape> strides{opgen::broadcast_strides(shape, ins.shape.data(), static_cast<int>(ins.shape.size()))...};
  opgen::BroadcastCursor<sizeof...(InE)> cur(shape, strides);
  const int64_t n = numel(shape);
  std::vector<OutE> out(static_cast<size_t>(n));
  cur.seek(0);
  for (int64_t i = 0; i < n; ++i, cur.next())
    out[static_cast<size_t>(i)] = static_cast<OutE>(call_ref<C>(f, hosts, cur.offset, std::index_sequence_for<InE...>{}));
  return out;
}

/// The host reference of map_reduce_to: sums in double.
template <typename C, typename F, typename... InE>
std::vector<double> ref_reduce(const Shape &iter, const Shape &gshape, F f, const Dev<InE> &...ins) {
  const auto hosts = std::make_tuple(ins.host()...);
  std::vector<Shape> strides{opgen::broadcast_strides(iter, ins.shape.data(), static_cast<int>(ins.shape.size()))...,
                             opgen::broadcast_strides(iter, gshape.data(), static_cast<int>(gshape.size()))};
  opgen::BroadcastCursor<sizeof...(InE) + 1> cur(iter, strides);
  std::vector<double> acc(static_cast<size_t>(numel(gshape)), 0.0);
  const int64_t n = numel(iter);
  cur.seek(0);
  for (int64_t i = 0; i < n; ++i, cur.next())
    acc[static_cast<size_t>(cur.offset[sizeof...(InE)])] +=
        as_double(call_ref<C>(f, hosts, cur.offset, std::index_sequence_for<InE...>{}));
  return acc;
}

template <typename T>
void compare(const std::string &what, const std::vector<T> &got, const std::vector<T> &want, double rtol, double atol) {
  bool ok = got.size() == want.size();
  size_t bad = 0;
  for (size_t i = 0; ok && i < got.size(); ++i) {
    if (!close(as_double(got[i]), as_double(want[i]), rtol, atol)) {
      ok = false;
      bad = i;
    }
  }
  if (!ok && got.size() == want.size()) {
    expect(false, what + ": element " + std::to_string(bad) + " is " + std::to_string(as_double(got[bad])) +
                      ", expected " + std::to_string(as_double(want[bad])));
  } else {
    expect(ok, what + (ok ? "" : ": sizes differ"));
  }
}

// ----------------------------------------------------------------------------- map

template <typename E>
void test_map_contiguous(const char *name, double rtol) {
  using C = opgen::common_compute_t<E, E>;
  for (int64_t n : {1, 3, 4, 5, 1000, 4099, 1 << 20}) {
    const Shape s{n};
    Dev<E> x(s, values<E>(n, -3, 3, 1)), y(s, values<E>(n, 0.5, 2, 2)), out(s);
    const auto f = [=] __host__ __device__(C a, C b) -> C {
      return opgen::select(a > C(0), a * b, opgen::math::exp(a) - C(1)) / b;
    };
    opgen::map(out.out(), f, x.in(), y.in());
    compare(std::string("map contiguous ") + name + " n=" + std::to_string(n), out.host(), ref_map<E, C>(s, f, x, y),
            rtol, 1e-6);
  }
  // a misaligned view (one element in): the scalar loop
  const int64_t n = 1001;
  Dev<E> x(Shape{n + 1}, values<E>(n + 1, -3, 3, 3)), out(Shape{n + 1});
  const Shape s{n};
  const auto xi = opgen::make_view<const E>(x.ptr + 1, s.data(), 1);
  const auto oi = opgen::make_view<E>(out.ptr + 1, s.data(), 1);
  const auto f = [=] __host__ __device__(C a) -> C { return a * C(2) + C(1); };
  opgen::map(oi, f, xi);
  const auto got = out.host();
  const auto xh = x.host();
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok = ok && as_double(got[i + 1]) == as_double(E(f(C(xh[i + 1]))));
  expect(ok, std::string("map on a misaligned view ") + name);
}

void test_map_broadcast() {
  using C = float;
  const auto f = [=] __host__ __device__(C a, C b, C c) -> C { return a * b + opgen::math::tanh(c); };
  const std::vector<std::vector<Shape>> cases = {
      {Shape{4, 3, 5}, Shape{4, 1, 5}, Shape{3, 1}, Shape{5}},  // middle and leading broadcast
      {Shape{64, 1024}, Shape{64, 1024}, Shape{1024}, Shape{64, 1}},  // a bias row, a per-row scale
      {Shape{7}, Shape{}, Shape{7}, Shape{1}},                        // 0-d input
      {Shape{2, 3, 4, 5, 6}, Shape{2, 1, 4, 1, 6}, Shape{3, 1, 5, 1}, Shape{1, 1, 1, 1, 1}},
      {Shape{0, 5}, Shape{1, 5}, Shape{0, 1}, Shape{5}},  // empty
  };
  for (const auto &c : cases) {
    Dev<float> a(c[1], values<float>(numel(c[1]), -2, 2, 4)), b(c[2], values<float>(numel(c[2]), -2, 2, 5)),
        d(c[3], values<float>(numel(c[3]), -2, 2, 6)), out(c[0]);
    opgen::map(out.out(), f, a.in(), b.in(), d.in());
    compare("map broadcast to " + opgen::shape_str(c[0]), out.host(), ref_map<float, C>(c[0], f, a, b, d), 1e-6, 1e-6);
  }
  // 0-d output from 0-d inputs
  Dev<double> x(Shape{}, {2.5}), out(Shape{});
  opgen::map(out.out(), [=] __host__ __device__(double v) -> double { return opgen::math::sqrt(v); }, x.in());
  expect(out.host()[0] == std::sqrt(2.5), "map 0-d");
  // mixed types: float inputs, a bool output (compares as float), an int64 output from int32
  Dev<float> p(Shape{9}, values<float>(9, -1, 1, 7));
  Dev<bool> q(Shape{9});
  opgen::map(q.out(), [=] __host__ __device__(float v) -> float { return v > 0.f; }, p.in());
  const auto qh = q.bytes();
  const auto ph = p.host();
  bool ok = true;
  for (size_t i = 0; i < qh.size(); ++i) ok = ok && qh[i] == (ph[i] > 0.f);
  expect(ok, "map float -> bool");
  Dev<int32_t> ia(Shape{5, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  Dev<int64_t> ib(Shape{3}, {10, -20, 30}), io(Shape{5, 3});
  const auto fi = [=] __host__ __device__(int64_t u, int64_t v) -> int64_t { return opgen::math::div(v, u) + u; };
  opgen::map(io.out(), fi, ia.in(), ib.in());
  compare("map int32 x int64 -> int64", io.host(), ref_map<int64_t, int64_t>(Shape{5, 3}, fi, ia, ib), 0, 0);
  // no input
  Dev<float> z(Shape{3, 3});
  opgen::map(z.out(), [=] __host__ __device__() -> float { return 7.f; });
  compare("map with no input", z.host(), std::vector<float>(9, 7.f), 0, 0);
}

void test_map_16_bit() {
  const Shape s{3, 1000}, r{1000};
  Dev<half> x(s, values<half>(3000, -4, 4, 8)), b(r, values<half>(1000, -1, 1, 9)), out(s);
  const auto f = [=] __host__ __device__(float v, float w) -> float { return opgen::math::erf(v) * w + opgen::math::sigmoid(v); };
  opgen::map(out.out(), f, x.in(), b.in());
  compare("map half (broadcast row)", out.host(), ref_map<half, float>(s, f, x, b), 1e-3, 1e-3);
  Dev<bfloat16> xb(s, values<bfloat16>(3000, -4, 4, 10)), ob(s);
  const auto g = [=] __host__ __device__(float v) -> float { return opgen::math::log1p(opgen::math::abs(v)); };
  opgen::map(ob.out(), g, xb.in());
  compare("map bfloat16 (contiguous)", ob.host(), ref_map<bfloat16, float>(s, g, xb), 1e-2, 1e-2);
  // half in, float out (compute in float)
  Dev<float> of(s);
  opgen::map(of.out(), g, x.in());
  compare("map half -> float", of.host(), ref_map<float, float>(s, g, x), 1e-6, 1e-6);
}

// --------------------------------------------------------------------- map_reduce_to

template <typename E>
void test_reduce(const char *name, double rtol, double atol) {
  using C = opgen::compute_t<E>;
  const auto f = [=] __host__ __device__(C dout, C x) -> C { return dout * opgen::select(x > C(0), C(1), C(0.5)); };
  const std::vector<std::pair<Shape, Shape>> cases = {
      {Shape{512, 300}, Shape{300}},           // leading dim reduced (a bias gradient)
      {Shape{6, 700, 5}, Shape{6, 1, 5}},      // a middle dim
      {Shape{33, 2000}, Shape{33, 1}},         // the innermost dim (a per-row scale)
      {Shape{4000, 3}, Shape{}},               // everything, into a 0-d gradient
      {Shape{3, 4, 5, 6}, Shape{4, 1, 6}},     // leading and middle
      {Shape{2, 3, 4}, Shape{2, 3, 4}},        // nothing reduced: a map
      {Shape{70000, 2}, Shape{2}},             // many rows into few outputs
      {Shape{0, 4}, Shape{4}},                 // a sum over nothing: zeros
  };
  for (const auto &c : cases) {
    const Shape &iter = c.first, &gs = c.second;
    Dev<E> dout(iter, values<E>(numel(iter), -1, 1, 11)), x(gs, values<E>(numel(gs), -1, 1, 12)), g(gs);
    // x broadcast from the gradient's shape, dout over the whole iteration shape
    opgen::map_reduce_to(g.out(), iter, f, dout.in(), x.in());
    const auto want = ref_reduce<C>(iter, gs, f, dout, x);
    std::vector<E> want_e(want.size());
    for (size_t i = 0; i < want.size(); ++i) want_e[i] = static_cast<E>(want[i]);
    compare(std::string("map_reduce_to ") + name + " " + opgen::shape_str(iter) + " -> " + opgen::shape_str(gs),
            g.host(), want_e, rtol, atol);
  }
}

// --------------------------------------------------------------------------- math

void test_math() {
  const int64_t n = 4096;
  const Shape s{n};
  Dev<float> x(s, values<float>(n, -6, 6, 13)), p(s, values<float>(n, 0.01, 9, 14)), out(s);
#define OPGEN_TEST_MATH1(expr, input, tol)                                                           \
  {                                                                                                  \
    const auto f = [=] __host__ __device__(float v) -> float { return expr; };                      \
    opgen::map(out.out(), f, input.in());                                                            \
    compare("math on the device: " #expr, out.host(), ref_map<float, float>(s, f, input), tol, tol); \
  }
  OPGEN_TEST_MATH1(opgen::math::exp(v), x, 1e-6)
  OPGEN_TEST_MATH1(opgen::math::log(v), p, 1e-6)
  OPGEN_TEST_MATH1(opgen::math::sqrt(v), p, 1e-7)
  OPGEN_TEST_MATH1(opgen::math::rsqrt(v), p, 1e-6)
  OPGEN_TEST_MATH1(opgen::math::tanh(v), x, 2e-6)
  OPGEN_TEST_MATH1(opgen::math::sigmoid(v), x, 1e-6)
  OPGEN_TEST_MATH1(opgen::math::abs(v), x, 0)
  OPGEN_TEST_MATH1(opgen::math::erf(v), x, 2e-6)
  OPGEN_TEST_MATH1(opgen::math::log1p(v), p, 1e-6)
  OPGEN_TEST_MATH1(opgen::math::expm1(v), x, 1e-6)
  OPGEN_TEST_MATH1(opgen::math::sign(v), x, 0)
  OPGEN_TEST_MATH1(opgen::math::maximum(v, 0.5f), x, 0)
  OPGEN_TEST_MATH1(opgen::math::minimum(v, 0.5f), x, 0)
  OPGEN_TEST_MATH1(opgen::math::pow(v, 1.7f), p, 2e-6)
  OPGEN_TEST_MATH1(opgen::math::div(v, 3.0f), x, 1e-7)
  OPGEN_TEST_MATH1(opgen::math::tanh_float(v), x, 1e-6)
  OPGEN_TEST_MATH1(opgen::math::erf_float(v), x, 1e-6)
#undef OPGEN_TEST_MATH1
  // double and half arguments
  Dev<double> xd(s, values<double>(n, -6, 6, 15)), od(s);
  const auto fd = [=] __host__ __device__(double v) -> double {
    return opgen::math::exp(v) + opgen::math::tanh(v) + opgen::math::erf(v) + opgen::math::pow(opgen::math::abs(v), 0.5);
  };
  opgen::map(od.out(), fd, xd.in());
  compare("math on the device: double", od.host(), ref_map<double, double>(s, fd, xd), 1e-14, 1e-14);
  Dev<half> xh(s, values<half>(n, -6, 6, 16)), oh(s);
  const auto fh = [=] __host__ __device__(float v) -> float { return opgen::math::exp(half(v)) * half(0.5f); };
  opgen::map(oh.out(), fh, xh.in());
  compare("math on the device: half arguments", oh.host(), ref_map<half, float>(s, fh, xh), 1e-3, 1e-3);
}

// ---------------------------------------------------------------- reductions and softmax

template <typename E>
void test_reduce_sum_max(const char *name, double rtol) {
  using C = opgen::compute_t<E>;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {Shape{64, 300}, Shape{1, 300}}, {Shape{64, 300}, Shape{64, 1}}, {Shape{64, 300}, Shape{1, 1}},
      {Shape{5, 6, 7}, Shape{5, 1, 7}}, {Shape{5, 6, 7}, Shape{1, 6, 1}}, {Shape{0, 3}, Shape{1, 3}},
  };
  for (const auto &c : cases) {
    const Shape &xs = c.first, &kept = c.second;
    std::vector<E> xv = values<E>(numel(xs), -2, 2, 21);
    if (numel(xs) > 100) xv[100] = E(std::numeric_limits<float>::quiet_NaN());  // a NaN in one group
    Dev<E> x(xs, xv), sum(kept), mx(kept);
    opgen::reduce_sum(x.in(), kept, sum.out(), 0.5);
    opgen::reduce_max(x.in(), kept, mx.out());
    const auto want = ref_reduce<C>(xs, kept, [] __host__ __device__(C v) -> C { return v; }, x);
    std::vector<E> want_sum(want.size()), want_max(want.size());
    std::vector<double> m(want.size(), -std::numeric_limits<double>::infinity());
    opgen::BroadcastCursor<1> cur(xs, {opgen::broadcast_strides(xs, kept.data(), static_cast<int>(kept.size()))});
    cur.seek(0);
    for (int64_t i = 0; i < numel(xs); ++i, cur.next()) {
      double &r = m[static_cast<size_t>(cur.offset[0])];
      const double v = as_double(xv[static_cast<size_t>(i)]);
      if (v > r || v != v || r != r) r = r != r ? r : v;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      want_sum[i] = static_cast<E>(want[i] * 0.5);
      want_max[i] = static_cast<E>(m[i]);
    }
    const std::string tag = std::string(" ") + name + " " + opgen::shape_str(xs) + " -> " + opgen::shape_str(kept);
    compare("reduce_sum" + tag, sum.host(), want_sum, rtol, rtol);
    compare("reduce_max" + tag, mx.host(), want_max, 0, 0);
  }
}

template <typename E>
void test_softmax(const char *name, double rtol) {
  using C = opgen::compute_t<E>;
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {Shape{37, 1000}, 1}, {Shape{3, 5000}, 1}, {Shape{4, 300, 7}, 1}, {Shape{6, 5}, 0}, {Shape{8}, 0}, {Shape{2, 9, 1}, 1}};
  for (const auto &c : cases) {
    const Shape &xs = c.first;
    const int64_t axis = c.second;
    const opgen::AxisSplit sp = opgen::split_axis(xs.data(), static_cast<int>(xs.size()), axis);
    const std::vector<E> xv = values<E>(numel(xs), -5, 5, 22), gv = values<E>(numel(xs), -1, 1, 23);
    for (bool log : {false, true}) {
      Dev<E> x(xs, xv), y(xs), g(xs, gv), dx(xs);
      opgen::softmax(x.in(), axis, y.out(), log);
      opgen::softmax_backward(y.in(), g.in(), axis, dx.out(), log);
      const std::vector<E> yv = y.host();
      std::vector<E> want_y(xv.size()), want_dx(xv.size());
      for (int64_t o = 0; o < sp.outer; ++o) {
        for (int64_t j = 0; j < sp.inner; ++j) {
          const auto at = [&](int64_t k) { return static_cast<size_t>((o * sp.n + k) * sp.inner + j); };
          double m = -std::numeric_limits<double>::infinity(), sum = 0, dot = 0;
          for (int64_t k = 0; k < sp.n; ++k) m = std::max(m, as_double(xv[at(k)]));
          for (int64_t k = 0; k < sp.n; ++k) sum += std::exp(as_double(xv[at(k)]) - m);
          for (int64_t k = 0; k < sp.n; ++k) {
            const double v = as_double(xv[at(k)]) - m;
            want_y[at(k)] = static_cast<E>(log ? v - std::log(sum) : std::exp(v) / sum);
            dot += log ? as_double(gv[at(k)]) : as_double(gv[at(k)]) * as_double(yv[at(k)]);
          }
          for (int64_t k = 0; k < sp.n; ++k) {  // from the device's y, as the op's backward is
            const double yk = as_double(yv[at(k)]), gk = as_double(gv[at(k)]);
            want_dx[at(k)] = static_cast<E>(log ? gk - std::exp(yk) * dot : yk * (gk - dot));
          }
        }
      }
      const std::string tag = std::string(log ? "log_softmax " : "softmax ") + name + " " + opgen::shape_str(xs) +
                              " axis " + std::to_string(axis);
      compare(tag, yv, want_y, rtol, rtol);
      compare(tag + " backward", dx.host(), want_dx, rtol, rtol);
    }
  }
}

// --------------------------------------------------- gemm (cuBLAS, or the tiled kernel without)

template <typename T>
void test_gemm(const char *name, double rtol) {
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const int64_t M = 37, N = 65, K = 130;
      const std::vector<T> av = values<T>(M * K, -1, 1, 31), bv = values<T>(K * N, -1, 1, 32);
      Dev<T> a(Shape{M * K}, av), b(Shape{K * N}, bv), c(Shape{M * N});
      opgen::gemm<T>(ta, tb, M, N, K, a.ptr, b.ptr, c.ptr);
      std::vector<T> want(static_cast<size_t>(M * N));
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += as_double(av[static_cast<size_t>(ta ? k * M + m : m * K + k)]) *
                   as_double(bv[static_cast<size_t>(tb ? n * K + k : k * N + n)]);
          want[static_cast<size_t>(m * N + n)] = static_cast<T>(acc);
        }
      }
      compare(std::string("gemm ") + name + (ta ? " a^T" : " a") + (tb ? " b^T" : " b"), c.host(), want, rtol, rtol);
    }
  }
  // the full form: alpha, beta and leading dimensions (c is the left 3 columns of a 4-wide buffer)
  const std::vector<T> av = values<T>(6, -1, 1, 33), bv = values<T>(9, -1, 1, 34), cv = values<T>(8, -1, 1, 35);
  Dev<T> a(Shape{6}, av), b(Shape{9}, bv), c(Shape{8}, cv);
  opgen::gemm<T>(false, false, 2, 3, 3, opgen::compute_t<T>(2), a.ptr, 3, b.ptr, 3, opgen::compute_t<T>(0.5), c.ptr, 4);
  std::vector<T> want = cv;
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 3; ++n) {
      double acc = 0;
      for (int k = 0; k < 3; ++k) acc += as_double(av[m * 3 + k]) * as_double(bv[k * 3 + n]);
      want[static_cast<size_t>(m * 4 + n)] = static_cast<T>(2 * acc + 0.5 * as_double(cv[static_cast<size_t>(m * 4 + n)]));
    }
  compare(std::string("gemm ") + name + " alpha, beta, ldc", c.host(), want, rtol, rtol);
}

// ---------------------------------------------- for_each_index, ReduceGroups, raise_in_kernel

void test_for_each_index() {
  // out[i] = 2 * i + x[i] over more indices than one grid covers (grid-stride)
  const int64_t n = int64_t{65536} * 256 + 77;
  const std::vector<float> xv = values<float>(n, -1, 1, 41);
  Dev<float> x(Shape{n}, xv), out(Shape{n});
  const float *xp = x.ptr;
  float *op = out.ptr;
  opgen::for_each_index(n, OPGEN_LAMBDA(int64_t i) { op[i] = 2.0f * static_cast<float>(i % 1000) + xp[i]; });
  std::vector<float> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] = 2.0f * static_cast<float>(i % 1000) + xv[static_cast<size_t>(i)];
  compare("for_each_index", out.host(), want, 0, 0);
  opgen::for_each_index(0, OPGEN_LAMBDA(int64_t i) { op[i] = -1.0f; });  // no launch
  compare("for_each_index n = 0", out.host(), want, 0, 0);

  // a thread per group of a reduction over axes {0, 2} of (3, 4, 5, 2): the group maxima
  const Shape shape{3, 4, 5, 2}, kept{1, 4, 1, 2};
  const opgen::ReduceGroups g = opgen::reduce_groups(shape, kept);
  expect(g.groups == 8 && g.count == 15, "reduce_groups: 8 groups of 15");
  const std::vector<float> av = values<float>(120, -1, 1, 42);
  Dev<float> a(shape, av), m(Shape{8});
  const float *ap = a.ptr;
  float *mp = m.ptr;
  opgen::for_each_index(g.groups, OPGEN_LAMBDA(int64_t k) {
    const int64_t b = g.base(k);
    float best = ap[b];
    for (int64_t r = 1; r < g.count; ++r) best = fmaxf(best, ap[b + g.offset(r)]);
    mp[k] = best;
  });
  std::vector<float> wm(8, -2.0f);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k)
        for (int l = 0; l < 2; ++l) {
          float &w = wm[static_cast<size_t>(j * 2 + l)];
          w = std::max(w, av[static_cast<size_t>(((i * 4 + j) * 5 + k) * 2 + l)]);
        }
  compare("for_each_index over ReduceGroups", m.host(), wm, 0, 0);

  // raise_in_kernel: the element gets its defined value, check_device_errors throws the code's message
  opgen::for_each_index(16, OPGEN_LAMBDA(int64_t i) {
    if (i == 5) {
      opgen::raise_in_kernel(opgen::cuda::kIndexOutOfRange);
      op[i] = 0.0f;
      return;
    }
    op[i] = 1.0f;
  });
  std::string msg;
  try {
    opgen::check_device_errors();
  } catch (const opgen::Error &e) {
    msg = e.what();
  }
  expect(msg == "index out of range", "raise_in_kernel then check_device_errors: '" + msg + "'");
  msg.clear();
  try {
    opgen::check_device_errors();  // the word was cleared
  } catch (const opgen::Error &e) {
    msg = e.what();
  }
  expect(msg.empty(), "check_device_errors after clearing: '" + msg + "'");
}

// ------------------------------------------------------------------- 16-bit conversions

__global__ void convert_kernel(int64_t n, const float *f, const double *d, uint16_t *h, uint16_t *b, uint16_t *hd,
                               float *hf, float *bf) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    h[i] = half(f[i]).bits;
    b[i] = bfloat16(f[i]).bits;
    hd[i] = half(d[i]).bits;
    hf[i] = static_cast<float>(half::from_bits(static_cast<uint16_t>(i & 0xFFFF)));
    bf[i] = static_cast<float>(bfloat16::from_bits(static_cast<uint16_t>(i & 0xFFFF)));
  }
}

void test_conversions() {
  std::vector<float> f;
  std::vector<double> d;
  // every half and bfloat16 value, the midpoints between neighbours (ties), and some around them
  for (uint32_t u = 0; u < 0x10000; ++u) {
    const float hv = static_cast<float>(half::from_bits(static_cast<uint16_t>(u)));
    const float bv = static_cast<float>(bfloat16::from_bits(static_cast<uint16_t>(u)));
    const float hn = static_cast<float>(half::from_bits(static_cast<uint16_t>(u + 1)));
    f.push_back(hv);
    f.push_back(bv);
    f.push_back(hv + (hn - hv) / 2);
    f.push_back(std::nextafter(hv + (hn - hv) / 2, 1e30f));
  }
  for (float v : {1e-30f, -1e-30f, 65504.f, 65519.f, 65520.f, 1e10f, -1e10f, 3.4e38f, 5.96e-8f, 2.98e-8f, 2.99e-8f})
    f.push_back(v);
  f.push_back(std::numeric_limits<float>::infinity());
  f.push_back(-std::numeric_limits<float>::infinity());
  f.push_back(std::numeric_limits<float>::quiet_NaN());
  for (float v : f) d.push_back(static_cast<double>(v) * (1.0 + 1e-12));  // rounded from double, not via float
  const int64_t n = static_cast<int64_t>(f.size());
  const Shape s{n};
  Dev<float> df(s, f), hf(s), bf(s);
  Dev<double> dd(s, d);
  Dev<uint16_t> h(s), b(s), hd(s);
  convert_kernel<<<256, 256>>>(n, df.ptr, dd.ptr, h.ptr, b.ptr, hd.ptr, hf.ptr, bf.ptr);
  cuda_ok(cudaGetLastError(), "convert_kernel");
  const auto hh = h.host(), bh = b.host(), hdh = hd.host();
  const auto hfh = hf.host(), bfh = bf.host();
  int64_t bad_h = 0, bad_b = 0, bad_hd = 0, bad_hf = 0, bad_bf = 0;
  for (int64_t i = 0; i < n; ++i) {
    const half ch(f[i]);
    const bfloat16 cb(f[i]);
    const half chd(d[i]);
    const auto same16 = [](uint16_t got, uint16_t want, uint16_t exp_mask) {
      const bool nan_want = (want & exp_mask) == exp_mask && (want & ~exp_mask & 0x7FFF) != 0;
      const bool nan_got = (got & exp_mask) == exp_mask && (got & ~exp_mask & 0x7FFF) != 0;
      return nan_want ? nan_got : got == want;  // NaN payloads may differ (the hardware's is canonical)
    };
    bad_h += !same16(hh[i], ch.bits, 0x7C00);
    bad_b += !same16(bh[i], cb.bits, 0x7F80);
    bad_hd += !same16(hdh[i], chd.bits, 0x7C00);
    const float wf = static_cast<float>(half::from_bits(static_cast<uint16_t>(i & 0xFFFF)));
    const float wb = static_cast<float>(bfloat16::from_bits(static_cast<uint16_t>(i & 0xFFFF)));
    bad_hf += !(std::isnan(wf) ? std::isnan(hfh[i]) : std::memcmp(&wf, &hfh[i], 4) == 0);
    bad_bf += !(std::isnan(wb) ? std::isnan(bfh[i]) : std::memcmp(&wb, &bfh[i], 4) == 0);
  }
  expect(bad_h == 0, "float -> half on the device as on the host (" + std::to_string(bad_h) + " differ)");
  expect(bad_b == 0, "float -> bfloat16 on the device as on the host (" + std::to_string(bad_b) + " differ)");
  expect(bad_hd == 0, "double -> half on the device as on the host (" + std::to_string(bad_hd) + " differ)");
  expect(bad_hf == 0, "half -> float on the device (" + std::to_string(bad_hf) + " differ)");
  expect(bad_bf == 0, "bfloat16 -> float on the device (" + std::to_string(bad_bf) + " differ)");
}

// ------------------------------------------------------------ streams and errors

void test_streams_and_errors() {
  expect(opgen::cuda::current_stream() == nullptr, "the default stream is 0");
  cudaStream_t st;
  cuda_ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
  {
    opgen::cuda::StreamScope scope(st);
    expect(opgen::cuda::current_stream() == st, "StreamScope sets the current stream");
    Dev<float> x(Shape{1 << 16}, values<float>(1 << 16, -1, 1, 17)), o(Shape{1 << 16});
    const auto f = [=] __host__ __device__(float v) -> float { return v * 3.f; };
    opgen::map(o.out(), f, x.in());
    cuda_ok(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    compare("map on a StreamScope's stream", o.host(), ref_map<float, float>(Shape{1 << 16}, f, x), 0, 0);
    // an integer division by zero on the device: the error word, read by check_errors
    Dev<int32_t> a(Shape{4}, {1, 2, 3, 4}), b(Shape{4}, {1, 0, 1, 1}), q(Shape{4});
    opgen::map(q.out(), [=] __host__ __device__(int32_t u, int32_t v) -> int32_t { return opgen::math::div(u, v); },
               a.in(), b.in());
    std::string msg;
    try {
      opgen::cuda::check_errors();
    } catch (const opgen::Error &e) {
      msg = e.what();
    }
    expect(msg == "integer division by zero", "check_errors raises the device error word: '" + msg + "'");
    msg.clear();
    try {
      opgen::cuda::check_errors();
    } catch (const opgen::Error &e) {
      msg = e.what();
    }
    expect(msg.empty(), "check_errors clears the word");
  }
  expect(opgen::cuda::current_stream() == nullptr, "StreamScope restores the stream");
  cudaStreamDestroy(st);
  // host-side errors: shapes that do not broadcast, too many dims
  Dev<float> x(Shape{3}), o(Shape{4});
  std::string msg;
  try {
    opgen::map(o.out(), [=] __host__ __device__(float v) -> float { return v; }, x.in());
  } catch (const opgen::Error &e) {
    msg = e.what();
  }
  expect(msg == "an input of shape (3,) does not broadcast to the output shape (4,)", "broadcast error: " + msg);
  Shape big, alt;
  for (int i = 0; i < 17; ++i) {
    big.push_back(2);
    alt.push_back(i % 2 ? 2 : 1);  // alternating broadcast dims: nothing merges
  }
  Dev<float> xb(alt), ob(big);
  msg.clear();
  try {
    opgen::map(ob.out(), [=] __host__ __device__(float v) -> float { return v; }, xb.in());
  } catch (const opgen::Error &e) {
    msg = e.what();
  }
  expect(msg.find("at most 16") != std::string::npos, "too many dimensions: " + msg);
}

/// Every test; the number of failed checks.
int run_all() {
  try {
    test_map_contiguous<float>("float", 1e-6);
    test_map_contiguous<double>("double", 1e-14);
    test_map_contiguous<half>("half", 2e-3);
    test_map_contiguous<bfloat16>("bfloat16", 1.6e-2);
    test_map_broadcast();
    test_map_16_bit();
    test_reduce<float>("float", 1e-4, 1e-4);
    test_reduce<double>("double", 1e-12, 1e-12);
    test_reduce<half>("half", 2e-3, 2e-3);
    test_reduce<bfloat16>("bfloat16", 1.6e-2, 1.6e-2);
    test_reduce_sum_max<float>("float", 1e-5);
    test_reduce_sum_max<double>("double", 1e-12);
    test_reduce_sum_max<half>("half", 2e-3);
    test_softmax<float>("float", 1e-5);
    test_softmax<double>("double", 1e-12);
    test_softmax<bfloat16>("bfloat16", 1.6e-2);
    // cuBLAS with -DOPGEN_CUBLAS (TF32 is off by default), opgen's tiled kernel without
    test_gemm<float>("float", 1e-5);
    test_gemm<double>("double", 1e-12);
    test_gemm<half>("half", 4e-3);
    test_gemm<bfloat16>("bfloat16", 2e-2);
    test_for_each_index();
    test_math();
    test_conversions();
    test_streams_and_errors();
  } catch (const std::exception &e) {
    std::printf("FAIL: exception: %s\n", e.what());
    ++g_failed;
  }
  std::printf("cuda_blocks_test: %d checks, %d failed\n", g_checks, g_failed);
  return g_failed;
}

}  // namespace cbt

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cuda_blocks_test: no CUDA device\n");
    return 2;
  }
  return cbt::run_all() == 0 ? 0 : 1;
}
