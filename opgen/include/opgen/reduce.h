// opgen reductions over axes and row-wise normalisations: the building blocks of reduce_*,
// softmax, log_softmax and layer_norm.
//
// A reduction sees its input as (outer, n, inner): the reduced axes are one run of n elements
// per group, `inner` consecutive groups side by side (the kept axes after the run) and `outer`
// blocks of them (the kept axes before it). Two loops cover every case:
//  - inner == 1 (reduce the last axes, softmax over the last axis): each group is a contiguous
//    row; the loop over a row is a vector reduction (lanes summed separately), rows in
//    parallel;
//  - inner > 1 (reduce a leading or middle axis): n passes over rows of `inner` accumulators,
//    the loop over the accumulators vectorised, blocks of columns in parallel.
// Both run their loops in the AVX-512 or AVX2+FMA copy on CPUs that have them (detail::dispatch_isa).
// Float sums accumulate in double (a float row sum is summed in float by blocks of
// kSumBlock, the block sums in double): a sum over millions of floats keeps its digits.
// Axes that do not form one run (axes 0 and 2 of a 3-d input) fall back to a serial loop.
//
// Under OPGEN_DEVICE_CUDA only the host helpers (sum_t, AxisSplit, split_axis, split_reduction)
// remain; opgen/cuda.h gives reduce_sum, reduce_max, softmax and softmax_backward on CUDA.
//
// Shipped with opgen (not generated). Framework-free: used by the aot and Function<T> paths.
#ifndef OPGEN_REDUCE_H_
#define OPGEN_REDUCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "opgen/kernel.h"

namespace opgen {

/// The type sums of E accumulate in: double for float (and the 16-bit floats), else compute_t.
template <typename E>
using sum_t = std::conditional_t<std::is_same_v<compute_t<E>, float>, double, compute_t<E>>;

/// An input seen as outer x n x inner around its reduced (or normalised) axes.
struct AxisSplit {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};

/// The split around one axis (already normalised to [0, ndim)).
inline AxisSplit split_axis(const int64_t *shape, int ndim, int64_t axis) {
  AxisSplit s;
  for (int i = 0; i < ndim; ++i) (i < axis ? s.outer : i == axis ? s.n : s.inner) *= shape[i];
  return s;
}

/// The split of `shape` reduced to `kept` (the keep_dims shape of the reduction: 1 on reduced
/// axes). False when the reduced axes (of size > 1) do not form one run.
inline bool split_reduction(const Shape &shape, const Shape &kept, AxisSplit &s) {
  s = AxisSplit{};
  int phase = 0;  // 0: kept axes before the run, 1: in the run, 2: kept axes after it
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const bool reduced = kept[d] == 1;
    if (reduced) {
      if (phase == 2) return false;
      phase = 1;
      s.n *= shape[d];
    } else {
      if (phase == 1) phase = 2;
      (phase == 0 ? s.outer : s.inner) *= shape[d];
    }
  }
  if (phase == 0) {  // nothing reduced: every kept element is a group of one
    s.inner = s.outer;
    s.outer = 1;
  }
  return true;
}

#if !defined(OPGEN_DEVICE_CUDA)  // the CPU loops; opgen/cuda.h has the CUDA reduce_sum, softmax...
namespace detail {
constexpr int64_t kSumBlock = 1024;

/// Lanes of lane_sum's accumulators: four 256-bit vectors (32 floats, 16 doubles).
template <typename C>
constexpr int64_t kSumLanes = 128 / static_cast<int64_t>(sizeof(C));
}  // namespace detail

/// The sum over j in [0, n) of f(j) (a C, a compute_t), in detail::kSumLanes lanes: four
/// independent vector adds per step, where one accumulator (an `OPGEN_SIMD_SUM` loop) waits on
/// each add's latency (a row sum of 1024 floats: 355 against 237-256 us per 4096 rows, one
/// thread, AVX2; torch's sum 249 us; AMD EPYC Zen 4, docs/performance.md). Inlined into the
/// caller, so inside parallel_rows (or dispatch_isa) it runs in that ISA's copy. The order of the
/// additions depends on n alone. A row's sum:
/// `const C ss = opgen::lane_sum<C>(D, [&](int64_t j) { return C(xr[j]) * C(xr[j]); });`.
template <typename C, typename F>
inline C lane_sum(int64_t n, F &&f) {
  constexpr int64_t L = detail::kSumLanes<C>;
  const int64_t full = n / L * L;
  C acc[L] = {};
  for (int64_t i = 0; i < full; i += L) {
    OPGEN_SIMD
    for (int64_t k = 0; k < L; ++k) acc[k] += f(i + k);
  }
  C s = 0;
  for (int64_t k = 0; k < L; ++k) s += acc[k];
  for (int64_t i = full; i < n; ++i) s += f(i);
  return s;
}

