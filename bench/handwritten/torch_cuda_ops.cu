// The hand-written baseline of bench/bench_gpu.py's per-call table: a PyTorch CUDA operator written
// the way pytorch/extension-cpp teaches (TORCH_LIBRARY schema, TORCH_LIBRARY_IMPL(ns, CUDA) kernel,
// a grid-stride loop on the current stream), for float32 x * y of one shape. Built by
// torch.utils.cpp_extension.load in bench_gpu.py; not part of opgen.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

namespace {

__global__ void mul_kernel(const float *x, const float *y, float *out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    out[i] = x[i] * y[i];
  }
}

at::Tensor mul_cuda(const at::Tensor &x, const at::Tensor &y) {
  TORCH_CHECK(x.sizes() == y.sizes() && x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat,
              "handwritten mul: float32 tensors of one shape");
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous(), yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  mul_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), yc.data_ptr<float>(),
                                                                        out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

TORCH_LIBRARY(handwritten_cuda, m) { m.def("mul(Tensor x, Tensor y) -> Tensor"); }

TORCH_LIBRARY_IMPL(handwritten_cuda, CUDA, m) { m.impl("mul", &mul_cuda); }
