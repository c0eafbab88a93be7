// opgen CUDA building blocks: the CUDA side of opgen/kernel.h's portable blocks, for kernel bodies
// compiled as CUDA (a .cu unit that defines OPGEN_DEVICE_CUDA before including anything).
//
// A body is one host function for both devices. On CUDA its views' `data` point to device
// memory and their `shape` to host memory; the blocks read the shapes on the host, copy them
// by value into the kernel's arguments and launch on the current stream:
//
//   opgen::map<MaxIsa>(out, f, ins...)                   out = f(ins...), the inputs broadcast
//   opgen::map_reduce_to<MaxIsa>(grad, iter_shape, f, ins...)   f over iter_shape, summed into grad
//   opgen::reduce_sum / reduce_max(x, kept, out), softmax / softmax_backward(..., axis, ..., log)
//   opgen::gemm(trans_a, trans_b, M, N, K, [alpha,] a, [lda,] b, [ldb, beta,] c [, ldc])   cuBLAS
//                                   with -DOPGEN_CUBLAS (and -lcublas), a tiled kernel without
//   opgen::for_each_index(n, f[, cost])                 f(i) for i < n, a thread per index
//   opgen::check_device_errors()                        throws what device code raised
//   opgen::Workspace<T> ws(n)                           a body's scratch (cudaMallocAsync)
//
// with the CPU signatures (MaxIsa accepted and ignored) and `f` a `__host__ __device__` functor
// (an nvcc --extended-lambda `[=] __host__ __device__ (C x) -> C { ... }` that captures its attrs
// by value). f sees every element in common_compute_t of the element types: float for half and
// bfloat16 (opgen/half.h converts with the hardware's cvt instructions), and sums accumulate in
// float for float and the 16-bit types (as ATen's acc_type), in double for double.
//
// Streams: every launch goes to opgen::cuda::current_stream(), which the framework glue sets
// for the call with `opgen::cuda::StreamScope scope(stream);` (thread-local; the default is
// stream 0, the legacy default stream). The blocks never synchronise the host and never allocate
// (no cudaMalloc, no host heap), so a call can be captured in a CUDA graph.
//
// Errors: a bad shape (inputs that do not broadcast, more than kMaxDims dimensions after merging)
// throws opgen::Error on the host before the launch; a failed launch throws opgen::Error with
// CUDA's error text (cudaGetLastError after each launch). An error found by device code (an
// integer division by zero in opgen::math::div, an index out of range in a body's own functor)
// is raised on the device error word (opgen/device.h) and becomes an opgen::Error when the host
// calls opgen::cuda::check_errors(), which synchronises the stream (checked mode).
//
// The stream and error-text part (current_stream, StreamScope, check) is plain host C++ that g++
// compiles too (it needs cuda_runtime_api.h on the include path): the framework glue, compiled
// by g++ against the framework's headers, includes this header for StreamScope. The blocks
// need nvcc and OPGEN_DEVICE_CUDA.
//
// Shipped with opgen (not generated).
#ifndef OPGEN_CUDA_H_
#define OPGEN_CUDA_H_

#include <cuda_runtime_api.h>
#if defined(OPGEN_CUBLAS) && defined(__CUDACC__) && defined(OPGEN_DEVICE_CUDA)
#include <cublas_v2.h>
#endif

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "opgen/kernel.h"

namespace opgen {
namespace cuda {

// --------------------------------------------------------------------- streams (host)

namespace detail {
/// The calling thread's current stream (one slot per shared library and thread).
OPGEN_HIDDEN inline cudaStream_t &stream_slot() {
  static thread_local cudaStream_t stream = nullptr;
  return stream;
}
}  // namespace detail

/// The stream the CUDA blocks of the calling thread launch on: the innermost live StreamScope's,
/// else stream 0 (the legacy default stream).
inline cudaStream_t current_stream() { return detail::stream_slot(); }

/// Sets the calling thread's current stream while it lives (restores the previous one after):
/// the framework glue wraps a kernel call in `opgen::cuda::StreamScope scope(stream);` with the
/// framework's stream (torch's getCurrentCUDAStream(), MindSpore's aot `stream` argument).
class StreamScope {
 public:
  explicit StreamScope(cudaStream_t stream) : prev_(detail::stream_slot()) { detail::stream_slot() = stream; }
  ~StreamScope() { detail::stream_slot() = prev_; }
  StreamScope(const StreamScope &) = delete;
  StreamScope &operator=(const StreamScope &) = delete;

