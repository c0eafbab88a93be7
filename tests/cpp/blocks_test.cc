// Checks opgen's building blocks (opgen/kernel.h, reduce.h, blas.h) against plain double loops,
// at sizes that take every path: contiguous, row-broadcast and strided maps, reductions to a
// broadcast input, row and column reductions (the parallel ones included), softmax and gemm.
// Prints "ok" or the first mismatch (exit code 1). Built by tests/test_kernel_headers.py with
// and without opgen's kernel flags (vector loops, libmvec, OpenBLAS).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "opgen/kernel.h"
#include "opgen/rules.h"

using opgen::Shape;

static int failures = 0;

static void check(const char *what, const std::vector<float> &got, const std::vector<double> &want, double tol) {
  if (got.size() != want.size()) {
    std::printf("%s: size %zu != %zu\n", what, got.size(), want.size());
    ++failures;
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]);
    if (!(err <= tol * (1 + std::fabs(want[i])))) {
      std::printf("%s: [%zu] %.9g != %.9g\n", what, i, double(got[i]), want[i]);
      ++failures;
      return;
    }
  }
}

static std::vector<float> data(int64_t n, unsigned seed) {
  std::vector<float> v(static_cast<size_t>(n));
  unsigned s = seed * 2654435761u + 1;
  for (auto &x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 8) % 20001) / 5000.0f - 2.0f;  // [-2, 2], random signs
  }
  return v;
}

template <typename E>
static opgen::View<E> view(E *p, const Shape &s) {
  return opgen::make_view(p, s.data(), static_cast<int>(s.size()));
}

