// The machine's limits, measured here: memory bandwidth (STREAM-style copy and triad over arrays
// far larger than the last-level cache, and of the benchmark's 16 MB tensors; one thread and all
// threads), peak float32 FLOP/s of the cores (independent FMA chains in AVX2 registers and, where
// the CPU has it, AVX-512; one thread and all threads) and OpenBLAS
// sgemm called from C on all threads and on one (the speed the matmul op can at best reach). bench/bench_kernels.py
// compiles and runs it; it prints one "name value unit" line per figure.
//
//   g++ -O3 -std=c++17 -mavx2 -mfma -pthread machine_limits.cc -o machine_limits [-DOPGEN_BLAS ...]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#if defined(OPGEN_BLAS)
extern "C" void scipy_cblas_sgemm(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                                  float *, int);
extern "C" void scipy_openblas_set_num_threads(int);
#endif

using Clock = std::chrono::steady_clock;

template <typename F>
static double best_of(int reps, F &&f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

template <typename F>
static void on_threads(int threads, int64_t n, F &&f) {
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { f(n * t / threads, n * (t + 1) / threads); });
  for (auto &t : ts) t.join();
}

static float fma_chains(int64_t iters) {
  __m256 a0 = _mm256_set1_ps(1.f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  __m256 a8 = a0, a9 = a0;
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {  // 10 independent chains: hides the FMA latency
    a0 = _mm256_fmadd_ps(a0, m, c); a1 = _mm256_fmadd_ps(a1, m, c); a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c); a4 = _mm256_fmadd_ps(a4, m, c); a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c); a7 = _mm256_fmadd_ps(a7, m, c); a8 = _mm256_fmadd_ps(a8, m, c);
    a9 = _mm256_fmadd_ps(a9, m, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(_mm256_add_ps(a6, a7), _mm256_add_ps(a8, a9))));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

// The same with 512-bit registers (16 floats), on CPUs with AVX-512F.
__attribute__((target("avx512f"))) static float fma_chains_512(int64_t iters) {
  __m512 a0 = _mm512_set1_ps(1.f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  __m512 a8 = a0, a9 = a0;
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm512_fmadd_ps(a0, m, c); a1 = _mm512_fmadd_ps(a1, m, c); a2 = _mm512_fmadd_ps(a2, m, c);
    a3 = _mm512_fmadd_ps(a3, m, c); a4 = _mm512_fmadd_ps(a4, m, c); a5 = _mm512_fmadd_ps(a5, m, c);
    a6 = _mm512_fmadd_ps(a6, m, c); a7 = _mm512_fmadd_ps(a7, m, c); a8 = _mm512_fmadd_ps(a8, m, c);
    a9 = _mm512_fmadd_ps(a9, m, c);
  }
  const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                 _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(_mm512_add_ps(a6, a7),
                                                                                      _mm512_add_ps(a8, a9))));
  return _mm512_reduce_add_ps(s);
}

int main() {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Arrays of 128 MB (far beyond any cache: main memory) and of 16 MB, the tensor size of
  // bench_kernels.py's large cases (4096 x 1024 float32), which a big last-level cache may hold:
  // the limit those cases run against ("stream_copy_16mb_...").
  for (const int64_t n : {int64_t{1} << 25, int64_t{1} << 22}) {
    const char *tag = n == (int64_t{1} << 25) ? "" : "16mb_";
    std::vector<float> a(n, 1.f), b(n, 2.f), c(n, 0.f);
    for (int th : {1, threads}) {
      const double copy = best_of(n < (1 << 25) ? 20 : 5, [&] {
        on_threads(th, n, [&](int64_t lo, int64_t hi) { std::copy(b.data() + lo, b.data() + hi, c.data() + lo); });
      });
      const double triad = best_of(n < (1 << 25) ? 20 : 5, [&] {
        on_threads(th, n, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + 3.f * c[i];
        });
      });
      std::printf("stream_copy_%s%dt %.2f GB/s\n", tag, th, 2.0 * 4 * n / copy / 1e9);
      std::printf("stream_triad_%s%dt %.2f GB/s\n", tag, th, 3.0 * 4 * n / triad / 1e9);
    }
  }
  const int64_t iters = 20'000'000;
  volatile float sink = 0;
  for (int th : {1, threads}) {
    const double t = best_of(3, [&] { on_threads(th, th, [&](int64_t, int64_t) { sink = sink + fma_chains(iters); }); });
    std::printf("peak_fp32_%dt %.1f GFLOP/s\n", th, 2.0 * 8 * 10 * iters * th / t / 1e9);
  }
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    for (int th : {1, threads}) {
      const double t = best_of(3, [&] {
        on_threads(th, th, [&](int64_t, int64_t) { sink = sink + fma_chains_512(iters); });
      });
      std::printf("peak_fp32_avx512_%dt %.1f GFLOP/s\n", th, 2.0 * 16 * 10 * iters * th / t / 1e9);
    }
  }
#if defined(OPGEN_BLAS)
  for (int th : {threads, 1})
  for (int s : {512, 1024}) {
    scipy_openblas_set_num_threads(th);
    std::vector<float> x(size_t(s) * s, 0.5f), y(size_t(s) * s, 0.25f), z(size_t(s) * s);
    scipy_cblas_sgemm(101, 111, 111, s, s, s, 1.f, x.data(), s, y.data(), s, 0.f, z.data(), s);  // warm
    const double t = best_of(s == 512 ? 10 : 4, [&] {
      scipy_cblas_sgemm(101, 111, 111, s, s, s, 1.f, x.data(), s, y.data(), s, 0.f, z.data(), s);
    });
    std::printf("sgemm_from_c_%d_%dt %.1f GFLOP/s\n", s, th, 2.0 * s * s * s / t / 1e9);
  }
#endif
  return 0;
}
