// opgen shape rules (C++ side) and the views of optional and dynamic inputs.
//
// The shape rules of the spec language -- reduce(x, axis, keep_dims), matmul(a, b, ta, tb),
// concat(xs, axis), gather(x, indices, axis) -- are implemented twice: here for the Function<T> path's shape inference,
// and in opgen/runtime.py for the Custom path's out_shape. Both follow the same rules and throw
// the same messages (tests/test_shape_rules.py compares them on random shapes).
//
// Shipped with opgen (not generated). Framework-free, like kernel.h.
#ifndef OPGEN_RULES_H_
#define OPGEN_RULES_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "opgen/kernel.h"

namespace opgen {

namespace detail {
inline std::vector<int64_t> normalize_axes(const std::vector<int64_t> &axes, int64_t rank, int64_t bound) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) {
    if (a < -bound || a >= bound) {
      throw Error("axis " + std::to_string(a) + " is out of range for a tensor of rank " + std::to_string(rank));
    }
    const int64_t n = a < 0 ? a + bound : a;
    if (std::find(out.begin(), out.end(), n) != out.end()) throw Error("axis " + std::to_string(n) + " is repeated");
    out.push_back(n);
  }
  out.erase(std::remove_if(out.begin(), out.end(), [rank](int64_t a) { return a >= rank; }), out.end());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace detail

/// Axes of a tensor of `rank` as sorted non-negative ints; an empty `axes` means every axis.
/// Throws opgen::Error for an axis outside [-rank, rank) or a repeated one: as numpy, a 0-d
/// tensor has no axis to list (np.sum(np.float32(2), axis=(0,)) raises AxisError).
inline std::vector<int64_t> normalize_axes(const std::vector<int64_t> &axes, int64_t rank) {
  return detail::normalize_axes(axes, rank, rank);
}

/// The single axis `axis` of a tensor of `rank`, as numpy takes an int axis: in [-rank, rank),
/// or [-1, 0] for rank 0 (np.sum(np.float32(2), axis=0) is 2).
inline std::vector<int64_t> normalize_axes(int64_t axis, int64_t rank) {
  return detail::normalize_axes(std::vector<int64_t>{axis}, rank, std::max<int64_t>(rank, 1));
}

/// Dimension `axis` (negative counts from the end) of input `name`'s shape, for explicit dim
/// lists; throws opgen::Error when the input has too few dimensions.
inline int64_t dim_of(const Shape &shape, int64_t axis, const char *name) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (axis < -rank || axis >= rank) {
    throw Error(std::string("input '") + name + "' has shape " + shape_str(shape) + ", which has no dimension " +
                std::to_string(axis));
  }
  return shape[axis < 0 ? axis + rank : axis];
}

/// Shape of `x` reduced over `axes` (the reduce(x, axis, keep_dims) rule).
template <typename Axes>
Shape reduce_shape(const Shape &x, const Axes &axis, bool keep_dims) {
  const std::vector<int64_t> axes = normalize_axes(axis, static_cast<int64_t>(x.size()));
  Shape out;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!reduced) {
      out.push_back(x[i]);
    } else if (keep_dims) {
      out.push_back(1);
    }
  }
  return out;
}

/// Shape of op(a) @ op(b) for 2-D a and b (the matmul(a, b, transpose_a, transpose_b) rule).
inline Shape matmul_shape(const Shape &a, const Shape &b, bool transpose_a, bool transpose_b) {
  if (a.size() != 2 || b.size() != 2) {
    throw Error("matmul needs 2-D inputs, got shapes " + shape_str(a) + " and " + shape_str(b));
  }
  const int64_t m = transpose_a ? a[1] : a[0], k = transpose_a ? a[0] : a[1];
  const int64_t k2 = transpose_b ? b[1] : b[0], n = transpose_b ? b[0] : b[1];
  if (k != k2) {
    throw Error("matmul inner dimensions differ: " + shape_str(a) + (transpose_a ? "^T" : "") + " x " +
                shape_str(b) + (transpose_b ? "^T" : "") + " (" + std::to_string(k) + " != " + std::to_string(k2) +
                ")");
  }
  return {m, n};
}

/// Shape of the tensors with shapes `xs` joined along `axis` (the concat(xs, axis) rule).
inline Shape concat_shape(const std::vector<Shape> &xs, int64_t axis) {
  if (xs.empty()) throw Error("concat needs at least one tensor");
  const int64_t rank = static_cast<int64_t>(xs[0].size());
  if (rank == 0) throw Error("concat cannot join 0-d tensors");
  const int64_t ax = normalize_axes(axis, rank)[0];
  Shape out = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    const Shape &s = xs[i];
    if (static_cast<int64_t>(s.size()) != rank) {
      throw Error("concat: tensor " + std::to_string(i) + " has rank " + std::to_string(s.size()) +
                  ", tensor 0 has rank " + std::to_string(rank));
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d != ax && s[d] != out[d]) {
        throw Error("concat: tensor " + std::to_string(i) + " has shape " + shape_str(s) + ", which differs from " +
                    shape_str(xs[0]) + " outside axis " + std::to_string(ax));
      }
    }
    if (s[ax] > INT64_MAX - out[ax]) {
      throw Error("concat: the joined axis " + std::to_string(ax) + " would have more than 2**63 - 1 entries");
    }
    out[ax] += s[ax];
  }
  return out;
}

/// Shape of `x` gathered along `axis` at indices of shape `indices` (the gather(x, indices, axis)
/// rule): x.shape[:axis] + indices.shape + x.shape[axis + 1:], as numpy.take.
inline Shape gather_shape(const Shape &x, const Shape &indices, int64_t axis) {
  if (x.empty()) throw Error("gather cannot index a 0-d tensor");
  const int64_t ax = normalize_axes(axis, static_cast<int64_t>(x.size()))[0];
  Shape out(x.begin(), x.begin() + ax);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), x.begin() + ax + 1, x.end());
  return out;
}

// ------------------------------------------------------------------ optional and dynamic inputs

/// The tensors of a dynamic (list) input: `size()` views, `xs[i]` is the i-th.
template <typename T>
struct ViewList {
  std::vector<View<T>> items;

  size_t size() const { return items.size(); }
  bool empty() const { return items.empty(); }
  const View<T> &operator[](size_t i) const { return items[i]; }
  typename std::vector<View<T>>::const_iterator begin() const { return items.begin(); }
  typename std::vector<View<T>>::const_iterator end() const { return items.end(); }
  /// Shapes of every tensor, e.g. for concat_shape.
  std::vector<Shape> shapes() const {
    std::vector<Shape> out;
    for (const auto &v : items) out.push_back(v.shape_vector());
    return out;
  }
};

template <typename E>
using InList = ViewList<const E>;
template <typename E>
using OutList = ViewList<E>;

}  // namespace opgen

#endif  // OPGEN_RULES_H_