int main() {
  const int64_t R = 300, D = 1100;  // R * D > 2 * kParallelGrain: parallel paths
  const Shape sx{R, D}, srow{D}, scol{R, 1};
  const auto x = data(R * D, 1), b = data(D, 2), c = data(R, 3);
  std::vector<float> out(static_cast<size_t>(R * D));
  const auto X = view(x.data(), sx);
  const auto O = view(out.data(), sx);

  // opgen::math::tanh in float (a rational function, not libmvec) inside a vector loop: every
  // 97th float of [0, 10] and its negation against double tanh, at most 5e-7 off; the ends.
  {
    std::vector<float> tx;
    for (uint32_t bits = 0; bits < 0x41200000u; bits += 97 * 1024) {
      float v;
      std::memcpy(&v, &bits, sizeof v);
      tx.push_back(v);
      tx.push_back(-v);
    }
    tx.insert(tx.end(), {8.f, -8.f, 100.f, -100.f, INFINITY, -INFINITY, 3e-4f, -3e-4f, 1e-30f});
    std::vector<float> ty(tx.size());
    const Shape st{static_cast<int64_t>(tx.size())};
    const auto TX = view(static_cast<const float *>(tx.data()), st);
    const auto TY = view(ty.data(), st);
    opgen::map(TY, [](float v) noexcept { return opgen::math::tanh(v); }, TX);
    std::vector<double> tw(tx.size());
    for (size_t i = 0; i < tx.size(); ++i) tw[i] = std::tanh(double(tx[i]));
    check("math::tanh(float)", ty, tw, 5e-7);
    for (size_t i = 0; i < tx.size(); ++i) {
      if (!(std::fabs(ty[i]) <= 1.f)) {
        std::printf("math::tanh(float): |tanh(%g)| = %.9g > 1\n", double(tx[i]), double(ty[i]));
        ++failures;
        break;
      }
    }
    const float nan = opgen::math::tanh(NAN), mz = opgen::math::tanh(-0.f);
    if (!std::isnan(nan) || !std::signbit(mz) || mz != 0.f) {
      std::printf("math::tanh(float): tanh(NaN) = %g, tanh(-0) = %g\n", double(nan), double(mz));
      ++failures;
    }
  }

  // opgen::math::erf in float (a rational function, not libmvec) inside a vector loop: every
  // 97th float of [0, 10] and its negation against double erf, at most 5e-7 off (6.5 ulp near
  // x = 3.92); |erf| <= 1; the ends.
  {
    std::vector<float> ex;
    for (uint32_t bits = 0; bits < 0x41200000u; bits += 97 * 1024) {
      float v;
      std::memcpy(&v, &bits, sizeof v);
      ex.push_back(v);
      ex.push_back(-v);
    }
    ex.insert(ex.end(), {3.92f, -3.92f, 4.f, -4.f, 100.f, INFINITY, -INFINITY, 1e-30f, -1e-30f});
    std::vector<float> ey(ex.size());
    const Shape se{static_cast<int64_t>(ex.size())};
    opgen::map(view(ey.data(), se), [](float v) noexcept { return opgen::math::erf(v); },
               view(static_cast<const float *>(ex.data()), se));
    std::vector<double> ew(ex.size());
    for (size_t i = 0; i < ex.size(); ++i) ew[i] = std::erf(double(ex[i]));
    check("math::erf(float)", ey, ew, 5e-7);
    for (size_t i = 0; i < ex.size(); ++i) {
      if (!(std::fabs(ey[i]) <= 1.f)) {
        std::printf("math::erf(float): |erf(%g)| = %.9g > 1\n", double(ex[i]), double(ey[i]));
        ++failures;
        break;
      }
    }
    const float nan = opgen::math::erf(NAN), mz = opgen::math::erf(-0.f);
    if (!std::isnan(nan) || !std::signbit(mz) || mz != 0.f) {
      std::printf("math::erf(float): erf(NaN) = %g, erf(-0) = %g\n", double(nan), double(mz));
      ++failures;
    }
  }

  // a bool input (read as its byte, so that the loop vectorises): where(mask, x, -x)
  {
    std::unique_ptr<bool[]> mask(new bool[x.size()]);
    for (size_t i = 0; i < x.size(); ++i) mask[i] = (i % 3 == 0) != (x[i] > 0.5f);
    const auto M = view(static_cast<const bool *>(mask.get()), sx);
    opgen::map(O, [](float m, float v) noexcept { return opgen::select(m != 0.f, v, -v); }, M, X);
    std::vector<double> wm(out.size());
    for (size_t i = 0; i < x.size(); ++i) wm[i] = mask[i] ? x[i] : -x[i];
    check("bool input", out, wm, 0);
  }

  // contiguous map with a transcendental and a select
  opgen::map(O, [](float v) { return 0.5f * v * (1.f + std::erf(v * 0.70710678f)); }, X);
  std::vector<double> want(out.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = 0.5 * x[i] * (1 + std::erf(x[i] / std::sqrt(2.0)));
  check("gelu", out, want, 1e-6);
  opgen::map(O, [](float v) { return opgen::select(v > 0.f, v, 0.01f * v); }, X);
  for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] > 0 ? x[i] : 0.01 * x[i];
  check("leaky_relu", out, want, 1e-7);
  opgen::map(O, [](float v) { return std::tanh(v) + std::exp(v) - std::log(v * v + 1.f); }, X);
  for (size_t i = 0; i < x.size(); ++i) want[i] = std::tanh(double(x[i])) + std::exp(double(x[i])) - std::log(double(x[i]) * x[i] + 1);
  check("tanh+exp-log", out, want, 1e-6);

  // row broadcast (bias over every row) and column broadcast (one scale per row)
  opgen::map(O, [](float u, float v) { return u + v; }, X, view(b.data(), srow));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < D; ++j) want[r * D + j] = double(x[r * D + j]) + b[j];
  check("bias add", out, want, 1e-7);
  // the same loop capped at the AVX2 copy (a memory-bound map, kMemoryBoundIsa): whole rows
  opgen::map<opgen::kMemoryBoundIsa>(O, [](float u, float v) noexcept { return u + v; }, X, view(b.data(), srow));
  check("bias add, kMemoryBoundIsa", out, want, 1e-7);
  opgen::map(O, [](float u, float v) { return u * v; }, X, view(c.data(), scol));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < D; ++j) want[r * D + j] = double(x[r * D + j]) * c[r];
  check("row scale", out, want, 1e-7);
  // rows under two outer dimensions: (R + 1, 5, 65) times a per-(., k) scale (1, 5, 1): a row of
  // 65 repeats one value of the scale, rows walked by a cursor over (R + 1, 5); on the pool the
  // chunks start inside rows (97825 elements)
  {
    const int64_t Q = R + 1;
    const Shape sa{Q, 5, 65}, sk{1, 5, 1};
    const auto a = data(Q * 325, 6), kk = data(5, 7);
    std::vector<float> o(static_cast<size_t>(Q * 325));
    opgen::map(view(o.data(), sa), [](float u, float v) noexcept { return u * v; }, view(a.data(), sa),
               view(kk.data(), sk));
    std::vector<double> w(o.size());
    for (int64_t r = 0; r < Q; ++r)
      for (int64_t k = 0; k < 5; ++k)
        for (int64_t j = 0; j < 65; ++j) w[(r * 5 + k) * 65 + j] = double(a[(r * 5 + k) * 65 + j]) * kk[k];
    check("rows under two outer dims", o, w, 1e-7);
    // its gradient for the scale: rows of 65 summed into (1, 5, 1), the row cursor stepping
    // over (R + 1, 5)
    std::vector<float> gk(5);
    opgen::map_reduce_to(view(gk.data(), sk), sa, [](float u) noexcept { return u; }, view(a.data(), sa));
    std::vector<double> wk(5, 0.0);
    for (int64_t i = 0; i < Q * 325; ++i) wk[static_cast<size_t>((i / 65) % 5)] += a[static_cast<size_t>(i)];
    check("grad over rows under two outer dims", gk, wk, 1e-5);
    // the same rows with a contiguous (5, 65) input: whole rows of 325, no buffer
    const Shape sb{5, 65};
    const auto bb = data(325, 8);
    opgen::map(view(o.data(), sa), [](float u, float v) noexcept { return u - v; }, view(a.data(), sa),
               view(bb.data(), sb));
    for (int64_t i = 0; i < Q * 325; ++i) w[i] = double(a[i]) - bb[i % 325];
    check("whole rows, chunks inside rows", o, w, 1e-7);
  }
  // strided broadcast: (R, 1, 3) with (1, 5, 3) -> (R, 5, 3): short rows, cursor path
  {
    const Shape sa{R, 1, 3}, sb{1, 5, 3}, so{R, 5, 3};
    const auto a = data(R * 3, 4), bb = data(15, 5);
    std::vector<float> o(static_cast<size_t>(R * 15));
    opgen::map(view(o.data(), so), [](float u, float v) { return u - v; }, view(a.data(), sa), view(bb.data(), sb));
    std::vector<double> w(o.size());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < 5; ++k)
        for (int64_t j = 0; j < 3; ++j) w[(r * 5 + k) * 3 + j] = double(a[r * 3 + j]) - bb[k * 3 + j];
    check("strided broadcast", o, w, 1e-7);
  }

  // gradients of broadcast inputs: reduce to the bias shape and to the per-row shape
  {
    std::vector<float> gb(static_cast<size_t>(D)), gc(static_cast<size_t>(R));
    opgen::map_reduce_to(view(gb.data(), srow), sx, [](float g, float v) { return g * v; }, X, view(b.data(), srow));
    opgen::map_reduce_to<opgen::kMemoryBoundIsa>(view(gc.data(), scol), sx, [](float g) noexcept { return g; }, X);
    std::vector<double> wb(gb.size(), 0.0), wc(gc.size(), 0.0);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < D; ++j) {
        wb[j] += double(x[r * D + j]) * b[j];
        wc[r] += x[r * D + j];
      }
    check("grad of bias", gb, wb, 1e-5);
    check("grad of row scale", gc, wc, 1e-5);
  }

  // lane_sum: exact integer-valued sums for lengths around its 32 float lanes (tail, none, one)
  for (const int64_t n : {0, 1, 31, 32, 33, 100, 1100}) {
    const double got = opgen::lane_sum<float>(n, [](int64_t j) { return float(j % 7); });
    double want = 0;
    for (int64_t j = 0; j < n; ++j) want += double(j % 7);
    if (got != want) {
      std::printf("lane_sum(%lld): %g != %g\n", static_cast<long long>(n), got, want);
      ++failures;
    }
  }

  // reductions: last axis (rows), first axis (columns), everything, a middle axis, two axes
  // apart (serial fallback); max with a NaN
  {
    const Shape s3{6, 50, 1100};
    const auto y = data(6 * 50 * 1100, 6);
    const auto Y = view(y.data(), s3);
    for (const std::vector<int64_t> &axes : std::vector<std::vector<int64_t>>{{2}, {0}, {}, {1}, {0, 2}, {1, 2}}) {
      const Shape kept = opgen::reduce_shape(s3, axes, true);
      const int64_t n = opgen::numel_of(kept.data(), static_cast<int>(kept.size()));
      std::vector<float> s(static_cast<size_t>(n)), m(static_cast<size_t>(n));
      opgen::reduce_sum(Y, kept, view(s.data(), kept));
      opgen::reduce_max(Y, kept, view(m.data(), kept));
      std::vector<double> ws(s.size(), 0.0), wm(m.size(), -INFINITY);
      opgen::BroadcastCursor<1> cur(s3, {opgen::broadcast_strides(s3, kept.data(), static_cast<int>(kept.size()))});
      for (size_t i = 0; i < y.size(); ++i, cur.next()) {
        ws[static_cast<size_t>(cur.offset[0])] += y[i];
        wm[static_cast<size_t>(cur.offset[0])] = std::max(wm[static_cast<size_t>(cur.offset[0])], double(y[i]));
      }
      const std::string name = "reduce axes " + std::to_string(axes.size() ? axes[0] : -1) + "/" + std::to_string(axes.size());
      check((name + " sum").c_str(), s, ws, 2e-4);  // float block sums of up to 1024 terms of magnitude 2
      check((name + " max").c_str(), m, wm, 0);
    }
    auto z = y;
    z[7 * 1100 + 3] = NAN;
    const Shape kept{6, 50, 1};
    std::vector<float> m(300);
    opgen::reduce_max(view(static_cast<const float *>(z.data()), s3), kept, view(m.data(), kept));
    if (!std::isnan(m[7]) || std::isnan(m[8])) {
      std::printf("reduce_max: NaN does not stick to its row only\n");
      ++failures;
    }
  }

  // softmax and log-softmax over the last axis and over the first, forward and backward
  for (int64_t axis : {1, 0}) {
    for (bool lg : {false, true}) {
      opgen::softmax(X, axis, O, lg);
      const int64_t n = axis == 1 ? D : R, groups = axis == 1 ? R : D;
      const auto at = [&](int64_t g, int64_t k) { return axis == 1 ? g * D + k : k * D + g; };
      for (int64_t g = 0; g < groups; ++g) {
        double mx = -INFINITY, s = 0;
        for (int64_t k = 0; k < n; ++k) mx = std::max(mx, double(x[at(g, k)]));
        for (int64_t k = 0; k < n; ++k) s += std::exp(x[at(g, k)] - mx);
        for (int64_t k = 0; k < n; ++k) {
          const double v = x[at(g, k)] - mx;
          want[at(g, k)] = lg ? v - std::log(s) : std::exp(v) / s;
        }
      }
      const std::string name = std::string(lg ? "log_softmax" : "softmax") + " axis " + std::to_string(axis);
      check(name.c_str(), out, want, 2e-6);
      std::vector<float> dx(out.size());
      const auto dy = data(R * D, 7);
      opgen::softmax_backward(view(static_cast<const float *>(out.data()), sx), view(dy.data(), sx), axis,
                              view(dx.data(), sx), lg);
      std::vector<double> wdx(dx.size());
      for (int64_t g = 0; g < groups; ++g) {
        double dot = 0;
        for (int64_t k = 0; k < n; ++k) dot += lg ? double(dy[at(g, k)]) : double(dy[at(g, k)]) * out[at(g, k)];
        for (int64_t k = 0; k < n; ++k) {
          const size_t i = static_cast<size_t>(at(g, k));
          wdx[i] = lg ? dy[i] - std::exp(double(out[i])) * dot : out[i] * (dy[i] - dot);
        }
      }
      check((name + " backward").c_str(), dx, wdx, 2e-5);
    }
  }

  // parallel_rows_sum: a row result and column sums (x, and x times its row's mean square) in one pass, as
  // layer_norm's backward; R = 300 rows make 8 blocks of float runs of up to 64 rows
  {
    std::vector<float> rows(static_cast<size_t>(R));
    const float *xp = x.data();
    const std::vector<double> cols = opgen::parallel_rows_sum<float>(R, D, 2 * D, [&](int64_t r0, int64_t r1, float *acc) {
      const float *p = xp;  // a local pointer (docs/kernel-api.md, OPGEN_SIMD_SUM)
      for (int64_t r = r0; r < r1; ++r) {
        const float *xr = p + r * D;
        float s = 0, s2 = 0;
        OPGEN_SIMD_SUM(s, s2)
        for (int64_t j = 0; j < D; ++j) {
          s += xr[j];
          s2 += xr[j] * xr[j];
        }
        rows[static_cast<size_t>(r)] = s + s2;
        OPGEN_SIMD
        for (int64_t j = 0; j < D; ++j) {
          acc[j] += xr[j];
          acc[D + j] += xr[j] * (s2 / float(D));
        }
      }
    });
    std::vector<double> wr(rows.size(), 0.0), wc(static_cast<size_t>(2 * D), 0.0);
    std::vector<float> gotc(cols.begin(), cols.end());
    for (int64_t r = 0; r < R; ++r) {
      double s = 0, s2 = 0;
      for (int64_t j = 0; j < D; ++j) {
        s += x[r * D + j];
        s2 += double(x[r * D + j]) * x[r * D + j];
      }
      wr[static_cast<size_t>(r)] = s + s2;
      for (int64_t j = 0; j < D; ++j) {
        wc[static_cast<size_t>(j)] += x[r * D + j];
        wc[static_cast<size_t>(D + j)] += x[r * D + j] * (s2 / double(D));
      }
    }
    check("parallel_rows_sum rows", rows, wr, 2e-5);
    check("parallel_rows_sum columns", gotc, wc, 2e-4);
    const std::vector<double> none = opgen::parallel_rows_sum<float>(0, D, D, [&](int64_t, int64_t, float *) {
      ++failures;  // no rows: f is never called
    });
    if (none.size() != static_cast<size_t>(D) || none[0] != 0.0) {
      std::printf("parallel_rows_sum: no rows gives %zu values\n", none.size());
      ++failures;
    }
  }

  // gemm, every transpose combination, whole and split into row blocks over the pool
  for (int t = 0; t < 8; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const int64_t M = t & 4 ? 256 : 67, N = t & 4 ? 200 : 45, K = t & 4 ? 300 : 130;
    const auto a = data(M * K, 8), bm = data(K * N, 9);
    std::vector<float> cm(static_cast<size_t>(M * N));
    opgen::gemm<float>(ta, tb, M, N, K, a.data(), bm.data(), cm.data());
    std::vector<double> wc(cm.size(), 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          wc[m * N + n] += double(ta ? a[k * M + m] : a[m * K + k]) * (tb ? bm[n * K + k] : bm[k * N + n]);
    check(("gemm " + std::to_string(t)).c_str(), cm, wc, 1e-4);  // float sums of up to 300 products
  }

  std::printf(failures ? "FAILED\n" : "ok\n");
  return failures ? 1 : 0;
}
