// opgen bridge between PyTorch tensors (at::Tensor, the PyTorch backend) and kernel views.
//
// Each generated csrc/<op>_torch.cc registers the op's schema (TORCH_LIBRARY_FRAGMENT) and its
// CPU kernel (TORCH_LIBRARY_IMPL); the kernel makes its inputs contiguous, picks the dtype_format
// row, checks the contracts and computes output shapes over opgen::sym, allocates outputs with
// at::empty and calls the kernel layer (<op>_kernel_decl.h) through the views made here.
//
// Errors: a contract violation or an opgen::Error from a body becomes c10::ValueError (Python
// ValueError, "<op>(): <message>", the same text as the MindSpore path's opgen::ms::kernel_error);
// dtypes no row takes become c10::TypeError naming the op, the dtypes and the rows.
//
// Build cost: only <ATen/core/Tensor.h>, <ATen/ops/empty.h>, <ATen/ops/zeros.h> and
// <torch/library.h> (~8 CPU s per unit, against ~40 s for <torch/extension.h>); no pybind11
// (the library is loaded with torch.ops.load_library). Compiled with -D_GLIBCXX_USE_CXX11_ABI=1
// and C++20, as PyTorch 2.13 is.
//
// Shipped with opgen (not generated). Header-only: nothing to build once per machine.
#ifndef OPGEN_TORCH_H_
#define OPGEN_TORCH_H_

#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/List.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "opgen/kernel.h"
#include "opgen/rules.h"
#include "opgen/sanitize.h"

namespace opgen {
namespace pt {

/// Caps opgen's thread pool at PyTorch's intra-op thread count (torch.set_num_threads) for the
/// kernel call in scope, so that the two never oversubscribe the cores.
class TorchThreads : public ThreadCap {
 public:
  TorchThreads() : ThreadCap(at::get_num_threads()) {}
};

/// The contiguous version of `t` (itself when it already is; undefined stays undefined).
inline at::Tensor contiguous(const at::Tensor &t) { return t.defined() ? t.contiguous() : t; }

/// An optional input: its contiguous tensor, or an undefined tensor for None.
inline at::Tensor contiguous(const std::optional<at::Tensor> &t) {
  return t.has_value() && t->defined() ? t->contiguous() : at::Tensor();
}

/// The tensors of a list input, each contiguous.
inline std::vector<at::Tensor> contiguous(at::TensorList ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto &t : ts) out.push_back(t.contiguous());
  return out;
}

/// `t`'s shape (an undefined tensor has none).
inline Shape shape_of(const at::Tensor &t) { return t.defined() ? Shape(t.sizes().begin(), t.sizes().end()) : Shape{}; }

inline std::vector<Shape> shapes_of(const std::vector<at::Tensor> &ts) {
  std::vector<Shape> out;
  out.reserve(ts.size());
  for (const auto &t : ts) out.push_back(shape_of(t));
  return out;
}

/// A view of a contiguous tensor (an empty view for an undefined tensor). Inside an entry point's
/// ShadowScope, the view of a CPU tensor is a shadow copy in a sanitizer build (opgen/sanitize.h);
/// a tensor on another device is never copied (its data is device memory).
template <typename E>
In<E> in(const at::Tensor &t) {
  if (!t.defined()) return In<E>{};
  const E *data = static_cast<const E *>(t.const_data_ptr());
  return make_view<const E>(t.is_cpu() ? shadow(data, t.numel()) : data, t.sizes().data(), static_cast<int>(t.dim()));
}

/// A writable view of a contiguous tensor (an output, an input the op writes, a gradient). Inside
/// an entry point's ShadowScope, the view of a CPU tensor is a shadow copy (sanitizer builds) or a
/// guarded copy (checked mode: a write past its end is the op's error, see opgen/sanitize.h),
/// written back when the kernel is done; a tensor on another device is never copied.
template <typename E>
Out<E> out(const at::Tensor &t) {
  if (!t.defined()) return Out<E>{};
  E *data = static_cast<E *>(t.mutable_data_ptr());
  return make_view<E>(t.is_cpu() ? shadow(data, t.numel()) : data, t.sizes().data(), static_cast<int>(t.dim()));
}

/// A view with `shape` but no data: stands for a tensor the backward pass did not keep.
template <typename E>
In<E> shape_only(const Shape &shape) {
  In<E> v;
  v.shape = shape.data();
  v.ndim = static_cast<int>(shape.size());
  v.numel = numel_of(shape.data(), v.ndim);
  return v;
}

template <typename E>
InList<E> in_list(const std::vector<at::Tensor> &ts) {
  InList<E> l;
  for (const auto &t : ts) l.items.push_back(in<E>(t));
  return l;
}

template <typename E>
OutList<E> out_list(const std::vector<at::Tensor> &ts) {
  OutList<E> l;
  for (const auto &t : ts) l.items.push_back(out<E>(t));
  return l;
}

/// A fresh (uninitialised) tensor for a kernel to fill, on the CPU or on `device`.
inline at::Tensor empty(const Shape &shape, at::ScalarType dtype) {
  return at::empty(at::IntArrayRef(shape), at::TensorOptions().dtype(dtype));
}
inline at::Tensor empty(const Shape &shape, at::ScalarType dtype, at::Device device) {
  return at::empty(at::IntArrayRef(shape), at::TensorOptions().dtype(dtype).device(device));
}

namespace detail {
/// The bytes of a tensor of `shape` and `dtype`; throws opgen::Error (the op's ValueError) when
/// they overflow int64, where at::empty says "Storage size calculation overflowed" naming no op
/// (the fake kernels refuse the same shapes: opgen.runtime.pytorch.fake_output).
inline int64_t output_bytes(const char *name, const Shape &shape, at::ScalarType dtype) {
  const int64_t numel = numel_of(shape.data(), static_cast<int>(shape.size()));
  const int64_t item = static_cast<int64_t>(c10::elementSize(dtype));
  if (numel > std::numeric_limits<int64_t>::max() / item) {
    throw Error("output '" + std::string(name) + "' would have shape " + shape_str(shape) + ", more bytes (" +
                std::to_string(item) + " per element) than int64 can count");
  }
  return numel * item;
}

/// Runs `allocate` (at::empty); an allocation failure is rethrown as the same exception type
/// (c10::OutOfMemoryError, torch.OutOfMemoryError; c10::Error, RuntimeError: the CPU allocator's
/// "can't allocate memory"; std::bad_alloc as c10::OutOfMemoryError) naming the op, the output,
/// its shape and its size before the allocator's own message.
template <typename F>
at::Tensor allocate_output(const char *op, const char *name, const Shape &shape, at::ScalarType dtype, F &&allocate) {
  const int64_t bytes = output_bytes(name, shape, dtype);
  const auto what = [&](const char *cause) {
    return std::string(op) + "(): cannot allocate output '" + name + "' of shape " + shape_str(shape) + " (" +
           std::to_string(bytes) + " bytes): " + cause;
  };
  try {
    return allocate();
  } catch (const c10::OutOfMemoryError &e) {
    throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, what(e.what_without_backtrace()));
  } catch (const c10::Error &e) {
    throw c10::Error({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, what(e.what_without_backtrace()));
  } catch (const std::bad_alloc &e) {
    throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, what(e.what()));
  }
}
}  // namespace detail