 private:
  cudaStream_t prev_;
};

/// Throws opgen::Error("<what>: <CUDA error name>: <CUDA error text>") unless `err` is
/// cudaSuccess. Host only.
inline void check(cudaError_t err, const char *what) {
  if (err != cudaSuccess) {
    throw Error(std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
  }
}

}  // namespace cuda
}  // namespace opgen

#if defined(__CUDACC__) && defined(OPGEN_DEVICE_CUDA)

namespace opgen {
namespace cuda {

/// Most dimensions an iteration shape may have after merging (dimensions of size 1 dropped,
/// neighbours that every array walks contiguously merged into one). More throws opgen::Error.
constexpr int kMaxDims = 16;
/// Most dimensions a shape may have before merging.
constexpr int kMaxRank = 64;
/// Threads per block of the blocks' kernels.
constexpr int kBlockThreads = 256;
/// Most blocks of a grid; grid-stride loops cover larger tensors.
constexpr int64_t kMaxBlocks = 65536;

/// Reads this translation unit's device error word (opgen/device.h) on `stream`, SYNCHRONISES
/// the stream, clears the word, and throws opgen::Error with the first code's message
/// (error_message) when one was raised. For checked mode and tests: it costs a synchronisation,
/// so the hot path never calls it. Only the unit that raised the code can read it (one word per
/// .cu unit), so the op's .cu unit exports the call.
static inline void check_errors(cudaStream_t stream = current_stream()) {
  unsigned int word = 0;
  check(cudaMemcpyFromSymbolAsync(&word, detail::error_word, sizeof word, 0, cudaMemcpyDeviceToHost, stream),
        "opgen::cuda::check_errors: reading the device error word");
  check(cudaStreamSynchronize(stream), "opgen::cuda::check_errors: synchronising the stream");
  if (word != kNoError) {
    const unsigned int zero = 0;
    check(cudaMemcpyToSymbolAsync(detail::error_word, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, stream),
          "opgen::cuda::check_errors: clearing the device error word");
    check(cudaStreamSynchronize(stream), "opgen::cuda::check_errors: synchronising the stream");
    throw Error(error_message(word));
  }
}

namespace detail {

/// Throws opgen::Error naming `what` when the last launch failed (cudaGetLastError).
inline void check_launch(const char *what) { check(cudaGetLastError(), what); }

/// Unsigned division by a fixed divisor as a multiply-high and a shift (Granlund and Montgomery;
/// ATen's IntDivider): exact for dividends and divisors below 2^31.
struct FastDiv {
  uint32_t divisor = 1, magic = 1, shift = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t d) : divisor(d) {
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ uint32_t div(uint32_t n) const { return (__umulhi(n, magic) + n) >> shift; }
};

/// The iteration space of a launch as the kernel sees it (by value, in its arguments): `ndim`
/// merged dimensions, innermost first, and for each of N arrays its stride (elements) along
/// each. Index is uint32_t (FastDiv) when every index fits in 31 bits, else int64_t.
template <int N, typename Index>
struct Offsets {
  static constexpr int kArrays = N > 0 ? N : 1;
  int ndim = 0;
  Index sizes[kMaxDims] = {};
  FastDiv divs[kMaxDims] = {};
  Index strides[kMaxDims][kArrays] = {};

  /// off[k] = the offset in array k of the element at flat index i (row-major over the dims).
  __device__ void get(Index i, Index (&off)[kArrays]) const {
#pragma unroll
    for (int k = 0; k < kArrays; ++k) off[k] = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      Index q;
      if constexpr (std::is_same_v<Index, uint32_t>) {
        q = divs[d].div(i);
      } else {
        q = i / sizes[d];
      }
      const Index r = i - q * sizes[d];
#pragma unroll
      for (int k = 0; k < kArrays; ++k) off[k] += r * strides[d][k];
      i = q;
    }
  }
};

/// A merged iteration space on the host (innermost dimension first).
template <int N>
struct Plan {
  static constexpr int kArrays = N > 0 ? N : 1;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims][kArrays] = {};
};

[[noreturn]] inline void too_many_dims(const char *who, int ndim, int limit) {
  throw Error(std::string(who) + " on CUDA: " + std::to_string(ndim) + " dimensions, at most " +
              std::to_string(limit));
}

/// The merged plan of `nd` iteration dims (`iter`, outermost first) for N arrays of shapes
/// shapes[k] (ndims[k] dims) broadcast to it. Throws opgen::Error when an array does not
/// broadcast to `iter` (broadcast_strides's message) or more than kMaxDims dims remain.
template <int N>
Plan<N> make_plan(const char *who, const int64_t *iter, int nd, const int64_t *const *shapes, const int *ndims) {
  constexpr int A = Plan<N>::kArrays;
  if (nd > kMaxRank) too_many_dims(who, nd, kMaxRank);
  int64_t st[kMaxRank][A] = {};
  for (int k = 0; k < N; ++k) {
    const int64_t *s = shapes[k];
    const int in_nd = ndims[k];
    int64_t stride = 1;
    for (int i = in_nd - 1; i >= 0; --i) {
      const int back = in_nd - i;
      if (back > nd || (s[i] != 1 && s[i] != iter[nd - back])) {
        throw Error("an input of shape " + shape_str(Shape(s, s + in_nd)) + " does not broadcast to the output shape " +
                    shape_str(Shape(iter, iter + nd)));
      }
      st[nd - back][k] = s[i] == 1 ? 0 : stride;
      stride *= s[i];
    }
  }
  Plan<N> p;
  for (int d = nd - 1; d >= 0; --d) {  // innermost first
    if (iter[d] == 1) continue;
    if (p.ndim > 0) {
      const int j = p.ndim - 1;
      bool merge = true;
      for (int k = 0; k < N && merge; ++k) merge = st[d][k] == p.strides[j][k] * p.sizes[j];
      if (merge) {
        p.sizes[j] *= iter[d];
        continue;
      }
    }
    if (p.ndim == kMaxDims) too_many_dims(who, nd, kMaxDims);
    p.sizes[p.ndim] = iter[d];
    for (int k = 0; k < N; ++k) p.strides[p.ndim][k] = st[d][k];
    ++p.ndim;
  }
  return p;
}

/// Dims `dims[0..n)` of `p`, as the kernel's Offsets.
template <typename Index, int N>
Offsets<N, Index> offsets_of(const Plan<N> &p, const int *dims, int n) {
  Offsets<N, Index> o;
  o.ndim = n;
  for (int t = 0; t < n; ++t) {
    const int d = dims[t];
    o.sizes[t] = static_cast<Index>(p.sizes[d]);
    if constexpr (std::is_same_v<Index, uint32_t>) o.divs[t] = FastDiv(static_cast<uint32_t>(p.sizes[d]));
    for (int k = 0; k < Plan<N>::kArrays; ++k) o.strides[t][k] = static_cast<Index>(p.strides[d][k]);
  }
  return o;
}

/// V elements of T loaded or stored as one access (16 bytes at most).
template <int V, typename T>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

/// Elements per vector access of map's contiguous loop: 16 bytes of its widest element type.
template <typename... T>
constexpr int vec_width() {
  constexpr size_t widest = std::max({sizeof(T)...});
  return widest >= 16 ? 1 : static_cast<int>(16 / widest);
}

template <int V, typename T>
inline bool aligned_for(const T *p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * V) == 0;
}

template <int V, typename OutE, typename C, typename F, typename... InE>
__device__ __forceinline__ void apply_packs(OutE *o, const F &f, const Pack<V, InE>... p) {
  Pack<V, OutE> r;
#pragma unroll
  for (int j = 0; j < V; ++j) r.v[j] = static_cast<OutE>(f(static_cast<C>(p.v[j])...));
  *reinterpret_cast<Pack<V, OutE> *>(o) = r;
}

/// out[i] = f(ins[i]...) for i in [0, n), every array contiguous: a grid-stride loop of V-element
/// vector accesses (every pointer aligned to V elements), then the n % V tail.
template <int V, typename OutE, typename C, typename F, typename... InE>
__global__ void __launch_bounds__(kBlockThreads) map_flat_kernel(int64_t n, F f, OutE *out, const InE *...ins) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nv = n / V;
  for (int64_t v = first; v < nv; v += step) {
    apply_packs<V, OutE, C>(out + v * V, f, reinterpret_cast<const Pack<V, InE> *>(ins)[v]...);
  }
  for (int64_t i = nv * V + first; i < n; i += step) out[i] = static_cast<OutE>(f(static_cast<C>(ins[i])...));
}

