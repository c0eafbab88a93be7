// opgen's PyTorch CUDA glue: what a generated `<op>_cuda.cc` unit (the CUDA dispatch key's
// kernels, TORCH_LIBRARY_IMPL(ns, CUDA, m)) needs besides opgen/torch.h:
//
//   - opgen::pt::cuda::common_device(op, tensors...): the one CUDA device every defined tensor
//     argument is on; tensors on the CPU or on two GPUs are the op's ValueError
//     ("<op>(): expected every tensor on one CUDA device; got x on cuda:0, w on cpu").
//   - opgen::pt::cuda::DeviceScope: a c10::cuda::CUDAGuard for that device and, for the kernel
//     layer, torch's current stream on it as opgen::cuda::current_stream() (launches are
//     asynchronous on that stream: no host synchronization, CUDA-graph capturable).
//
// Compiled by the host compiler (not nvcc) against torch's c10/cuda headers and the CUDA
// toolkit's cuda_runtime_api.h; the kernels themselves are in <op>_kernel.cu (nvcc), which sees
// no torch header. Shipped with opgen (not generated).
#ifndef OPGEN_TORCH_CUDA_H_
#define OPGEN_TORCH_CUDA_H_

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <string>
#include <vector>

#include "opgen/cuda.h"
#include "opgen/kernel.h"
#include "opgen/torch.h"

namespace opgen {
namespace pt {
namespace cuda {

struct DeviceSeen {
  std::optional<at::Device> device;
  std::string listing;  // "x on cuda:0, w on cpu"
  bool mixed = false;
  int index = 0;

  void add(const at::Tensor &t) {
    ++index;
    if (!t.defined()) return;
    if (!listing.empty()) listing += ", ";
    listing += "tensor " + std::to_string(index) + " on " + t.device().str();
    if (!t.is_cuda() || (device.has_value() && *device != t.device())) mixed = true;
    if (!device.has_value()) device = t.device();
  }
  void add(const std::optional<at::Tensor> &t) {
    if (t.has_value()) {
      add(*t);
    } else {
      ++index;
    }
  }
  void add(at::TensorList ts) {
    for (const auto &t : ts) add(t);
  }
  void add(const c10::List<std::optional<at::Tensor>> &ts) {
    for (size_t i = 0; i < ts.size(); ++i) add(ts.get(i));
  }
};

/// The one CUDA device of the defined tensors among `ts` (tensors, optional tensors, lists).
/// Throws c10::ValueError "<op>(): ..." when one is on the CPU or on another GPU, or none is on
/// a GPU.
template <typename... T>
at::Device common_device(const char *op, const T &...ts) {
  DeviceSeen seen;
  (seen.add(ts), ...);
  if (seen.mixed || !seen.device.has_value() || !seen.device->is_cuda()) {
    throw c10::ValueError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                          std::string(op) + "(): expected every tensor on one CUDA device; got " +
                              (seen.listing.empty() ? std::string("no tensor") : seen.listing));
  }
  return *seen.device;
}

/// The device guard and the stream of one kernel call: torch's current stream on `device`
/// becomes the kernel layer's opgen::cuda::current_stream() for the scope.
class DeviceScope {
 public:
  explicit DeviceScope(at::Device device)
      : guard_(device), stream_(c10::cuda::getCurrentCUDAStream(device.index()).stream()) {}

 private:
  c10::cuda::CUDAGuard guard_;
  opgen::cuda::StreamScope stream_;
};

}  // namespace cuda
}  // namespace pt
}  // namespace opgen

#endif  // OPGEN_TORCH_CUDA_H_
