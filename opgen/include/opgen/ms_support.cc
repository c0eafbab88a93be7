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

namespace {
/// Offset (elements) of plane `p` of `shape`'s first `nd` axes, for `strides`.
inline int64_t plane_offset(int64_t p, const Shape &shape, const Shape &strides, int nd) {
  int64_t off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    const auto du = static_cast<size_t>(d);
    off += (p % shape[du]) * strides[du];
    p /= shape[du];
  }
  return off;
}

/// out (contiguous, numel elements of `shape`) = the view of `base` with `strides` (elements).
/// Rows of the last axis in parallel, each a copy (stride 1), a fill (stride 0) or a gather; when
/// the next-to-last axis is the one closer together in memory (a transpose), 32 x 32 tiles of
/// the last two axes instead, so that both the reads and the writes of a tile stay in cache.
template <typename U>
void gather_strided(const U *base, const Shape &shape, const Shape &strides, int64_t numel, U *out) {
  const int nd = static_cast<int>(shape.size());
  const int64_t inner = nd ? shape[static_cast<size_t>(nd - 1)] : 1;
  const int64_t step = nd ? strides[static_cast<size_t>(nd - 1)] : 0;
  const int64_t rows = numel / inner;
  if (nd >= 2 && step > 1 && strides[static_cast<size_t>(nd - 2)] < step) {
    constexpr int64_t kTile = 32;
    const int64_t n_rows = shape[static_cast<size_t>(nd - 2)];
    const int64_t row_step = strides[static_cast<size_t>(nd - 2)];
    const int64_t row_tiles = (n_rows + kTile - 1) / kTile;
    parallel_for(rows / n_rows * row_tiles, std::max<int64_t>(1, kParallelGrain / (kTile * inner)),
                 [&](int64_t t0, int64_t t1) {
                   for (int64_t t = t0; t < t1; ++t) {
                     const int64_t plane = t / row_tiles;
                     const int64_t r0 = t % row_tiles * kTile, r1 = std::min(n_rows, r0 + kTile);
                     const U *src = base + plane_offset(plane, shape, strides, nd - 2);
                     U *dst = out + plane * n_rows * inner;
                     for (int64_t k0 = 0; k0 < inner; k0 += kTile) {
                       const int64_t k1 = std::min(inner, k0 + kTile);
                       for (int64_t k = k0; k < k1; ++k) {
                         for (int64_t r = r0; r < r1; ++r) dst[r * inner + k] = src[r * row_step + k * step];
                       }
                     }
                   }
                 });
    return;
  }
  parallel_for(rows, std::max<int64_t>(1, kParallelGrain / inner), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const U *src = base + plane_offset(r, shape, strides, nd - 1);
      U *dst = out + r * inner;
      if (step == 1) {
        std::copy(src, src + inner, dst);
      } else if (step == 0) {
        std::fill(dst, dst + inner, *src);
      } else {
        for (int64_t k = 0; k < inner; ++k) dst[k] = src[k * step];
      }
    }
  });
}