namespace detail {

/// Sum of p[0..n) in sum_t<E>: blocks of kSumBlock summed by lane_sum in compute_t, block sums
/// in sum_t. The order of the additions depends on n alone, not on the thread count or the ISA.
template <typename E>
sum_t<E> sum_row(const E *p, int64_t n) {
  using C = compute_t<E>;
  sum_t<E> total = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    const E *q = p + b;
    total += lane_sum<C>(std::min(kSumBlock, n - b), [q](int64_t i) { return C(q[i]); });
  }
  return total;
}

/// Largest of p[0..n): NaN when any is NaN, -inf when n == 0.
template <typename E>
compute_t<E> max_row(const E *p, int64_t n) {
  using C = compute_t<E>;
  C m = -std::numeric_limits<C>::infinity();
  int nan = 0;
#if defined(OPGEN_OMP_SIMD)
#pragma omp simd reduction(max : m) reduction(| : nan)
#endif
  for (int64_t i = 0; i < n; ++i) {
    const C v = C(p[i]);
    m = v > m ? v : m;
    nan |= v != v;
  }
  return nan ? std::numeric_limits<C>::quiet_NaN() : m;
}

/// Splits [0, outer * inner) columns into chunks worth a thread (a column costs n loads) and
/// calls f(o, j0, j1) for each run of columns j0..j1 of block o.
template <typename F>
void for_columns(const AxisSplit &s, F &&f) {
  const int64_t grain = std::max<int64_t>(16, kParallelGrain / std::max<int64_t>(1, s.n));
  parallel_for(s.outer * s.inner, grain, [&](int64_t b, int64_t e) {
    dispatch_isa([&] {
      for (int64_t i = b; i < e;) {
        const int64_t o = i / s.inner, j0 = i % s.inner;
        const int64_t j1 = std::min(s.inner, j0 + (e - i));
        f(o, j0, j1);
        i += j1 - j0;
      }
    });
  });
}

/// The widest ISA for sums along a row: AVX2. A row sum is a memory-bound reduction into one
/// vector, and its AVX-512 copy is slower (4096 rows of 1024 floats, two threads, g++ 12 -O3:
/// 485 us against 391 us for AVX2, which reads 43 GB/s, the machine's limit for a 16 MB input;
/// one thread 835 against 615 us). Column sums and the other row loops keep AVX-512.
constexpr int kRowSumIsa = 1;

/// Calls f(r0, r1) for ranges of rows of n elements, in parallel, each range from the copy of
/// the code for the widest ISA up to MaxLevel (see dispatch_isa).
template <int MaxLevel = 2, typename F>
void for_rows(int64_t rows, int64_t n, F &&f) {
  parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n)),
               [&](int64_t r0, int64_t r1) { dispatch_isa<MaxLevel>([&] { f(r0, r1); }); });
}
}  // namespace detail

/// Calls f(r0, r1) for ranges of the `rows` rows of `n` elements each, in parallel (a chunk worth
/// kParallelGrain elements), from the AVX-512 or AVX2+FMA copy of f on CPUs that have them: the
/// row loop of a kernel body (layer_norm, rms_norm), whose OPGEN_SIMD loops would otherwise be
/// compiled for the baseline ISA only (SSE2: 4 floats per instruction, no FMA).
template <typename F>
void parallel_rows(int64_t rows, int64_t n, F &&f) {
  detail::for_rows(rows, n, f);
}

namespace detail {
/// Most row blocks of parallel_rows_sum: its result does not depend on the thread count up to
/// this many threads.
constexpr int64_t kRowSumBlocks = 8;
/// Most rows a float accumulator of parallel_rows_sum sums before it is added to the block's
/// sum_t (double) total.
constexpr int64_t kRowSumRun = 64;
}  // namespace detail