/// An output (or a gradient) of op `op` named `name`: opgen::pt::empty, with an error naming the
/// op and the output where its bytes overflow int64 (opgen::Error: the op's ValueError) or the
/// allocation fails (detail::allocate_output).
inline at::Tensor output(const char *op, const char *name, const Shape &shape, at::ScalarType dtype) {
  return detail::allocate_output(op, name, shape, dtype, [&] { return empty(shape, dtype); });
}
inline at::Tensor output(const char *op, const char *name, const Shape &shape, at::ScalarType dtype,
                         at::Device device) {
  return detail::allocate_output(op, name, shape, dtype, [&] { return empty(shape, dtype, device); });
}

/// Whether `t` has dtype `want`; an absent optional input (undefined) matches any row.
inline bool dtype_is(const at::Tensor &t, at::ScalarType want) { return !t.defined() || t.scalar_type() == want; }
inline bool dtype_is(at::TensorList ts, at::ScalarType want) {
  for (const auto &t : ts) {
    if (t.scalar_type() != want) return false;
  }
  return true;
}

/// opgen's (numpy's) name of a dtype, as the spec's rows name it.
inline const char *dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kChar: return "int8";
    case at::kShort: return "int16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    case at::kComplexFloat: return "complex64";
    case at::kComplexDouble: return "complex128";
    default: return c10::toString(t);
  }
}

/// Appends "name=dtype" entries describing an argument, for unsupported-dtype messages.
inline void describe(std::vector<std::string> *got, const std::string &name, const at::Tensor &t) {
  if (t.defined()) got->push_back(name + "=" + dtype_name(t.scalar_type()));
}
inline void describe(std::vector<std::string> *got, const std::string &name, const std::vector<at::Tensor> &ts) {
  for (size_t i = 0; i < ts.size(); ++i) describe(got, name + "[" + std::to_string(i) + "]", ts[i]);
}

/// Raises a Python TypeError naming the op, the dtypes it got and the rows it supports (the
/// MindSpore path's message).
[[noreturn]] inline void unsupported_dtypes(const char *op, const std::vector<std::string> &got, const char *rows) {
  std::string msg = std::string(op) + "(): unsupported dtypes (";
  for (size_t i = 0; i < got.size(); ++i) msg += got[i] + (i + 1 < got.size() ? ", " : "");
  msg += "); supported dtype_format rows: " + std::string(rows);
  throw c10::TypeError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg);
}