/// A contiguous copy of the non-contiguous CPU tensor `t` (a transpose, slice or broadcast view),
/// made by opgen's parallel loops; nullptr when `t` is not a view opgen reads itself (no storage
/// info or CPU memory, negative strides, an element size other than 1/2/4/8, or strides that
/// would reach outside the memory), which host() then hands to MindSpore's contiguous().
///
/// Why: MindSpore 2.10's contiguous() copies element by element on one thread. square of a
/// 4096 x 1024 float32 view, Function path: a column slice x[:, ::2] 5.9 -> 1.6 ms, a broadcast
/// row 11.3 -> 1.0-1.8 ms, a transpose 16.9 -> 6.9 ms (the builtin on the same views: 6.0, 11.5,
/// 17-19 ms). ExecuteLazyTask() first runs what MindSpore still has queued for the tensor, as
/// its own data sync does; in MindSpore 2.10 a view of a just-computed output read correctly
/// without it too (tests/misuse_runner.py square_view_of_fresh_output, and 90 views of 8 MB
/// outputs of async ops), so this is a guard, not a measured fix.
TensorPtr gather_view(const TensorPtr &t) {
  const auto info = t->storage_info();
  const auto &addr = t->device_address();
  if (info == nullptr || addr == nullptr || addr->GetDeviceType() != mindspore::device::DeviceType::kCPU) {
    return nullptr;
  }
  const Shape &shape = info->shape;
  const Shape &strides = info->strides;
  if (shape.size() != strides.size() || shape != t->shape()) return nullptr;
  const size_t item = mindspore::abstract::TypeIdSize(t->data_type());
  int64_t numel = 1, last = static_cast<int64_t>(info->storage_offset);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0 || strides[d] < 0) return nullptr;
    numel *= shape[d];
    if (shape[d] > 0) last += (shape[d] - 1) * strides[d];
  }
  if (numel == 0 || (item != 1 && item != 2 && item != 4 && item != 8)) return nullptr;
  t->ExecuteLazyTask();  // the view's data may still be being written by an async op
  auto *const mem = static_cast<char *>(addr->GetMutablePtr());
  if (mem == nullptr || static_cast<size_t>(last + 1) * item > addr->GetSize()) return nullptr;
  TensorPtr out = empty(t->data_type(), shape);
  const char *base = mem + info->storage_offset * item;
  void *dst = out->data_c();
  switch (item) {
    case 1: gather_strided(reinterpret_cast<const uint8_t *>(base), shape, strides, numel, static_cast<uint8_t *>(dst)); break;
    case 2: gather_strided(reinterpret_cast<const uint16_t *>(base), shape, strides, numel, static_cast<uint16_t *>(dst)); break;
    case 4: gather_strided(reinterpret_cast<const uint32_t *>(base), shape, strides, numel, static_cast<uint32_t *>(dst)); break;
    default: gather_strided(reinterpret_cast<const uint64_t *>(base), shape, strides, numel, static_cast<uint64_t *>(dst)); break;
  }
  return out;
}
}  // namespace

TensorPtr host(const TensorPtr &t) {
  if (t == nullptr) return t;
  if (t->is_contiguous()) return t->cpu();
  if (TensorPtr c = gather_view(t)) return c;
  return mindspore::kernel::pyboost::contiguous(t)->cpu();
}

void *writable(const TensorPtr &t, const char *op, const char *name) {
  if (!t->is_contiguous()) {
    throw pybind11::value_error(std::string(op) + "(): input '" + name + "' is written in place, so it must be a "
                                "contiguous tensor, not a view of another one (a slice, a transpose); pass a "
                                "contiguous tensor, or write into a copy and assign it back");
  }
  t->ExecuteLazyTask();  // MindSpore's queued work on it first (its last writer)
  const auto &addr = t->device_address();
  if (addr != nullptr) {
    if (addr->GetDeviceType() != mindspore::device::DeviceType::kCPU || addr->GetMutablePtr() == nullptr) {
      throw pybind11::value_error(std::string(op) + "(): input '" + name + "' is written in place, so it must be "
                                  "in CPU memory");
    }
    const auto info = t->storage_info();
    const size_t offset = info == nullptr ? 0 : info->storage_offset * mindspore::abstract::TypeIdSize(t->data_type());
    return static_cast<char *>(addr->GetMutablePtr()) + offset;
  }
  return t->data_c();
}

TensorPtrList split_view(const TensorPtr &dout, int64_t axis, const std::vector<Shape> &shapes) {
  const auto ndim = static_cast<int64_t>(dout->shape().size());
  const int64_t ax = axis < 0 ? axis + ndim : axis;
  TensorPtrList views;
  views.reserve(shapes.size());
  int64_t start = 0;
  for (const Shape &s : shapes) {
    const int64_t length = s.empty() ? 0 : s[static_cast<size_t>(ax)];
    views.push_back(mindspore::kernel::pyboost::narrow_view(dout, ax, start, length));
    start += length;
  }
  return views;
}

TensorPtr unreduce_view(const TensorPtr &dout, const Shape &kept, const Shape &shape) {
  const TensorPtr d = dout->shape() == kept ? dout : mindspore::kernel::pyboost::reshape(dout, kept);
  return kept == shape ? d : mindspore::kernel::pyboost::broadcast_to_view(d, shape);
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

void memory_error(const char *op, const std::bad_alloc &e) {
  PyErr_SetString(PyExc_MemoryError, (std::string(op) + "(): out of memory (" + e.what() + ")").c_str());
  throw pybind11::error_already_set();
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