template <typename C, typename F, typename Index, size_t... K, typename... InE>
__device__ __forceinline__ auto call_at(const F &f, const Index *off, std::index_sequence<K...>, const InE *...ins) {
  return f(static_cast<C>(ins[off[K]])...);
}

/// out[i] = f(ins[offsets(i)]...) for i in [0, n): out contiguous, the inputs broadcast.
template <typename OutE, typename C, typename Index, int N, typename F, typename... InE>
__global__ void __launch_bounds__(kBlockThreads)
    map_offsets_kernel(Index n, Offsets<N, Index> oc, F f, OutE *out, const InE *...ins) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    Index off[Offsets<N, Index>::kArrays];
    oc.get(i, off);
    out[i] = static_cast<OutE>(call_at<C>(f, off, std::index_sequence_for<InE...>{}, ins...));
  }
}

/// The accumulator of sums of C: float for float (and so for half and bfloat16), else C.
template <typename C>
using acc_t = C;

/// The combining operation of a reduction: a + b, from `init` (0).
template <typename A>
struct SumOp {
  A init;
  __device__ A operator()(A a, A b) const { return a + b; }
};

/// The larger of a and b, NaN when either is (a NaN sticks), from `init` (-inf, or the lowest
/// integer).
template <typename A>
struct MaxOp {
  A init;
  __device__ A operator()(A a, A b) const { return (b > a || b != b) ? b : a; }
};

/// What a reduction stores: its accumulator as it is, or times `scale` (a mean).
struct NoScale {
  template <typename A>
  OPGEN_HD A operator()(A a) const {
    return a;
  }
};
template <typename A>
struct Scale {
  A scale;
  OPGEN_HD A operator()(A a) const { return a * scale; }
};

/// out[m] = fin(op over r in [0, R) of f(ins at (kept m, reduced r))): a block of kBlockThreads
/// threads is `tm` outputs x (kBlockThreads / tm) lanes; each lane combines every lanes-th r in
/// order, then the lanes are combined pairwise in shared memory (an order that depends on the
/// shapes alone). `m_fast`: consecutive threads take consecutive outputs (the innermost dim is
/// kept: coalesced loads along m); else consecutive lanes take consecutive r (a warp or a block
/// per output along a reduced innermost dim). Grid-stride over tiles of `tm` outputs.
template <typename OutE, typename C, typename A, typename Index, int N, typename F, typename Op, typename Fin,
          typename... InE>
__global__ void __launch_bounds__(kBlockThreads)
    reduce_kernel(Index M, Index R, int tm, bool m_fast, Offsets<N, Index> kept, Offsets<N, Index> red, F f, Op op,
                  Fin fin, OutE *out, const InE *...ins) {
  __shared__ A partial[kBlockThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int tr = kBlockThreads / tm;
  const int lane_m = m_fast ? tid % tm : tid / tr;
  const int lane_r = m_fast ? tid / tm : tid % tr;
  constexpr int NA = Offsets<N, Index>::kArrays;
  for (Index m0 = static_cast<Index>(blockIdx.x) * tm; m0 < M; m0 += static_cast<Index>(gridDim.x) * tm) {
    const Index m = m0 + lane_m;
    A acc = op.init;
    if (m < M) {
      Index base[NA];
      kept.get(m, base);
      for (Index r = lane_r; r < R; r += tr) {
        Index off[NA];
        red.get(r, off);
#pragma unroll
        for (int k = 0; k < NA; ++k) off[k] += base[k];
        acc = op(acc, static_cast<A>(call_at<C>(f, off, std::index_sequence_for<InE...>{}, ins...)));
      }
    }
    partial[lane_r * tm + lane_m] = acc;
    __syncthreads();
    for (int s = tr / 2; s > 0; s /= 2) {
      if (lane_r < s) partial[lane_r * tm + lane_m] = op(partial[lane_r * tm + lane_m], partial[(lane_r + s) * tm + lane_m]);
      __syncthreads();
    }
    if (lane_r == 0 && m < M) out[m] = static_cast<OutE>(fin(partial[lane_m]));
    __syncthreads();
  }
}

inline int grid_for(int64_t work_items, int per_block) {
  const int64_t blocks = (work_items + per_block - 1) / per_block;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(blocks, kMaxBlocks)));
}

inline int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

constexpr int64_t kIndex32Limit = int64_t{1} << 31;