/// Rows in parallel that also sum `width` values over every row (column sums: layer_norm's
/// dgamma and dbeta beside dx, in the same pass over x and dy, as ATen's layer_norm backward).
/// Calls f(r0, r1, acc) for runs of consecutive rows of `n` elements each, from the AVX-512 or
/// AVX2+FMA copy of f (as parallel_rows), where `acc` points to `width` accumulators of type C
/// (a compute_t), zero at the call, to which f adds each row's terms. Returns their total over
/// every row in sum_t<C> (double for float: a float accumulator sums at most kRowSumRun rows, as
/// sum_row sums a row by blocks; the loop over it stays one vector width).
/// The rows are split into at most max(kRowSumBlocks, num_threads()) blocks of at least
/// max(4, kParallelGrain / n) rows, by their count alone, and the blocks' totals are added in
/// row order: the result is the same for any number of threads up to kRowSumBlocks.
/// Memory: `width` values of sum_t<C> per block, and `width` of C per thread.
template <typename C, typename F>
std::vector<sum_t<C>> parallel_rows_sum(int64_t rows, int64_t n, int64_t width, F &&f) {
  using A = sum_t<C>;
  const int64_t min_rows = std::max<int64_t>(4, kParallelGrain / std::max<int64_t>(1, n));
  const int64_t most = std::max<int64_t>(detail::kRowSumBlocks, num_threads());
  const int64_t blocks = std::max<int64_t>(1, std::min(most, rows / min_rows));
  const int64_t per = rows > 0 ? (rows + blocks - 1) / blocks : 0;
  const size_t w = static_cast<size_t>(std::max<int64_t>(0, width));
  std::vector<A> total(static_cast<size_t>(blocks) * w, A(0));
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<C> run(std::is_same_v<A, C> ? 0 : w);
    detail::dispatch_isa([&] {
      for (int64_t b = b0; b < b1; ++b) {
        A *t = total.data() + static_cast<size_t>(b) * w;
        const int64_t e = std::min(rows, b * per + per);
        if constexpr (std::is_same_v<A, C>) {
          if (b * per < e) f(b * per, e, t);
        } else {
          for (int64_t r0 = b * per; r0 < e; r0 += detail::kRowSumRun) {
            std::fill(run.begin(), run.end(), C(0));
            f(r0, std::min(e, r0 + detail::kRowSumRun), run.data());
            const C *p = run.data();
            OPGEN_SIMD
            for (size_t j = 0; j < w; ++j) t[j] += A(p[j]);
          }
        }
      }
    });
  });
  for (int64_t b = 1; b < blocks; ++b) {
    const A *p = total.data() + static_cast<size_t>(b) * w;
    for (size_t j = 0; j < w; ++j) total[j] += p[j];
  }
  total.resize(w);
  return total;
}

/// out (kept elements, in order) = sum of x over the reduced axes of `kept` (x's shape with 1
/// on the reduced axes), times `scale` (1 / count for a mean).
template <typename E, typename OutE>
void reduce_sum(const In<E> &x, const Shape &kept, const Out<OutE> &out, sum_t<E> scale = 1) {
  using A = sum_t<E>;
  const Shape shape = x.shape_vector();
  AxisSplit s;
  if (!split_reduction(shape, kept, s)) {
    std::vector<A> acc(static_cast<size_t>(out.numel), A(0));
    BroadcastCursor<1> cur(shape, {broadcast_strides(shape, kept.data(), static_cast<int>(kept.size()))});
    for (int64_t i = 0; i < x.numel; ++i, cur.next()) acc[static_cast<size_t>(cur.offset[0])] += A(x[i]);
    for (int64_t i = 0; i < out.numel; ++i) out[i] = OutE(acc[static_cast<size_t>(i)] * scale);
    return;
  }
  if (s.inner == 1) {
    if (s.outer == 1 && s.n >= 2 * kParallelGrain) {
      // One long row (a sum of everything): fixed blocks summed in parallel, then in order.
      const int64_t blocks = (s.n + kParallelGrain - 1) / kParallelGrain;
      std::vector<A> part(static_cast<size_t>(blocks));
      parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
        detail::dispatch_isa<detail::kRowSumIsa>([&] {
          for (int64_t b = b0; b < b1; ++b) {
            const int64_t lo = b * kParallelGrain;
            part[static_cast<size_t>(b)] = detail::sum_row(x.data + lo, std::min(kParallelGrain, s.n - lo));
          }
        });
      });
      A total = 0;
      for (A v : part) total += v;
      out[0] = OutE(total * scale);
      return;
    }
    detail::for_rows<detail::kRowSumIsa>(s.outer, s.n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) out[r] = OutE(detail::sum_row(x.data + r * s.n, s.n) * scale);
    });
    return;
  }
  detail::for_columns(s, [&](int64_t o, int64_t j0, int64_t j1) {
    std::vector<A> acc(static_cast<size_t>(j1 - j0), A(0));
    A *a = acc.data();
    const int64_t w = j1 - j0;
    for (int64_t k = 0; k < s.n; ++k) {
      const E *p = x.data + (o * s.n + k) * s.inner + j0;
      OPGEN_SIMD
      for (int64_t j = 0; j < w; ++j) a[j] += A(p[j]);
    }
    OutE *q = out.data + o * s.inner + j0;
    for (int64_t j = 0; j < w; ++j) detail::store(q[j], a[j] * scale);
  });
}