/// Raises a Python ValueError "<op>(): <what the kernel or a contract said>".
[[noreturn]] inline void kernel_error(const char *op, const std::exception &e) {
  throw c10::ValueError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, std::string(op) + "(): " + e.what());
}

/// The checks that run, before the kernel writes anything, in each call of an op that writes some
/// of its inputs in place (``writes: true`` or an aliased output), so that a call they refuse
/// changes nothing: each raises a Python ValueError "<op>(): ..." naming the inputs (the first,
/// torch's RuntimeError). A written input is refused when it
///   - is an inference tensor (made under torch.inference_mode()) outside inference mode: torch's
///     "Inplace update to inference tensor outside InferenceMode is not allowed", naming the op and
///     the input (torch's own in-place ops raise it after writing the tensor);
///   - has internal overlap: more than one of its elements at one memory location (an expanded
///     or zero-stride tensor; at::has_internal_overlap says Yes), which no write can give a value;
///   - overlaps another input in part (at::get_overlap_status: Partial), as torch's own in-place
///     ops refuse it ("some elements of the input tensor and the written-to tensor refer to a
///     single memory location");
///   - is the same memory as another written input (two writes of one element), or, for an op
///     with a kernel body (``kernel:``, which may read any element after writing some), as an
///     input it reads; an ``elementwise:`` op reads each element before writing it, so ``x += x``
///     runs, as torch's own ``x.add_(x)`` does.
/// Overlap torch cannot decide cheaply (TooHard: a tensor that is not dense) is let through, as
/// torch lets it through: such a tensor is not contiguous, so the kernel reads or writes a
/// contiguous copy of it, taken before the kernel runs.
/// Usage (generated, templates/torch/op.cc.j2): one ``written``/``read`` per input, then ``check``.
class WriteCheck {
 public:
  /// For op ``op``; ``elementwise``: the op is an ``elementwise:`` spec (see above).
  WriteCheck(const char *op, bool elementwise) : op_(op), elementwise_(elementwise) {}

  /// An input the op writes in place.
  void written(const char *name, const at::Tensor &t) { add(name, t, true); }
  /// An input the op only reads (an absent optional input: nothing; a list input: each tensor).
  void read(const char *name, const at::Tensor &t) { add(name, t, false); }
  void read(const char *name, const std::optional<at::Tensor> &t) {
    if (t.has_value()) add(name, *t, false);
  }
  void read(const char *name, at::TensorList ts) {
    for (size_t k = 0; k < ts.size(); ++k) add(std::string(name) + "[" + std::to_string(k) + "]", ts[k], false);
  }

  /// Raises the op's ValueError for the first written input that breaks a rule above.
  void check() const {
    for (size_t i = 0; i < args_.size(); ++i) {
      const Arg &w = args_[i];
      if (!w.written) continue;
      if (w.t.is_inference() && !c10::InferenceMode::is_enabled()) {  // torch's error, as its own ops raise it
        TORCH_CHECK(false, "Inplace update to inference tensor outside InferenceMode is not allowed: ", op_,
                    "() writes '", w.name, "', an inference tensor (made under torch.inference_mode()), in place; ",
                    "clone() it, or call the op under torch.inference_mode()");
      }
      if (at::has_internal_overlap(w.t) == at::MemOverlap::Yes) {
        refuse("'" + w.name + "' is written in place, but more than one of its elements refers to a single " +
               "memory location (an expanded or zero-stride tensor); pass a tensor of its own (clone() it)");
      }
      for (size_t j = 0; j < args_.size(); ++j) {
        const Arg &x = args_[j];
        if (j == i || (x.written && j < i)) continue;  // each pair of written inputs once
        const at::MemOverlapStatus status = at::get_overlap_status(w.t, x.t);
        if (status == at::MemOverlapStatus::Partial) {
          refuse("'" + w.name + "' (written in place) and '" + x.name + "' overlap in memory in part: some " +
                 "elements of one are elements of the other; pass a copy of one of them (clone())");
        }
        if (status == at::MemOverlapStatus::Full && x.written) {
          refuse("'" + w.name + "' and '" + x.name + "' are the same memory, and both are written in place; " +
                 "pass tensors of their own");
        }
        if (status == at::MemOverlapStatus::Full && !elementwise_) {
          refuse("'" + w.name + "' (written in place) and '" + x.name + "' are the same memory, which the " +
                 "kernel could read after writing it; pass a copy of '" + x.name + "' (clone())");
        }
      }
    }
  }

 private:
  struct Arg {
    std::string name;
    at::Tensor t;
    bool written;
  };