/// out (shape `shape`, `ndim` dims, `numel` elements, contiguous) = f(ins...) broadcast.
template <typename OutE, typename C, typename F, typename... InE>
void map_launch(const char *who, OutE *out, const int64_t *shape, int ndim, int64_t numel, const F &f,
                const In<InE> &...ins) {
  constexpr int N = static_cast<int>(sizeof...(InE));
  const bool flat = ((ins.numel == numel && ins.ndim == ndim && std::equal(shape, shape + ndim, ins.shape)) && ... &&
                     true);
  const cudaStream_t stream = current_stream();
  if (flat) {
    if (numel == 0) return;
    constexpr int V = vec_width<OutE, InE...>();
    if (V > 1 && aligned_for<V>(out) && (aligned_for<V>(ins.data) && ... && true)) {
      map_flat_kernel<V, OutE, C><<<grid_for(numel / V, kBlockThreads), kBlockThreads, 0, stream>>>(numel, f, out,
                                                                                                  ins.data...);
    } else {
      map_flat_kernel<1, OutE, C><<<grid_for(numel, kBlockThreads), kBlockThreads, 0, stream>>>(numel, f, out,
                                                                                              ins.data...);
    }
    check_launch(who);
    return;
  }
  const int64_t *shapes[N > 0 ? N : 1] = {ins.shape...};
  const int ndims[N > 0 ? N : 1] = {ins.ndim...};
  const Plan<N> p = make_plan<N>(who, shape, ndim, shapes, ndims);
  if (numel == 0) return;
  int dims[kMaxDims];
  for (int d = 0; d < p.ndim; ++d) dims[d] = d;
  if (numel < kIndex32Limit) {
    const auto oc = offsets_of<uint32_t>(p, dims, p.ndim);
    map_offsets_kernel<OutE, C><<<grid_for(numel, kBlockThreads), kBlockThreads, 0, stream>>>(
        static_cast<uint32_t>(numel), oc, f, out, ins.data...);
  } else {
    const auto oc = offsets_of<int64_t>(p, dims, p.ndim);
    map_offsets_kernel<OutE, C><<<grid_for(numel, kBlockThreads), kBlockThreads, 0, stream>>>(numel, oc, f, out,
                                                                                            ins.data...);
  }
  check_launch(who);
}

/// A value of every element: what a reduction over nothing gives (0 for a sum, -inf for a max).
template <typename A>
struct Fill {
  A value;
  OPGEN_HD A operator()() const { return value; }
};

/// out (gnumel elements: the shape gshape, which broadcasts to iter, in order) = fin(op over the
/// broadcast dims of f(ins...)), evaluated over iter.
template <typename OutE, typename C, typename A, typename F, typename Op, typename Fin, typename... InE>
void reduce_launch(const char *who, OutE *out, const int64_t *gshape, int gndim, int64_t gnumel, const int64_t *iter,
                   int nd, const F &f, const Op &op, const Fin &fin, const In<InE> &...ins) {
  constexpr int N = static_cast<int>(sizeof...(InE)) + 1;  // the inputs, then out
  const int64_t *shapes[N] = {ins.shape..., gshape};
  const int ndims[N] = {ins.ndim..., gndim};
  const Plan<N> p = make_plan<N>(who, iter, nd, shapes, ndims);
  if (gnumel == 0) return;
  int64_t total = 1;
  for (int d = 0; d < nd; ++d) total *= iter[d];
  if (total == 0) {  // a reduction over nothing
    map_launch<OutE, A>(who, out, gshape, gndim, gnumel, Fill<A>{fin(op.init)});
    return;
  }
  int kept[kMaxDims], red[kMaxDims], nk = 0, nr = 0;
  int64_t M = 1, R = 1;
  for (int d = 0; d < p.ndim; ++d) {
    if (p.strides[d][N - 1] != 0) {
      kept[nk++] = d;
      M *= p.sizes[d];
    } else {
      red[nr++] = d;
      R *= p.sizes[d];
    }
  }
  // innermost merged dim kept: threads along the outputs (32 of them, fewer down to 8 when that
  // leaves under 1024 blocks: 8 floats are one 32-byte sector); else lanes along the reduced dim
  // (a warp per output when there are many, up to a block when there are few)
  const bool m_fast = nk > 0 && kept[0] == 0;
  int tm;
  if (m_fast) {
    tm = static_cast<int>(std::min<int64_t>(32, next_pow2(M)));
    while (tm > 8 && (M + tm - 1) / tm < 1024) tm /= 2;
  } else {
    const int64_t tr = std::min<int64_t>(M >= 1024 ? 32 : kBlockThreads, next_pow2(R));
    tm = static_cast<int>(kBlockThreads / tr);
  }
  const int grid = grid_for(M, tm);
  const cudaStream_t stream = current_stream();
  if (total < kIndex32Limit) {
    reduce_kernel<OutE, C, A><<<grid, kBlockThreads, 0, stream>>>(
        static_cast<uint32_t>(M), static_cast<uint32_t>(R), tm, m_fast, offsets_of<uint32_t>(p, kept, nk),
        offsets_of<uint32_t>(p, red, nr), f, op, fin, out, ins.data...);
  } else {
    reduce_kernel<OutE, C, A><<<grid, kBlockThreads, 0, stream>>>(M, R, tm, m_fast, offsets_of<int64_t>(p, kept, nk),
                                                                  offsets_of<int64_t>(p, red, nr), f, op, fin, out,
                                                                  ins.data...);
  }
  check_launch(who);
}

/// f(v) == v.
struct Identity {
  template <typename C>
  OPGEN_HD C operator()(C v) const {
    return v;
  }
};

/// The lowest value of A: -inf for a floating type, the minimum of an integer.
template <typename A>
A lowest() {
  if constexpr (std::numeric_limits<A>::has_infinity) {
    return -std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::lowest();
  }
}

