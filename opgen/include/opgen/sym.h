// opgen shape language, C++ side: values that may be unknown (GRAPH_MODE dynamic shapes).
//
// Shape expressions and contracts of a spec are parsed once by opgen (opgen/shapes/) and emitted
// twice: as Python over opgen/runtime.py helpers and as C++ over the helpers below. Both mean the
// same thing (tests/test_shape_lang.py compares them on random inputs); this side also carries
// unknown values: MindSpore's InferShape hands an aot library -1 for an unknown dim and a rank of
// -2 for an unknown rank while it compiles a graph with dynamic shapes. An unknown propagates
// through arithmetic, indexing and the shape functions; a contract whose value is unknown is
// checked later, when the kernel runs on real shapes. With every value known, each function here
// gives exactly what the static rules of rules.h give and throws the same opgen::Error messages.
//
// Shipped with opgen (not generated). Framework-free, like kernel.h.
#ifndef OPGEN_SYM_H_
#define OPGEN_SYM_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "opgen/kernel.h"
#include "opgen/rules.h"

namespace opgen {
namespace sym {

/// An int that may be unknown.
struct Int {
  int64_t v = 0;
  bool known = true;
  Int() = default;
  Int(int64_t value) : v(value) {}  // NOLINT: literals and attrs convert implicitly
  static Int unknown() {
    Int i;
    i.known = false;
    return i;
  }
};

/// A bool that may be unknown (a contract whose inputs are not all known yet).
struct Bool {
  bool v = false;
  bool known = true;
  Bool() = default;
  Bool(bool value) : v(value) {}  // NOLINT
  static Bool unknown() {
    Bool b;
    b.known = false;
    return b;
  }
};

/// A list of ints (a shape, part of one, or a list[int] attr); `rank_known` false when even its
/// length is unknown.
struct List {
  std::vector<Int> items;
  bool rank_known = true;
  List() = default;
  List(std::initializer_list<Int> xs) : items(xs) {}
  static List unknown_rank() {
    List l;
    l.rank_known = false;
    return l;
  }
  /// A list of known ints (an attr, a static shape).
  template <typename V>
  static List of(const V &values) {
    List l;
    for (auto x : values) l.items.push_back(Int(static_cast<int64_t>(x)));
    return l;
  }
  bool all_known() const {
    if (!rank_known) return false;
    for (const auto &i : items) {
      if (!i.known) return false;
    }
    return true;
  }
  /// The values (all known).
  Shape values() const {
    Shape out;
    for (const auto &i : items) out.push_back(i.v);
    return out;
  }
};

/// MindSpore's shape encoding as a List: -1 an unknown dim, a single -2 an unknown rank.
inline List from_ms(int ndims, const int64_t *dims) {
  if (ndims == 1 && dims[0] == -2) return List::unknown_rank();
  List l;
  for (int i = 0; i < ndims; ++i) l.items.push_back(dims[i] < 0 ? Int::unknown() : Int(dims[i]));
  return l;
}

/// Reads the inputs' shapes, in order, from the flattened (ndims, shapes) arrays MindSpore passes
/// to an aot <Func>InferShape (a 0-d tensor has ndims 0 and a null shape pointer).
struct MsShapes {
  int *ndims;
  int64_t **shapes;
  int p = 0;