  void add(std::string name, const at::Tensor &t, bool written) {
    if (t.defined()) args_.push_back(Arg{std::move(name), t, written});
  }

  [[noreturn]] void refuse(const std::string &what) const {
    throw c10::ValueError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, std::string(op_) + "(): " + what);
  }

  const char *op_;
  bool elementwise_;
  std::vector<Arg> args_;
};

/// A list attr's values as the kernel layer's Attrs hold them.
template <typename T, typename A>
std::vector<T> to_vector(const A &values) {
  std::vector<T> out;
  for (const auto &v : values) out.push_back(static_cast<T>(v));
  return out;
}

/// A list[list[...]] attr from the flat list the schema carries (a schema has no nested lists):
/// the row count, then each row's length and items, as opgen.backends.torch.runtime.encode_rows
/// writes it ([[1, 2], [3]] -> [2, 2, 1, 2, 1, 3]). Throws opgen::Error on a malformed list
/// (only a caller of torch.ops.<pkg>.<op> itself can pass one).
template <typename T, typename A>
std::vector<std::vector<T>> rows(const A &flat) {
  const std::vector<double> v(flat.begin(), flat.end());
  auto count = [&](size_t p) {
    if (p >= v.size() || v[p] < 0 || v[p] != static_cast<double>(static_cast<int64_t>(v[p]))) {
      throw Error("malformed list-of-lists attr: expected [rows, len0, items..., len1, items...]");
    }
    return static_cast<size_t>(v[p]);
  };
  std::vector<std::vector<T>> out;
  const size_t n = count(0);
  size_t p = 1;
  for (size_t i = 0; i < n; ++i) {
    const size_t len = count(p);
    if (p + 1 + len > v.size()) throw Error("malformed list-of-lists attr: a row runs past the end");
    std::vector<T> r;
    for (size_t k = 0; k < len; ++k) r.push_back(static_cast<T>(flat[p + 1 + k]));
    out.push_back(std::move(r));
    p += 1 + len;
  }
  return out;
}

/// What a backward op receives about the forward call (the Python setup_context sends it): one
/// slot per tensor -- the inputs in order (a list input's tensors each), then the outputs --
/// each with its shape (`ranks[slot]` dims of `shapes`, rank -1 for an absent optional input)
/// and its saved tensor when the backward body reads it (None otherwise).
class Saved {
 public:
  Saved(const c10::List<std::optional<at::Tensor>> &saved, at::IntArrayRef shapes, at::IntArrayRef ranks) {
    size_t pos = 0;
    for (size_t i = 0; i < ranks.size(); ++i) {
      const int64_t r = ranks[i];
      present_.push_back(r >= 0);
      shapes_.emplace_back(shapes.begin() + pos, shapes.begin() + pos + (r > 0 ? r : 0));
      pos += r > 0 ? static_cast<size_t>(r) : 0;
      std::optional<at::Tensor> t = i < saved.size() ? saved.get(i) : std::nullopt;
      tensors_.push_back(t.has_value() && t->defined() ? t->contiguous() : at::Tensor());
    }
  }

  size_t size() const { return shapes_.size(); }
  const Shape &shape(size_t slot) const { return shapes_.at(slot); }
  bool present(size_t slot) const { return present_.at(slot); }

  /// The view of slot `slot`: the saved tensor, else its shape alone, else (absent) nothing.
  template <typename E>
  In<E> in(size_t slot) const {
    if (tensors_.at(slot).defined()) return pt::in<E>(tensors_[slot]);
    return present_[slot] ? shape_only<E>(shapes_[slot]) : In<E>{};
  }

  template <typename E>
  InList<E> in_list(size_t first, size_t count) const {
    InList<E> l;
    for (size_t k = 0; k < count; ++k) l.items.push_back(in<E>(first + k));
    return l;
  }

  std::vector<Shape> shapes(size_t first, size_t count) const {
    return std::vector<Shape>(shapes_.begin() + first, shapes_.begin() + first + count);
  }

 private:
  std::vector<Shape> shapes_;
  std::vector<bool> present_;
  std::vector<at::Tensor> tensors_;
};

/// The incoming gradient of output `j` (contiguous), or zeros of `shape` and `dtype` when
/// autograd passed None (an output nobody differentiated).
inline at::Tensor dout(const c10::List<std::optional<at::Tensor>> &douts, size_t j, const Shape &shape,
                       at::ScalarType dtype, at::Device device = at::kCPU) {
  std::optional<at::Tensor> g = j < douts.size() ? douts.get(j) : std::nullopt;
  if (g.has_value() && g->defined()) return g->contiguous();
  return at::zeros(at::IntArrayRef(shape), at::TensorOptions().dtype(dtype).device(device));
}

}  // namespace pt
}  // namespace opgen

#endif  // OPGEN_TORCH_H_