template <typename E, typename OutE>
void check_reduction(const char *who, const In<E> &x, const Shape &kept, const Out<OutE> &out) {
  if (static_cast<int>(kept.size()) != x.ndim) {
    throw Error(std::string(who) + ": kept shape " + shape_str(kept) + " does not have the rank of the input " +
                shape_str(x.shape_vector()));
  }
  if (numel_of(kept.data(), static_cast<int>(kept.size())) != out.numel) {
    throw Error(std::string(who) + ": the output has " + std::to_string(out.numel) + " elements, the kept shape " +
                shape_str(kept) + " " + std::to_string(numel_of(kept.data(), static_cast<int>(kept.size()))));
  }
}

/// op over the values of a block's kBlockThreads threads, in every thread: warp shuffles, then
/// the warps' results through shared memory (`scratch`: 32 A of __shared__ memory). Not
/// cub::BlockReduce: CUB's headers include cuda_fp16.h, whose global `half` typedef clashes with
/// a body's `using opgen::half;`, and add seconds to every unit.
template <typename A, typename Op>
__device__ A block_all_reduce(A v, Op op, A *scratch) {
  constexpr int kWarps = kBlockThreads / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
#pragma unroll
  for (int d = 16; d > 0; d /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, d));
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[lane < kWarps ? lane : 0];
#pragma unroll
  for (int d = kWarps / 2; d > 0; d /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, d));  // lanes 0..kWarps-1
  v = __shfl_sync(0xffffffffu, v, 0);
  __syncthreads();  // scratch is reused by the next call
  return v;
}

struct AddFn {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
struct MaxFn {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return (b > a || b != b) ? b : a;
  }
};

/// Softmax (log-softmax) of `rows` contiguous rows of n: a block per row (grid-stride), three
/// passes: the max, the sum of exp(x - max) in A, the output.
template <typename E, typename OutE, typename C, typename A>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_rows_kernel(const E *x, OutE *out, int64_t rows, int64_t n, bool log, C minus_inf) {
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const E *p = x + r * n;
    OutE *q = out + r * n;
    C m = minus_inf;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) m = MaxFn{}(m, C(p[k]));
    m = C(block_all_reduce(A(m), MaxFn{}, scratch));
    A sum = A(0);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) sum += A(math::exp(C(p[k]) - m));
    sum = block_all_reduce(sum, AddFn{}, scratch);
    if (log) {
      const C lse = m + C(math::log(sum));
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) q[k] = OutE(C(p[k]) - lse);
    } else {
      const C inv = C(A(1) / sum);
      for (int64_t k = threadIdx.x; k < n; k += blockDim.x) q[k] = OutE(math::exp(C(p[k]) - m) * inv);
    }
  }
}

/// Softmax along the middle axis of (outer, n, inner), inner > 1: a thread per (outer, inner)
/// column (coalesced along inner), three passes over its n elements.
template <typename E, typename OutE, typename C, typename A>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_cols_kernel(const E *x, OutE *out, int64_t outer, int64_t n, int64_t inner, bool log, C minus_inf) {
  const int64_t cols = outer * inner;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, j = c - o * inner;
    const E *p = x + o * n * inner + j;
    OutE *q = out + o * n * inner + j;
    C m = minus_inf;
    for (int64_t k = 0; k < n; ++k) m = MaxFn{}(m, C(p[k * inner]));
    A sum = A(0);
    for (int64_t k = 0; k < n; ++k) sum += A(math::exp(C(p[k * inner]) - m));
    if (log) {
      const C lse = m + C(math::log(sum));
      for (int64_t k = 0; k < n; ++k) q[k * inner] = OutE(C(p[k * inner]) - lse);
    } else {
      const C inv = C(A(1) / sum);
      for (int64_t k = 0; k < n; ++k) q[k * inner] = OutE(math::exp(C(p[k * inner]) - m) * inv);
    }
  }
}

/// Softmax's gradient over contiguous rows: a block per row, dot = sum(dy * y) (sum(dy) for log).
template <typename E, typename OutE, typename C, typename A>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_backward_rows_kernel(const E *y, const E *dy, OutE *dx, int64_t rows, int64_t n, bool log) {
  __shared__ A scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const E *yp = y + r * n, *gp = dy + r * n;
    OutE *q = dx + r * n;
    A dot = A(0);
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) dot += log ? A(C(gp[k])) : A(C(gp[k]) * C(yp[k]));
    const C d = C(block_all_reduce(dot, AddFn{}, scratch));
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
      q[k] = log ? OutE(C(gp[k]) - math::exp(C(yp[k])) * d) : OutE(C(yp[k]) * (C(gp[k]) - d));
  }
}

/// Softmax's gradient along the middle axis, inner > 1: a thread per column.
template <typename E, typename OutE, typename C, typename A>
__global__ void __launch_bounds__(kBlockThreads) softmax_backward_cols_kernel(const E *y, const E *dy, OutE *dx,
                                                                              int64_t outer, int64_t n, int64_t inner,
                                                                              bool log) {
  const int64_t cols = outer * inner;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, j = c - o * inner;
    const int64_t base = o * n * inner + j;
    A dot = A(0);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = base + k * inner;
      dot += log ? A(C(dy[i])) : A(C(dy[i]) * C(y[i]));
    }
    const C d = C(dot);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = base + k * inner;
      dx[i] = log ? OutE(C(dy[i]) - math::exp(C(y[i])) * d) : OutE(C(y[i]) * (C(dy[i]) - d));
    }
  }
}

}  // namespace detail

// The public blocks are defined in opgen::cuda and named in opgen by using-declarations: a library
// that holds an op's CPU unit and its CUDA unit then has two functions, opgen::reduce_sum<float,
// float> (CPU) and opgen::cuda::reduce_sum<float, float>, where one name for both would be one
// weak symbol that the linker keeps once, for both units.