  List one() {
    const List l = from_ms(ndims[p], shapes[p]);
    ++p;
    return l;
  }
  /// An optional input: its shape when `count` is 1, an empty list (never read) when 0.
  List maybe(int64_t count) { return count > 0 ? one() : List{}; }
  /// A dynamic input's `count` shapes.
  std::vector<List> list(int64_t count) {
    std::vector<List> out;
    for (int64_t i = 0; i < count; ++i) out.push_back(one());
    return out;
  }
  /// MindSpore's encoding of the next `count` tensors' shapes, passed through unchanged.
  std::vector<std::vector<int64_t>> raw(int64_t count) {
    std::vector<std::vector<int64_t>> out;
    for (int64_t i = 0; i < count; ++i, ++p) out.emplace_back(shapes[p], shapes[p] + ndims[p]);
    return out;
  }
  void skip(int64_t count) { p += static_cast<int>(count); }
};

/// A static shape as a List.
inline List from_shape(const Shape &s) { return List::of(s); }

/// Every shape of a dynamic input.
inline std::vector<List> from_shapes(const std::vector<Shape> &shapes) {
  std::vector<List> out;
  for (const auto &s : shapes) out.push_back(from_shape(s));
  return out;
}

inline std::string str(const List &l) {
  if (!l.rank_known) return "(unknown rank)";
  std::string out = "(";
  for (size_t i = 0; i < l.items.size(); ++i) {
    out += l.items[i].known ? std::to_string(l.items[i].v) : std::string("?");
    if (i + 1 < l.items.size() || l.items.size() == 1) out += ",";
    if (i + 1 < l.items.size()) out += " ";
  }
  return out + ")";
}

// ------------------------------------------------------------------------------- ints

[[noreturn]] inline void overflow() { throw Error("shape arithmetic overflows int64"); }

inline Int add(Int a, Int b) {
  if (!a.known || !b.known) return Int::unknown();
  int64_t r;
  if (__builtin_add_overflow(a.v, b.v, &r)) overflow();
  return r;
}
inline Int sub(Int a, Int b) {
  if (!a.known || !b.known) return Int::unknown();
  int64_t r;
  if (__builtin_sub_overflow(a.v, b.v, &r)) overflow();
  return r;
}
inline Int mul(Int a, Int b) {
  if ((a.known && a.v == 0) || (b.known && b.v == 0)) return Int(0);
  if (!a.known || !b.known) return Int::unknown();
  int64_t r;
  if (__builtin_mul_overflow(a.v, b.v, &r)) overflow();
  return r;
}
/// Python's floor division (rounds toward -infinity).
inline Int floordiv(Int a, Int b) {
  if (b.known && b.v == 0) throw Error("division by zero in a shape expression");
  if (!a.known || !b.known) return Int::unknown();
  if (a.v == INT64_MIN && b.v == -1) overflow();
  int64_t q = a.v / b.v;
  if ((a.v % b.v != 0) && ((a.v < 0) != (b.v < 0))) --q;
  return q;
}
/// Python's modulo (the sign of the divisor).
inline Int mod(Int a, Int b) {
  if (b.known && b.v == 0) throw Error("division by zero in a shape expression");
  if (!a.known || !b.known) return Int::unknown();
  if (b.v == -1) return Int(0);
  int64_t r = a.v % b.v;
  if (r != 0 && ((r < 0) != (b.v < 0))) r += b.v;
  return r;
}
inline Int neg(Int a) {
  if (!a.known) return a;
  if (a.v == INT64_MIN) overflow();
  return -a.v;
}
inline Int imin(std::initializer_list<Int> xs) {
  Int out = *xs.begin();
  for (const Int &x : xs) {
    if (!x.known || !out.known) return Int::unknown();
    if (x.v < out.v) out = x;
  }
  return out;
}
inline Int imax(std::initializer_list<Int> xs) {
  Int out = *xs.begin();
  for (const Int &x : xs) {
    if (!x.known || !out.known) return Int::unknown();
    if (x.v > out.v) out = x;
  }
  return out;
}

// ------------------------------------------------------------------------------ lists

inline Int length(const List &l) { return l.rank_known ? Int(static_cast<int64_t>(l.items.size())) : Int::unknown(); }
inline Int length(const std::vector<List> &ls) { return Int(static_cast<int64_t>(ls.size())); }

/// l[i], negative i counting from the end; throws for an index out of range.
inline Int at(const List &l, Int i) {
  if (!l.rank_known || !i.known) return Int::unknown();
  const int64_t n = static_cast<int64_t>(l.items.size());
  if (i.v < -n || i.v >= n) {
    throw Error("index " + std::to_string(i.v) + " is out of range for " + str(l) + ", which has " +
                std::to_string(n) + " entries");
  }
  return l.items[static_cast<size_t>(i.v < 0 ? i.v + n : i.v)];
}

/// The rows of a list[list[int]] attr, each a List of known ints.
template <typename V>
std::vector<List> rows_of(const std::vector<V> &rows) {
  std::vector<List> out;
  for (const auto &r : rows) out.push_back(List::of(r));
  return out;
}

/// rows[i] of a list[list[int]] attr, negative i counting from the end; throws for an index out
/// of range (an unknown i gives a list of unknown rank).
inline List at(const std::vector<List> &rows, Int i) {
  if (!i.known) return List::unknown_rank();
  const int64_t n = static_cast<int64_t>(rows.size());
  if (i.v < -n || i.v >= n) {
    std::string text = "[";
    for (size_t k = 0; k < rows.size(); ++k) {
      const std::string s = str(rows[k]);  // "(1, 2)" -> "[1, 2]", as Python shows a list attr
      text += (k ? ", [" : "[") + (s.size() > 2 && s[s.size() - 2] == ',' ? s.substr(1, s.size() - 3)
                                                                           : s.substr(1, s.size() - 2)) + "]";
    }
    throw Error("index " + std::to_string(i.v) + " is out of range for " + text + "], which has " +
                std::to_string(n) + " entries");
  }
  return rows[static_cast<size_t>(i.v < 0 ? i.v + n : i.v)];
}

/// all(f(v) for v in items): false as soon as one is known false, true when all are known true,
/// else unknown (the tensors of a dynamic input, the rows of a list[list[int]] attr).
template <typename F>
Bool all_of(const std::vector<List> &items, F f) {
  bool all = true;
  for (const auto &v : items) {
    const Bool b = f(v);
    if (b.known && !b.v) return Bool(false);
    all = all && b.known;
  }
  return all ? Bool(true) : Bool::unknown();
}
/// any(f(v) for v in items): true as soon as one is known true, false when all are known false.
template <typename F>
Bool any_of(const std::vector<List> &items, F f) {
  bool all = true;
  for (const auto &v : items) {
    const Bool b = f(v);
    if (b.known && b.v) return Bool(true);
    all = all && b.known;
  }
  return all ? Bool(false) : Bool::unknown();
}
/// all(f(d) for d in l) over the ints of a list (unknown for a list of unknown length).
template <typename F>
Bool all_of(const List &l, F f) {
  bool all = l.rank_known;
  for (const auto &v : l.items) {
    const Bool b = f(v);
    if (b.known && !b.v) return Bool(false);
    all = all && b.known;
  }
  return all ? Bool(true) : Bool::unknown();
}
template <typename F>
Bool any_of(const List &l, F f) {
  bool all = l.rank_known;
  for (const auto &v : l.items) {
    const Bool b = f(v);
    if (b.known && b.v) return Bool(true);
    all = all && b.known;
  }
  return all ? Bool(false) : Bool::unknown();
}

/// l[lo:hi] with Python's rules (bounds clamped, negative counting from the end).
inline List slice(const List &l, Int lo, bool has_lo, Int hi, bool has_hi) {
  if (!l.rank_known || (has_lo && !lo.known) || (has_hi && !hi.known)) return List::unknown_rank();
  const int64_t n = static_cast<int64_t>(l.items.size());
  auto clamp = [n](int64_t v) {
    if (v < 0) v += n;
    return v < 0 ? 0 : (v > n ? n : v);
  };
  const int64_t a = has_lo ? clamp(lo.v) : 0;
  const int64_t b = has_hi ? clamp(hi.v) : n;
  List out;
  for (int64_t k = a; k < b; ++k) out.items.push_back(l.items[static_cast<size_t>(k)]);
  return out;
}

/// a + b (lists joined).
inline List join(const List &a, const List &b) {
  if (!a.rank_known || !b.rank_known) return List::unknown_rank();
  List out = a;
  out.items.insert(out.items.end(), b.items.begin(), b.items.end());
  return out;
}

/// l * n (l repeated n times; none for n <= 0).
inline List repeat(const List &l, Int n) {
  if (!l.rank_known || !n.known) return List::unknown_rank();
  if (n.v > 0 && static_cast<int64_t>(l.items.size()) > 0 && n.v > (int64_t{1} << 20)) {
    throw Error("a list repeated " + std::to_string(n.v) + " times is longer than any shape");
  }
  List out;
  for (int64_t k = 0; k < n.v; ++k) out.items.insert(out.items.end(), l.items.begin(), l.items.end());
  return out;
}

// ------------------------------------------------------------------------------ bools

inline Bool cmp(Int a, Int b, int op) {
  if (!a.known || !b.known) return Bool::unknown();
  switch (op) {
    case 0: return a.v == b.v;
    case 1: return a.v != b.v;
    case 2: return a.v < b.v;
    case 3: return a.v <= b.v;
    case 4: return a.v > b.v;
    default: return a.v >= b.v;
  }
}
inline Bool eq(Int a, Int b) { return cmp(a, b, 0); }
inline Bool ne(Int a, Int b) { return cmp(a, b, 1); }
inline Bool lt(Int a, Int b) { return cmp(a, b, 2); }
inline Bool le(Int a, Int b) { return cmp(a, b, 3); }
inline Bool gt(Int a, Int b) { return cmp(a, b, 4); }
inline Bool ge(Int a, Int b) { return cmp(a, b, 5); }
// a float attr against a number (always known)
inline Bool eq(double a, Int b) { return a == static_cast<double>(b.v); }
inline Bool eq(Int a, double b) { return static_cast<double>(a.v) == b; }
inline Bool eq(double a, double b) { return a == b; }
inline Bool ne(double a, double b) { return a != b; }
inline Bool lt(double a, double b) { return a < b; }
inline Bool le(double a, double b) { return a <= b; }
inline Bool gt(double a, double b) { return a > b; }
inline Bool ge(double a, double b) { return a >= b; }
inline Bool ne(double a, Int b) { return a != static_cast<double>(b.v); }
inline Bool lt(double a, Int b) { return a < static_cast<double>(b.v); }
inline Bool le(double a, Int b) { return a <= static_cast<double>(b.v); }
inline Bool gt(double a, Int b) { return a > static_cast<double>(b.v); }
inline Bool ge(double a, Int b) { return a >= static_cast<double>(b.v); }
inline Bool ne(Int a, double b) { return static_cast<double>(a.v) != b; }
inline Bool lt(Int a, double b) { return static_cast<double>(a.v) < b; }
inline Bool le(Int a, double b) { return static_cast<double>(a.v) <= b; }
inline Bool gt(Int a, double b) { return static_cast<double>(a.v) > b; }
inline Bool ge(Int a, double b) { return static_cast<double>(a.v) >= b; }
inline Bool eq(const std::string &a, const std::string &b) { return a == b; }
inline Bool ne(const std::string &a, const std::string &b) { return a != b; }
inline Bool eq(Bool a, Bool b) {
  if (!a.known || !b.known) return Bool::unknown();
  return a.v == b.v;
}
inline Bool ne(Bool a, Bool b) {
  if (!a.known || !b.known) return Bool::unknown();
  return a.v != b.v;
}
/// Lists are equal when their lengths and every entry are; false as soon as a known part differs.
inline Bool eq(const List &a, const List &b) {
  if (!a.rank_known || !b.rank_known) return Bool::unknown();
  if (a.items.size() != b.items.size()) return false;
  bool all = true;
  for (size_t i = 0; i < a.items.size(); ++i) {
    const Bool e = eq(a.items[i], b.items[i]);
    if (e.known && !e.v) return false;
    all = all && e.known;
  }
  return all ? Bool(true) : Bool::unknown();
}
inline Bool ne(const List &a, const List &b) {
  const Bool e = eq(a, b);
  return e.known ? Bool(!e.v) : e;
}

inline Bool lnot(Bool a) { return a.known ? Bool(!a.v) : a; }
/// a and b(), b evaluated only when a is not known to be false (Python's short circuit).
template <typename F>
Bool land(Bool a, F b) {
  if (a.known && !a.v) return a;
  const Bool r = b();
  if (r.known && !r.v) return r;
  return (a.known && r.known) ? Bool(true) : Bool::unknown();
}
template <typename F>
Bool lor(Bool a, F b) {
  if (a.known && a.v) return a;
  const Bool r = b();
  if (r.known && r.v) return r;
  return (a.known && r.known) ? Bool(false) : Bool::unknown();
}

inline Int unknown_like(const Int &) { return Int::unknown(); }
inline Bool unknown_like(const Bool &) { return Bool::unknown(); }
inline List unknown_like(const List &) { return List::unknown_rank(); }

/// test ? then() : orelse(); unknown when the test is.
template <typename F, typename G>
auto choose(Bool test, F then, G orelse) -> decltype(then()) {
  if (!test.known) return unknown_like(then());
  return test.v ? then() : orelse();
}

// ---------------------------------------------------------------------- shape functions

/// broadcast(x, y, ...): NumPy broadcasting (rules.h/kernel.h broadcast_shape when all known).
inline List broadcast(const std::vector<List> &xs) {
  bool all = true;
  for (const auto &x : xs) {
    if (!x.rank_known) return List::unknown_rank();
    all = all && x.all_known();
  }
  if (all) {
    std::vector<Shape> shapes;
    for (const auto &x : xs) shapes.push_back(x.values());
    return from_shape(broadcast_shape(shapes));
  }
  size_t nd = 0;
  for (const auto &x : xs) nd = std::max(nd, x.items.size());
  List out;
  for (size_t j = 0; j < nd; ++j) {
    Int d(1);
    bool unknown = false;
    for (const auto &x : xs) {
      if (j + x.items.size() < nd) continue;
      const Int e = x.items[j + x.items.size() - nd];
      if (!e.known) {
        unknown = true;
      } else if (e.v != 1) {
        d = e;  // a known dim other than 1 decides (a mismatch is caught on real shapes)
      }
    }
    out.items.push_back(d.v != 1 ? d : (unknown ? Int::unknown() : Int(1)));
  }
  return out;
}

namespace detail {
// a list of axes as numpy takes it; a single int axis too, which a 0-d tensor accepts as 0 or -1
inline std::vector<int64_t> normalized_axes(const List &axis, int64_t rank) { return normalize_axes(axis.values(), rank); }
inline std::vector<int64_t> normalized_axes(Int axis, int64_t rank) { return normalize_axes(axis.v, rank); }
inline bool known(const List &axis) { return axis.all_known(); }
inline bool known(Int axis) { return axis.known; }
}  // namespace detail

/// reduce(x, axis, keep_dims): x reduced over axis (an Int or a List; [] means every axis).
template <typename Axis>
List reduce(const List &x, const Axis &axis, Bool keep_dims) {
  if (!x.rank_known || !detail::known(axis) || !keep_dims.known) return List::unknown_rank();
  const std::vector<int64_t> axes = detail::normalized_axes(axis, static_cast<int64_t>(x.items.size()));
  List out;
  for (size_t i = 0; i < x.items.size(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!reduced) {
      out.items.push_back(x.items[i]);
    } else if (keep_dims.v) {
      out.items.push_back(Int(1));
    }
  }
  return out;
}

/// matmul(a, b, transpose_a, transpose_b): [m, n] of op(a) @ op(b), 2-D a and b.
inline List matmul(const List &a, const List &b, Bool transpose_a, Bool transpose_b) {
  if (a.all_known() && b.all_known() && transpose_a.known && transpose_b.known) {
    return from_shape(matmul_shape(a.values(), b.values(), transpose_a.v, transpose_b.v));
  }
  if ((a.rank_known && a.items.size() != 2) || (b.rank_known && b.items.size() != 2)) {
    throw Error("matmul needs 2-D inputs, got shapes " + str(a) + " and " + str(b));
  }
  const Int m = (a.rank_known && transpose_a.known) ? a.items[transpose_a.v ? 1 : 0] : Int::unknown();
  const Int n = (b.rank_known && transpose_b.known) ? b.items[transpose_b.v ? 0 : 1] : Int::unknown();
  return List{m, n};
}

/// concat(xs, axis): the shapes of a dynamic input's tensors joined along axis.
inline List concat(const std::vector<List> &xs, Int axis) {
  bool all = axis.known;
  for (const auto &x : xs) all = all && x.all_known();
  if (all) {
    std::vector<Shape> shapes;
    for (const auto &x : xs) shapes.push_back(x.values());
    return from_shape(concat_shape(shapes, axis.v));
  }
  if (xs.empty() || !axis.known) return List::unknown_rank();
  const List *known_rank = nullptr;
  for (const auto &x : xs) {
    if (x.rank_known) known_rank = &x;
  }
  if (known_rank == nullptr) return List::unknown_rank();
  const int64_t rank = static_cast<int64_t>(known_rank->items.size());
  if (rank == 0) throw Error("concat cannot join 0-d tensors");
  const size_t ax = static_cast<size_t>(normalize_axes(axis.v, rank)[0]);
  List out;
  for (int64_t d = 0; d < rank; ++d) {
    Int v = Int::unknown();
    if (static_cast<size_t>(d) == ax) {
      v = Int(0);
      for (const auto &x : xs) v = x.rank_known ? add(v, x.items[ax]) : Int::unknown();
    } else {
      for (const auto &x : xs) {
        if (x.rank_known && x.items[static_cast<size_t>(d)].known) v = x.items[static_cast<size_t>(d)];
      }
    }
    out.items.push_back(v);
  }
  return out;
}

/// gather(x, indices, axis): x.shape[:axis] + indices.shape + x.shape[axis + 1:].
inline List gather(const List &x, const List &indices, Int axis) {
  if (x.all_known() && indices.all_known() && axis.known) {
    return from_shape(gather_shape(x.values(), indices.values(), axis.v));
  }
  if (!x.rank_known || !indices.rank_known || !axis.known) return List::unknown_rank();
  if (x.items.empty()) throw Error("gather cannot index a 0-d tensor");
  const int64_t ax = normalize_axes(axis.v, static_cast<int64_t>(x.items.size()))[0];
  List out;
  out.items.assign(x.items.begin(), x.items.begin() + ax);
  out.items.insert(out.items.end(), indices.items.begin(), indices.items.end());
  out.items.insert(out.items.end(), x.items.begin() + ax + 1, x.items.end());
  return out;
}

// --------------------------------------------------------------- outputs and contracts

/// Checks an output shape: every known dim >= 0, the element count within int64.
inline void check_output(const List &l, const char *output) {
  if (!l.rank_known) return;
  int64_t numel = 1;
  bool all = true;
  for (const auto &d : l.items) {
    if (!d.known) {
      all = false;
      continue;
    }
    if (d.v < 0) {
      throw Error(std::string("output '") + output + "' would have shape " + str(l) + ", with a negative dim");
    }
    if (all && __builtin_mul_overflow(numel, d.v, &numel)) {
      throw Error(std::string("output '") + output + "' would have shape " + str(l) +
                  ", more elements than int64 can count");
    }
  }
}

/// A static output shape (the Function<T> path: every input shape is known).
inline Shape to_shape(const List &l, const char *output) {
  check_output(l, output);
  if (!l.all_known()) throw Error(std::string("output '") + output + "' has an unknown shape");
  return l.values();
}

/// An output shape for MindSpore's InferShape: -1 for an unknown dim, {-2} for an unknown rank.
inline std::vector<int64_t> to_ms(const List &l, const char *output) {
  check_output(l, output);
  if (!l.rank_known) return {-2};
  std::vector<int64_t> out;
  for (const auto &d : l.items) out.push_back(d.known ? d.v : -1);
  return out;
}

/// The facts a contract message shows: ("pred", shape) for inputs, ("k", value) for attrs.
struct Fact {
  std::string name;
  std::string value;
};

inline Fact fact(const char *name, const List &shape) { return {std::string(name) + " has shape", str(shape)}; }
inline Fact fact(const char *name, const std::vector<List> &shapes) {
  std::string v = "[";
  for (size_t i = 0; i < shapes.size(); ++i) v += (i ? ", " : "") + str(shapes[i]);
  return {std::string(name) + " has shapes", v + "]"};
}
template <typename V>
Fact fact_value(const char *name, const V &value) {
  return {std::string(name) + " =", std::to_string(value)};
}
inline Fact fact_value(const char *name, bool value) { return {std::string(name) + " =", value ? "True" : "False"}; }
inline Fact fact_value(const char *name, const std::string &value) { return {std::string(name) + " =", "'" + value + "'"}; }
template <typename E>
Fact fact_value(const char *name, const std::vector<E> &value) {
  std::string v = "[";
  for (size_t i = 0; i < value.size(); ++i) v += (i ? ", " : "") + fact_value("", value[i]).value;
  return {std::string(name) + " =", v + "]"};
}

/// Throws the contract-violation error unless `condition()` is true or unknown (decided later);
/// an error while evaluating it (a shape function's rule, an index out of range) is a violation.
template <typename F>
void require(F condition, const char *text, std::initializer_list<Fact> facts) {
  Bool holds;
  try {
    holds = condition();
  } catch (const Error &) {
    holds = Bool(false);
  }
  if (!holds.known || holds.v) return;
  std::string msg = std::string("contract '") + text + "' does not hold: ";
  bool first = true;
  for (const auto &f : facts) {
    msg += (first ? "" : ", ") + f.name + " " + f.value;
    first = false;
  }
  throw Error(msg);
}

}  // namespace sym
}  // namespace opgen

#endif  // OPGEN_SYM_H_
