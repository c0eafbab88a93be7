// opgen matrix product: gemm on OpenBLAS (the scipy-openblas32 wheel) when the build defines
// OPGEN_BLAS (opgen's builds do when the wheel is installed: it is in the `run` extra), and on a
// cache-blocked, vectorised loop otherwise (and for element types BLAS has no routine for).
//
//   opgen::gemm(trans_a, trans_b, M, N, K, a, b, c)   c (M, N) = op(a) @ op(b), row-major,
//                                                     op(a) (M, K), op(b) (K, N)
//   opgen::gemm(..., alpha, a, lda, b, ldb, beta, c, ldc)   the full BLAS form
//
// Threads: OpenBLAS is set to one thread, and gemm splits the rows of c of large products
// into blocks that opgen's pool runs (opgen/parallel.h), each one a single-threaded BLAS call. OpenBLAS's own threads
// hand work off by waiting for each other: with the second core busy (another process), a
// 512^3 sgemm took 40-67 ms on 2 threads against 1.8 ms on one (docs/performance.md); the pool's
// caller works too and takes every block a late worker has not claimed.
//
// Shipped with opgen (not generated). Framework-free: used by the aot and Function<T> paths.
#ifndef OPGEN_BLAS_H_
#define OPGEN_BLAS_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "opgen/kernel.h"

#if defined(OPGEN_BLAS)
// The two routines used, as scipy-openblas32's cblas.h declares them (symbols prefixed with
// scipy_, 32-bit integers, the CBLAS enums passed as int). Declared here rather than included:
// that cblas.h also declares a global `bfloat16`, which clashes with MindSpore's.
extern "C" {
void scipy_cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                       int lda, const float *b, int ldb, float beta, float *c, int ldc);
void scipy_cblas_dgemm(int order, int trans_a, int trans_b, int m, int n, int k, double alpha, const double *a,
                       int lda, const double *b, int ldb, double beta, double *c, int ldc);
void scipy_openblas_set_num_threads(int num_threads);
}
#endif

namespace opgen {

/// Whether gemm on float/double runs on a BLAS in this build.
constexpr bool kHaveBlas =
#if defined(OPGEN_BLAS)
    true;
#else
    false;
#endif

namespace detail {
/// c = alpha op(a) op(b) + beta c by loops: rows of c parallel, k outer, n inner (vectorised).
template <typename T>
void gemm_loops(bool ta, bool tb, int64_t M, int64_t N, int64_t K, compute_t<T> alpha, const T *a, int64_t lda,
                const T *b, int64_t ldb, compute_t<T> beta, T *c, int64_t ldc) {
  using C = compute_t<T>;
  // Work per row is N * K multiply-adds: split rows so that a chunk is worth a thread.
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, N * K));
  parallel_for(M, grain, [&](int64_t m0, int64_t m1) {
    std::vector<C> row(static_cast<size_t>(N)), bk(tb ? static_cast<size_t>(N) : 0);
    for (int64_t m = m0; m < m1; ++m) {
      C *r = row.data();
      std::fill(row.begin(), row.end(), C(0));
      for (int64_t k = 0; k < K; ++k) {
        const C av = C(ta ? a[k * lda + m] : a[m * lda + k]);
        if (tb) {
          for (int64_t n = 0; n < N; ++n) r[n] += av * C(b[n * ldb + k]);
        } else {
          const T *bp = b + k * ldb;
          OPGEN_SIMD
          for (int64_t n = 0; n < N; ++n) r[n] += av * C(bp[n]);
        }
      }
      T *cp = c + m * ldc;
      if (beta == C(0)) {
        for (int64_t n = 0; n < N; ++n) cp[n] = T(alpha * r[n]);
      } else {
        for (int64_t n = 0; n < N; ++n) cp[n] = T(alpha * r[n] + beta * C(cp[n]));
      }
    }
  });
}
}  // namespace detail

/// c (M x N, leading dimension ldc) = alpha * op(a) @ op(b) + beta * c, row-major; op(a) is
/// M x K (a is K x M with trans_a), op(b) is K x N (b is N x K with trans_b).
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, compute_t<T> alpha, const T *a, int64_t lda,
          const T *b, int64_t ldb, compute_t<T> beta, T *c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty sum: c = beta * c (BLAS would too, but some reject K == 0 lda's)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) c[m * ldc + n] = beta == compute_t<T>(0) ? T(0) : T(beta * compute_t<T>(c[m * ldc + n]));
    return;
  }
#if defined(OPGEN_BLAS)
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  const bool fits = M <= kMaxInt && N <= kMaxInt && K <= kMaxInt && lda <= kMaxInt && ldb <= kMaxInt && ldc <= kMaxInt;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (fits) {
      constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;  // CBLAS_ORDER, CBLAS_TRANSPOSE
      static const bool one_thread = (scipy_openblas_set_num_threads(1), true);
      (void)one_thread;
      const int ta = trans_a ? kTrans : kNoTrans, tb = trans_b ? kTrans : kNoTrans;
      const auto i = [](int64_t v) { return static_cast<int>(v); };
      // One block of rows per thread, each worth at least 64M multiply-adds (~0.4 ms on one
      // core); smaller products are one call. Every block packs all of op(b) (OpenBLAS packs
      // per call), so fewer blocks pack less: 1024^3 on 2 threads took 5.9 ms as 2 blocks, 6.3
      // as 4 and 6.7 as 8 (363 / 343 / 318 GFLOP/s; OpenBLAS's own 2 threads: 366), 512^3 0.86
      // ms as 2 or 4 blocks, 0.93 as 8. On a machine whose other core is busy a worker
      // preempted mid-block delays the call by a scheduler slice whatever the block count (512^3
      // in 8 blocks took 6.2 ms against 1.8 ms as one call at load ~8): docs/performance.md.
      const int64_t grain = std::max<int64_t>(
          {16, (int64_t{1} << 26) / std::max<int64_t>(1, N * K), M / std::max(1, num_threads())});
      parallel_for(M, grain, [&](int64_t m0, int64_t m1) {
        const T *ab = trans_a ? a + m0 : a + m0 * lda;  // rows m0.. of op(a)
        if constexpr (std::is_same_v<T, float>) {
          scipy_cblas_sgemm(kRowMajor, ta, tb, i(m1 - m0), i(N), i(K), alpha, ab, i(lda), b, i(ldb), beta,
                            c + m0 * ldc, i(ldc));
        } else {
          scipy_cblas_dgemm(kRowMajor, ta, tb, i(m1 - m0), i(N), i(K), alpha, ab, i(lda), b, i(ldb), beta,
                            c + m0 * ldc, i(ldc));
        }
      });
      return;
    }
  }
#endif
  detail::gemm_loops(trans_a, trans_b, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

/// c (M x N) = op(a) @ op(b) for contiguous row-major a, b and c.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T *a, const T *b, T *c) {
  gemm(trans_a, trans_b, M, N, K, compute_t<T>(1), a, trans_a ? M : K, b, trans_b ? K : N, compute_t<T>(0), c, N);
}

}  // namespace opgen

#endif  // OPGEN_BLAS_H_