/// out[i] = f(ins[broadcast(i)]...) over out's shape, on the current CUDA stream
/// (opgen::cuda::current_stream()): out and ins are views of device memory (shapes on the host),
/// of any element types; f is a `__host__ __device__` functor called with common_compute_t
/// values (float for half and bfloat16), its result converted to out's type. Inputs of out's
/// shape run a vectorised grid-stride loop (16-byte accesses when every pointer is aligned);
/// broadcast inputs an offset calculator (shapes and strides in the kernel's arguments, at most
/// cuda::kMaxDims dims after merging). MaxIsa is accepted and ignored (the CPU's vector ISA cap).
/// Throws opgen::Error when an input does not broadcast to out, when the shape has too many
/// dims, or when the launch fails. Asynchronous: no host synchronisation, no allocation.
template <int MaxIsa = 2, typename OutE, typename F, typename... InE>
void map(Out<OutE> out, F &&f, In<InE>... ins) {
  using C = common_compute_t<OutE, InE...>;
  cuda::detail::map_launch<OutE, C>("opgen::map", out.data, out.shape, out.ndim, out.numel, f, ins...);
}

/// Evaluates f over `iter_shape` (the broadcast output shape) and sums the results into `grad`,
/// whose shape broadcasts to `iter_shape` (the gradient of a broadcast input), on the current
/// CUDA stream: device views, a `__host__ __device__` f as for map. grad of iter_shape's own
/// shape is a map; otherwise each output element sums its reduced indices on the device (a
/// block's threads along the outputs when the innermost dim is kept, a warp or a block per
/// output when it is reduced) in acc_t (float for float, half and bfloat16; double for double),
/// in an order that depends on the shapes alone. Throws opgen::Error as map does.
template <int MaxIsa = 2, typename OutE, typename F, typename... InE>
void map_reduce_to(Out<OutE> grad, const Shape &iter_shape, F &&f, In<InE>... ins) {
  using C = common_compute_t<OutE, InE...>;
  const bool same = static_cast<size_t>(grad.ndim) == iter_shape.size() &&
                    std::equal(grad.shape, grad.shape + grad.ndim, iter_shape.begin());
  if (same) {
    cuda::detail::map_launch<OutE, C>("opgen::map_reduce_to", grad.data, grad.shape, grad.ndim, grad.numel, f, ins...);
    return;
  }
  using A = cuda::detail::acc_t<C>;
  cuda::detail::reduce_launch<OutE, C, A>("opgen::map_reduce_to", grad.data, grad.shape, grad.ndim, grad.numel,
                                          iter_shape.data(), static_cast<int>(iter_shape.size()), f,
                                          cuda::detail::SumOp<A>{A(0)}, cuda::detail::NoScale{}, ins...);
}

/// out (kept elements, in order) = the sum of x over the axes where `kept` (x's shape with 1 on
/// the reduced axes: reduce_shape(..., true)) is 1, times `scale` (1 / count for a mean), on the
/// current CUDA stream: device views, any axes (a warp or a block per output along reduced
/// innermost axes, threads along the outputs otherwise), sums in detail::acc_t (float for float,
/// half and bfloat16; the CPU sums floats in double). The CPU signature. Throws opgen::Error when
/// `kept` does not fit x or out, or when the launch fails.
template <typename E, typename OutE>
void reduce_sum(const In<E> &x, const Shape &kept, const Out<OutE> &out, sum_t<E> scale = 1) {
  using C = compute_t<E>;
  using A = cuda::detail::acc_t<C>;
  cuda::detail::check_reduction("opgen::reduce_sum", x, kept, out);
  const int nd = static_cast<int>(kept.size());
  cuda::detail::reduce_launch<OutE, C, A>("opgen::reduce_sum", out.data, kept.data(), nd, out.numel, x.shape, x.ndim,
                                          cuda::detail::Identity{}, cuda::detail::SumOp<A>{A(0)},
                                          cuda::detail::Scale<A>{A(scale)}, x);
}

/// out = the largest element of x over the reduced axes of `kept` (NaN when any is NaN, -inf for
/// an empty group; the lowest value for integers), on the current CUDA stream; as reduce_sum.
template <typename E, typename OutE>
void reduce_max(const In<E> &x, const Shape &kept, const Out<OutE> &out) {
  using C = compute_t<E>;
  cuda::detail::check_reduction("opgen::reduce_max", x, kept, out);
  const int nd = static_cast<int>(kept.size());
  cuda::detail::reduce_launch<OutE, C, C>("opgen::reduce_max", out.data, kept.data(), nd, out.numel, x.shape, x.ndim,
                                          cuda::detail::Identity{}, cuda::detail::MaxOp<C>{cuda::detail::lowest<C>()},
                                          cuda::detail::NoScale{}, x);
}

/// Softmax (or log-softmax with `log`) of x along `axis` (normalised), on the current CUDA stream:
/// a block per row (warp shuffles for the max and the sum) when `axis` is the last one of
/// size > 1, a thread per column otherwise; exp sums in detail::acc_t. A NaN in a group makes it
/// NaN. The CPU signature; throws opgen::Error when the launch fails.
template <typename E, typename OutE>
void softmax(const In<E> &x, int64_t axis, const Out<OutE> &out, bool log = false) {
  using C = compute_t<E>;
  using A = cuda::detail::acc_t<C>;
  const AxisSplit s = x.ndim ? split_axis(x.shape, x.ndim, axis) : AxisSplit{};
  if (x.numel == 0) return;
  const cudaStream_t stream = cuda::current_stream();
  const C minus_inf = cuda::detail::lowest<C>();
  if (s.inner == 1) {
    cuda::detail::softmax_rows_kernel<E, OutE, C, A><<<cuda::detail::grid_for(s.outer, 1), cuda::kBlockThreads, 0,
                                                       stream>>>(x.data, out.data, s.outer, s.n, log, minus_inf);
  } else {
    cuda::detail::softmax_cols_kernel<E, OutE, C, A>
        <<<cuda::detail::grid_for(s.outer * s.inner, cuda::kBlockThreads), cuda::kBlockThreads, 0, stream>>>(
            x.data, out.data, s.outer, s.n, s.inner, log, minus_inf);
  }
  cuda::detail::check_launch("opgen::softmax");
}

