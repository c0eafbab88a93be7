// opgen's MindSpore support object: the helpers of opgen/ms.h that need MindSpore's heavy headers
// ("ms_extension.h": pyboost, the CPU runtime, the device memory pool; ~35 CPU s to compile).
//
// opgen build compiles this file once per machine -- per MindSpore version, compiler, flags and
// opgen version -- into the build root (support-<key>/ms_support.o) and links that object into
// every package's Function<T> extension, so that no per-package unit includes ms_extension.h.
//
// Output allocation (empty): `std::make_shared<Tensor>(dtype, shape)` allocates lazily on the
// first data_c() with `std::make_unique<T[]>(n)`, i.e. fresh, zero-filled memory: at 16M float32
// elements that is a 64 MB mmap whose 16384 pages all fault (~40 ms here, more than the whole
// builtin ops.mul). empty() instead takes the output from MindSpore's CPU memory pool, the way
// MindSpore's own pyboost CPU kernels allocate theirs (PyBoostUtils::CreateOutputTensor /
// PrepareOpOutputs / MallocOpOutputs with the CPU DeviceContext): memory the pool already holds
// is handed out again without a fill or a page fault (~40 us at 16M), and returns to the pool
// when the tensor dies. See docs/performance.md.
//
// Shipped with opgen (not generated).
#include "ms_extension.h"
#include "opgen/ms.h"

namespace opgen {
namespace ms {

TensorPtr host(const TensorPtr &t) {
  if (t == nullptr) return t;
  TensorPtr c = t->is_contiguous() ? t : mindspore::kernel::pyboost::contiguous(t);
  return c->cpu();
}

namespace {
/// MindSpore's CPU DeviceContext (owner of the CPU memory pool), or nullptr if unavailable.
const mindspore::device::DeviceContext *cpu_device_context() {
  static const mindspore::device::DeviceContext *const ctx = []() -> const mindspore::device::DeviceContext * {
    try {
      return mindspore::runtime::OpRunner::GetDeviceContext(mindspore::device::DeviceType::kCPU);
    } catch (...) {
      return nullptr;
    }
  }();
  return ctx;
}

/// An output tensor whose memory comes from MindSpore's CPU memory pool; nullptr on failure.
TensorPtr pool_tensor(TypeId dtype, const Shape &shape) {
  const mindspore::device::DeviceContext *ctx = cpu_device_context();
  if (ctx == nullptr) return nullptr;
  try {
    std::vector<TensorPtr> outs;
    mindspore::kernel::pyboost::PyBoostUtils::CreateOutputTensor(dtype, shape, &outs);
    mindspore::kernel::pyboost::PyBoostUtils::PrepareOpOutputs(ctx, mindspore::kDefaultStreamIndex, outs);
    mindspore::kernel::pyboost::PyBoostUtils::MallocOpOutputs(ctx, outs);
    if (outs.size() != 1 || outs[0] == nullptr || outs[0]->device_address() == nullptr ||
        outs[0]->device_address()->GetMutablePtr() == nullptr) {
      return nullptr;
    }
    return outs[0];
  } catch (...) {
    return nullptr;
  }
}

/// Outputs smaller than this many bytes are plain host tensors: for them malloc + a zero fill
/// (0.2 us at 64 bytes) beats the pool's bookkeeping (0.6 us); from ~4 KB on the pool wins
/// (at 4 KB 0.6 us vs 2.4 us, at 4 MB 3 us vs 600 us, at 64 MB 40 us vs 40 ms).
constexpr size_t kPoolMinBytes = 4096;
}  // namespace

TensorPtr empty(TypeId dtype, const Shape &shape) {
  const int64_t n = numel_of(shape.data(), static_cast<int>(shape.size()));
  if (n > 0 && static_cast<size_t>(n) * mindspore::abstract::TypeIdSize(dtype) >= kPoolMinBytes) {
    if (TensorPtr t = pool_tensor(dtype, shape)) return t;
  }
  return std::make_shared<mindspore::tensor::Tensor>(dtype, shape);
}

void unsupported_dtypes(const char *op, const std::vector<std::string> &names, const std::vector<TypeId> &got,
                        const char *rows) {
  std::string msg = std::string(op) + "(): unsupported dtypes (";
  for (size_t i = 0; i < got.size(); ++i) {
    msg += names[i] + "=" + dtype_name(got[i]);
    if (i + 1 < got.size()) msg += ", ";
  }
  msg += "); supported dtype_format rows: " + std::string(rows);
  throw pybind11::type_error(msg);
}

void kernel_error(const char *op, const std::exception &e) {
  throw pybind11::value_error(std::string(op) + "(): " + e.what());
}

/// Stand-in passed to Function<T>::Apply for an absent optional input: Apply dereferences every
/// TensorPtr argument, so None cannot travel as nullptr. Never written, never differentiated.
const TensorPtr &none() {
  static const TensorPtr sentinel = std::make_shared<mindspore::tensor::Tensor>(mindspore::kNumberTypeFloat32,
                                                                                Shape{0});
  return sentinel;
}

}  // namespace ms
}  // namespace opgen