/// out = the largest element of x over the reduced axes of `kept` (NaN when any is NaN, -inf
/// for an empty group).
template <typename E, typename OutE>
void reduce_max(const In<E> &x, const Shape &kept, const Out<OutE> &out) {
  using C = compute_t<E>;
  const Shape shape = x.shape_vector();
  AxisSplit s;
  if (!split_reduction(shape, kept, s)) {
    std::vector<C> acc(static_cast<size_t>(out.numel), -std::numeric_limits<C>::infinity());
    BroadcastCursor<1> cur(shape, {broadcast_strides(shape, kept.data(), static_cast<int>(kept.size()))});
    for (int64_t i = 0; i < x.numel; ++i, cur.next()) {
      C &m = acc[static_cast<size_t>(cur.offset[0])];
      const C v = C(x[i]);
      if (v > m || v != v) m = v;  // NaN sticks: nothing compares greater than it
    }
    for (int64_t i = 0; i < out.numel; ++i) out[i] = OutE(acc[static_cast<size_t>(i)]);
    return;
  }
  if (s.inner == 1) {
    detail::for_rows(s.outer, s.n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) out[r] = OutE(detail::max_row(x.data + r * s.n, s.n));
    });
    return;
  }
  detail::for_columns(s, [&](int64_t o, int64_t j0, int64_t j1) {
    const int64_t w = j1 - j0;
    std::vector<C> acc(static_cast<size_t>(w), -std::numeric_limits<C>::infinity());
    C *m = acc.data();
    for (int64_t k = 0; k < s.n; ++k) {
      const E *p = x.data + (o * s.n + k) * s.inner + j0;
      OPGEN_SIMD
      for (int64_t j = 0; j < w; ++j) {
        const C v = C(p[j]);
        m[j] = (v > m[j] || v != v) ? v : m[j];
      }
    }
    OutE *q = out.data + o * s.inner + j0;
    for (int64_t j = 0; j < w; ++j) detail::store(q[j], m[j]);
  });
}

/// Softmax (or log-softmax with `log`) of x along `axis` (normalised): out = exp(x - max) /
/// sum(exp(x - max)), or x - max - log(sum(exp(x - max))). A NaN in a group makes it NaN.
template <typename E, typename OutE>
void softmax(const In<E> &x, int64_t axis, const Out<OutE> &out, bool log = false) {
  using C = compute_t<E>;
  using A = sum_t<E>;
  const AxisSplit s = x.ndim ? split_axis(x.shape, x.ndim, axis) : AxisSplit{};
  if (s.inner == 1) {
    detail::for_rows(s.outer, s.n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const E *p = x.data + r * s.n;
        OutE *q = out.data + r * s.n;
        C m = -std::numeric_limits<C>::infinity();
#if defined(OPGEN_OMP_SIMD)
#pragma omp simd reduction(max : m)
#endif
        for (int64_t k = 0; k < s.n; ++k) m = C(p[k]) > m ? C(p[k]) : m;
        if (log) {
          C sum = 0;
          OPGEN_SIMD_SUM(sum)
          for (int64_t k = 0; k < s.n; ++k) sum += std::exp(C(p[k]) - m);
          const C lse = m + std::log(sum);
          OPGEN_SIMD
          for (int64_t k = 0; k < s.n; ++k) detail::store(q[k], C(p[k]) - lse);
        } else {
          C sum = 0;
          OPGEN_SIMD_SUM(sum)
          for (int64_t k = 0; k < s.n; ++k) {
            const C e = std::exp(C(p[k]) - m);
            detail::store(q[k], e);
            sum += e;
          }
          const C inv = C(1) / sum;
          OPGEN_SIMD
          for (int64_t k = 0; k < s.n; ++k) detail::store(q[k], C(q[k]) * inv);
        }
      }
    });
    return;
  }
  detail::for_columns(s, [&](int64_t o, int64_t j0, int64_t j1) {
    const int64_t w = j1 - j0;
    std::vector<C> mv(static_cast<size_t>(w), -std::numeric_limits<C>::infinity());
    std::vector<A> sv(static_cast<size_t>(w), A(0));
    C *m = mv.data();
    A *sum = sv.data();
    const auto at = [&](int64_t k) { return (o * s.n + k) * s.inner + j0; };
    for (int64_t k = 0; k < s.n; ++k) {
      const E *p = x.data + at(k);
      OPGEN_SIMD
      for (int64_t j = 0; j < w; ++j) m[j] = C(p[j]) > m[j] ? C(p[j]) : m[j];
    }
    for (int64_t k = 0; k < s.n; ++k) {
      const E *p = x.data + at(k);
      OPGEN_SIMD
      for (int64_t j = 0; j < w; ++j) sum[j] += A(std::exp(C(p[j]) - m[j]));
    }
    for (int64_t j = 0; j < w; ++j) sum[j] = log ? A(m[j]) + A(std::log(C(sum[j]))) : A(1) / sum[j];
    for (int64_t k = 0; k < s.n; ++k) {
      const E *p = x.data + at(k);
      OutE *q = out.data + at(k);
      if (log) {
        OPGEN_SIMD
        for (int64_t j = 0; j < w; ++j) detail::store(q[j], C(p[j]) - C(sum[j]));
      } else {
        OPGEN_SIMD
        for (int64_t j = 0; j < w; ++j) detail::store(q[j], std::exp(C(p[j]) - m[j]) * C(sum[j]));
      }
    }
  });
}