/// Gradient of softmax (or log-softmax) along `axis` from its output y and the output gradient
/// dy, on the current CUDA stream: dx = y * (dy - sum(dy * y)), or dy - exp(y) * sum(dy); the
/// schedule of softmax. The CPU signature; throws opgen::Error when the launch fails.
template <typename E, typename OutE>
void softmax_backward(const In<E> &y, const In<E> &dy, int64_t axis, const Out<OutE> &dx, bool log = false) {
  using C = compute_t<E>;
  using A = cuda::detail::acc_t<C>;
  const AxisSplit s = y.ndim ? split_axis(y.shape, y.ndim, axis) : AxisSplit{};
  if (y.numel == 0) return;
  const cudaStream_t stream = cuda::current_stream();
  if (s.inner == 1) {
    cuda::detail::softmax_backward_rows_kernel<E, OutE, C, A>
        <<<cuda::detail::grid_for(s.outer, 1), cuda::kBlockThreads, 0, stream>>>(y.data, dy.data, dx.data, s.outer,
                                                                                  s.n, log);
  } else {
    cuda::detail::softmax_backward_cols_kernel<E, OutE, C, A>
        <<<cuda::detail::grid_for(s.outer * s.inner, cuda::kBlockThreads), cuda::kBlockThreads, 0, stream>>>(
            y.data, dy.data, dx.data, s.outer, s.n, s.inner, log);
  }
  cuda::detail::check_launch("opgen::softmax_backward");
}

// ------------------------------------------------------------------ for_each_index (portable)

namespace detail {
/// f(i) for every i in [0, n): a grid-stride loop (64-bit indices).
template <typename F>
__global__ void for_each_kernel(int64_t n, F f) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) f(i);
}
}  // namespace detail

/// Calls f(i) once for every i in [0, n) on the current CUDA stream, a thread per index (a
/// grid-stride loop of kBlockThreads-thread blocks): opgen/kernel.h's portable loop. f is a
/// `__host__ __device__` functor (OPGEN_LAMBDA(int64_t i) {...}) capturing by value; `cost` (the
/// CPU's chunk size) is ignored. Throws opgen::Error when the launch fails. Asynchronous.
template <typename F>
void for_each_index(int64_t n, F &&f, int64_t cost = 1) {
  (void)cost;
  if (n <= 0) return;
  detail::for_each_kernel<std::decay_t<F>>
      <<<detail::grid_for(n, kBlockThreads), kBlockThreads, 0, current_stream()>>>(n, f);
  detail::check_launch("opgen::for_each_index");
}

/// Scratch memory of a kernel body on CUDA: `n` elements of T (uninitialised) of device memory
/// from the stream-ordered allocator (cudaMallocAsync on the current stream; cudaFreeAsync on the
/// same stream when it goes out of scope), for the body's launches on that stream. The CPU
/// signature (opgen/kernel.h). Throws opgen::Error when the allocation fails.
template <typename T>
class Workspace {
 public:
  explicit Workspace(int64_t n) : stream_(current_stream()) {
    if (n > 0) {
      check(cudaMallocAsync(reinterpret_cast<void **>(&ptr_), sizeof(T) * static_cast<size_t>(n), stream_),
            ("opgen::Workspace: cudaMallocAsync of " + std::to_string(n) + " elements").c_str());
    }
  }
  ~Workspace() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
  }
  Workspace(const Workspace &) = delete;
  Workspace &operator=(const Workspace &) = delete;
  T *data() const { return ptr_; }

 private:
  T *ptr_ = nullptr;
  cudaStream_t stream_;
};

/// After a for_each_index whose functor may call raise_in_kernel: synchronises the current stream
/// and throws the first code raised in this unit (check_errors). A synchronisation per call: a
/// body calls it only where bad input can reach device code (an index, a step count).
static inline void check_device_errors() { check_errors(current_stream()); }

// ------------------------------------------------------------------------- gemm (cuBLAS)

#if defined(OPGEN_CUBLAS)

namespace detail {
/// The calling thread's cuBLAS handle for the current device, created on first use (not inside a
/// CUDA graph capture: call gemm once before capturing) and kept for the life of the process.
OPGEN_HIDDEN inline cublasHandle_t cublas_handle() {
  constexpr int kDevices = 64;
  static thread_local cublasHandle_t handles[kDevices] = {};
  int device = 0;
  check(cudaGetDevice(&device), "opgen::gemm: cudaGetDevice");
  if (device < 0 || device >= kDevices) throw Error("opgen::gemm on CUDA: device " + std::to_string(device));
  if (handles[device] == nullptr) {
    const cublasStatus_t st = cublasCreate(&handles[device]);
    if (st != CUBLAS_STATUS_SUCCESS) {
      handles[device] = nullptr;
      throw Error(std::string("opgen::gemm: cublasCreate: ") + cublasGetStatusString(st));
    }
  }
  return handles[device];
}

/// cuBLAS's data type for T (float, double, half, bfloat16) and the compute type.
template <typename T>
struct BlasType;
template <>
struct BlasType<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};
template <>
struct BlasType<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
};
template <>
struct BlasType<half> {
  static constexpr cudaDataType_t data = CUDA_R_16F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};
template <>
struct BlasType<bfloat16> {
  static constexpr cudaDataType_t data = CUDA_R_16BF;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};
}  // namespace detail


