// Bandwidth of opgen's CUDA map and map_reduce_to against a device-to-device copy, on one GPU.
//   nvcc -std=c++17 --extended-lambda -arch=sm_90 -O3 -I opgen/include tests/cpp/cuda_blocks_bench.cu
#define OPGEN_DEVICE_CUDA 1
#include <cstdio>
#include <vector>

#include "opgen/kernel.h"

namespace {
template <typename F>
float time_ms(F &&f, int reps = 20) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  f();
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i) f();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms / reps;
}
}  // namespace

int main() {
  const int64_t n = int64_t{1} << 26;  // 64M elements
  float *x, *y, *o;
  cudaMalloc(&x, n * 4);
  cudaMalloc(&y, n * 4);
  cudaMalloc(&o, n * 4);
  cudaMemset(x, 0, n * 4);
  cudaMemset(y, 0, n * 4);
  const opgen::Shape s{n}, m{8192, 8192}, row{8192}, col{8192, 1};
  const auto v = [&](float *p, const opgen::Shape &sh) { return opgen::make_view<const float>(p, sh.data(), int(sh.size())); };
  const auto w = [&](float *p, const opgen::Shape &sh) { return opgen::make_view<float>(p, sh.data(), int(sh.size())); };
  const float copy = time_ms([&] { cudaMemcpyAsync(o, x, n * 4, cudaMemcpyDeviceToDevice); });
  const float add = time_ms([&] { opgen::map(w(o, s), [=] __host__ __device__(float a, float b) -> float { return a + b; }, v(x, s), v(y, s)); });
  const float gelu = time_ms([&] {
    opgen::map(w(o, s), [=] __host__ __device__(float a) -> float { return 0.5f * a * (1.f + opgen::math::erf(a * 0.70710678f)); }, v(x, s));
  });
  const float bias = time_ms([&] { opgen::map(w(o, m), [=] __host__ __device__(float a, float b) -> float { return a + b; }, v(x, m), v(y, row)); });
  const float dbias = time_ms([&] { opgen::map_reduce_to(w(o, row), m, [=] __host__ __device__(float g) -> float { return g; }, v(x, m)); });
  const float drow = time_ms([&] { opgen::map_reduce_to(w(o, col), m, [=] __host__ __device__(float g) -> float { return g; }, v(x, m)); });
  const opgen::Shape sm{8192, 4096}, kept{8192, 1};
  const float smax = time_ms([&] { opgen::softmax(v(x, sm), 1, w(o, sm)); });
  const float rsum = time_ms([&] { opgen::reduce_sum(v(x, sm), kept, w(o, kept)); });
  opgen::half *hx = reinterpret_cast<opgen::half *>(x), *ho = reinterpret_cast<opgen::half *>(o);
  const float hadd = time_ms([&] {
    opgen::map(opgen::make_view<opgen::half>(ho, s.data(), 1), [=] __host__ __device__(float a) -> float { return a * 2.f; },
               opgen::make_view<const opgen::half>(hx, s.data(), 1));
  });
  const double gb = 1e-6;  // bytes/ms -> GB/s
  std::printf("64M float32 elements (one GPU), ms and GB/s:\n");
  std::printf("  D2D copy           %.3f ms  %.0f GB/s\n", copy, 2.0 * n * 4 / copy * gb);
  std::printf("  map add x+y        %.3f ms  %.0f GB/s  (%.0f%% of copy)\n", add, 3.0 * n * 4 / add * gb, 100.0 * (3.0 * n * 4 / add) / (2.0 * n * 4 / copy));
  std::printf("  map gelu(erf)      %.3f ms  %.0f GB/s\n", gelu, 2.0 * n * 4 / gelu * gb);
  std::printf("  map bias [8192]    %.3f ms  %.0f GB/s\n", bias, 2.0 * n * 4 / bias * gb);
  std::printf("  reduce_to leading  %.3f ms  %.0f GB/s  ([8192,8192] -> [8192])\n", dbias, 1.0 * n * 4 / dbias * gb);
  std::printf("  reduce_to rows     %.3f ms  %.0f GB/s  ([8192,8192] -> [8192,1])\n", drow, 1.0 * n * 4 / drow * gb);
  std::printf("  softmax rows       %.3f ms  %.0f GB/s  ([8192,4096], last axis)\n", smax, 2.0 * 8192 * 4096 * 4 / smax * gb);
  std::printf("  reduce_sum rows    %.3f ms  %.0f GB/s  ([8192,4096] -> [8192,1])\n", rsum, 1.0 * 8192 * 4096 * 4 / rsum * gb);
  std::printf("  map half x*2       %.3f ms  %.0f GB/s\n", hadd, 2.0 * n * 2 / hadd * gb);
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("status: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