/// Gradient of softmax (or log-softmax) along `axis` from its output y and the output gradient
/// dy: dx = y * (dy - sum(dy * y)), or dx = dy - exp(y) * sum(dy).
template <typename E, typename OutE>
void softmax_backward(const In<E> &y, const In<E> &dy, int64_t axis, const Out<OutE> &dx, bool log = false) {
  using C = compute_t<E>;
  using A = sum_t<E>;
  const AxisSplit s = y.ndim ? split_axis(y.shape, y.ndim, axis) : AxisSplit{};
  if (s.inner == 1) {
    detail::for_rows(s.outer, s.n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const E *yp = y.data + r * s.n, *gp = dy.data + r * s.n;
        OutE *q = dx.data + r * s.n;
        C dot = 0;
        if (log) {
          OPGEN_SIMD_SUM(dot)
          for (int64_t k = 0; k < s.n; ++k) dot += C(gp[k]);
          OPGEN_SIMD
          for (int64_t k = 0; k < s.n; ++k) detail::store(q[k], C(gp[k]) - std::exp(C(yp[k])) * dot);
        } else {
          OPGEN_SIMD_SUM(dot)
          for (int64_t k = 0; k < s.n; ++k) dot += C(gp[k]) * C(yp[k]);
          OPGEN_SIMD
          for (int64_t k = 0; k < s.n; ++k) detail::store(q[k], C(yp[k]) * (C(gp[k]) - dot));
        }
      }
    });
    return;
  }
  detail::for_columns(s, [&](int64_t o, int64_t j0, int64_t j1) {
    const int64_t w = j1 - j0;
    std::vector<A> dv(static_cast<size_t>(w), A(0));
    A *dot = dv.data();
    const auto at = [&](int64_t k) { return (o * s.n + k) * s.inner + j0; };
    for (int64_t k = 0; k < s.n; ++k) {
      const E *yp = y.data + at(k), *gp = dy.data + at(k);
      OPGEN_SIMD
      for (int64_t j = 0; j < w; ++j) dot[j] += log ? A(gp[j]) : A(C(gp[j]) * C(yp[j]));
    }
    for (int64_t k = 0; k < s.n; ++k) {
      const E *yp = y.data + at(k), *gp = dy.data + at(k);
      OutE *q = dx.data + at(k);
      OPGEN_SIMD
      for (int64_t j = 0; j < w; ++j)
        q[j] = log ? OutE(C(gp[j]) - std::exp(C(yp[j])) * C(dot[j])) : OutE(C(yp[j]) * (C(gp[j]) - C(dot[j])));
    }
  });
}

#endif  // !OPGEN_DEVICE_CUDA

}  // namespace opgen

#endif  // OPGEN_REDUCE_H_