/// c (M x N, leading dimension ldc) = alpha * op(a) @ op(b) + beta * c, row-major, on the current
/// CUDA stream through cuBLAS (cublasGemmEx; half and bfloat16 accumulate in float): device
/// pointers, the CPU signature (blas.h). float, double, half and bfloat16 only. Needs
/// -DOPGEN_CUBLAS and -lcublas; the thread's handle is created on its first call (then no
/// allocation: capturable). Throws opgen::Error when a size exceeds int32 or cuBLAS fails.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, compute_t<T> alpha, const T *a, int64_t lda,
          const T *b, int64_t ldb, compute_t<T> beta, T *c, int64_t ldc) {
  using B = cuda::detail::BlasType<std::remove_cv_t<T>>;
  if (M <= 0 || N <= 0) return;
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  if (M > kMaxInt || N > kMaxInt || K > kMaxInt || lda > kMaxInt || ldb > kMaxInt || ldc > kMaxInt) {
    throw Error("opgen::gemm on CUDA: a size exceeds int32");
  }
  cublasHandle_t handle = cuda::detail::cublas_handle();
  cublasStatus_t st = cublasSetStream(handle, cuda::current_stream());
  // row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T: swap the operands
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, i(N), i(M),
                      i(K), &alpha, b, B::data, i(ldb), a, B::data, i(lda), &beta, c, B::data, i(ldc), B::compute,
                      CUBLAS_GEMM_DEFAULT);
  }
  if (st != CUBLAS_STATUS_SUCCESS) throw Error(std::string("opgen::gemm: cuBLAS: ") + cublasGetStatusString(st));
}

/// c (M x N) = op(a) @ op(b) for contiguous row-major a, b and c (device pointers).
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T *a, const T *b, T *c) {
  gemm(trans_a, trans_b, M, N, K, compute_t<T>(1), a, trans_a ? M : K, b, trans_b ? K : N, compute_t<T>(0), c, N);
}
#else  // no cuBLAS: a tiled kernel of opgen's own

namespace detail {
constexpr int kGemmTile = 16;
/// c = alpha * op(a) @ op(b) + beta * c (row-major, leading dimensions lda, ldb, ldc): a
/// kGemmTile x kGemmTile tile of c per block, the tiles of op(a) and op(b) staged in shared
/// memory, sums in acc_t. c is not read when beta is 0.
template <typename T, typename C, typename A>
__global__ void gemm_tiled_kernel(bool ta, bool tb, int64_t M, int64_t N, int64_t K, A alpha, const T *a, int64_t lda,
                                  const T *b, int64_t ldb, A beta, T *c, int64_t ldc) {
  __shared__ A as[kGemmTile][kGemmTile + 1];
  __shared__ A bs[kGemmTile][kGemmTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = int64_t(blockIdx.y) * kGemmTile + ty, col = int64_t(blockIdx.x) * kGemmTile + tx;
  A acc = A(0);
  for (int64_t k0 = 0; k0 < K; k0 += kGemmTile) {
    const int64_t ka = k0 + tx, kb = k0 + ty;
    as[ty][tx] = row < M && ka < K ? A(C(ta ? a[ka * lda + row] : a[row * lda + ka])) : A(0);
    bs[ty][tx] = kb < K && col < N ? A(C(tb ? b[col * ldb + kb] : b[kb * ldb + col])) : A(0);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kGemmTile; ++kk) acc += as[ty][kk] * bs[kk][tx];
    __syncthreads();
  }
  if (row < M && col < N) {
    T &out = c[row * ldc + col];
    out = T(C(beta == A(0) ? alpha * acc : alpha * acc + beta * A(C(out))));
  }
}
}  // namespace detail

/// c (M x N, leading dimension ldc) = alpha * op(a) @ op(b) + beta * c, row-major, on the current
/// CUDA stream, without cuBLAS (a toolkit without it, as CI's): a shared-memory tiled kernel of
/// opgen's own, sums in float for float, half and bfloat16 and in double for double. Correct for
/// every size, and far from cuBLAS's speed: build with cuBLAS (-DOPGEN_CUBLAS, opgen does when
/// the toolkit has it) for speed. Throws opgen::Error when M needs more than 65535 tile rows or
/// the launch fails.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, compute_t<T> alpha, const T *a, int64_t lda,
          const T *b, int64_t ldb, compute_t<T> beta, T *c, int64_t ldc) {
  using E = std::remove_cv_t<T>;
  using C = compute_t<E>;
  using A = cuda::detail::acc_t<C>;
  constexpr int kTile = cuda::detail::kGemmTile;
  if (M <= 0 || N <= 0) return;
  const int64_t gx = (N + kTile - 1) / kTile, gy = (M + kTile - 1) / kTile;
  if (gy > 65535 || gx > std::numeric_limits<int32_t>::max()) throw Error("opgen::gemm on CUDA: the matrix is too large for the kernel without cuBLAS");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), block(kTile, kTile);
  cuda::detail::gemm_tiled_kernel<E, C, A><<<grid, block, 0, cuda::current_stream()>>>(
      trans_a, trans_b, M, N, K, A(alpha), a, lda, b, ldb, A(beta), c, ldc);
  cuda::detail::check_launch("opgen::gemm");
}

/// c (M x N) = op(a) @ op(b) for contiguous row-major a, b and c (device pointers).
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T *a, const T *b, T *c) {
  gemm(trans_a, trans_b, M, N, K, compute_t<T>(1), a, trans_a ? M : K, b, trans_b ? K : N, compute_t<T>(0), c, N);
}
#endif  // OPGEN_CUBLAS

}  // namespace cuda

using cuda::map;
using cuda::map_reduce_to;
using cuda::reduce_max;
using cuda::reduce_sum;
using cuda::softmax;
using cuda::softmax_backward;
using cuda::for_each_index;
using cuda::check_device_errors;
using cuda::Workspace;
using cuda::gemm;

}  // namespace opgen

#endif  // __CUDACC__ && OPGEN_DEVICE_CUDA

#endif  // OPGEN_CUDA_H_
