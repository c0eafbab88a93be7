// opgen/torch_autograd.h: what a generated PyTorch operator's C++ autograd kernel (the Autograd
// dispatch key, templates/torch/op.cc.j2) shares: whether any input wants a gradient, the backward
// op's slots (the shapes and ranks of the inputs, then of the outputs, as SymInts so that
// torch.compile(dynamic=True) traces them symbolically), the saved tensors and output gradients
// as the backward op's Tensor?[] arguments, and the gradients that are views of the output
// gradient (kernel.grad_views: narrow for a split, expand for an unreduce).
//
// Included only by the units of ops with a gradient: <torch/csrc/autograd/custom_function.h>
// costs ~7 s of compile time per unit on its own (measured: 7.7 s for <torch/library.h> +
// <ATen/core/Tensor.h>, 15.1 s with it).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace opgen {
namespace pt {
namespace ag {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

inline bool requires_grad(const at::Tensor &t) { return t.defined() && t.requires_grad(); }
inline bool requires_grad(const std::optional<at::Tensor> &t) { return t.has_value() && requires_grad(*t); }
inline bool requires_grad(at::TensorList ts) {
  for (const at::Tensor &t : ts) {
    if (requires_grad(t)) return true;
  }
  return false;
}

/// Whether autograd must record this call: grad mode is on and an input requires a gradient.
template <typename... Ts>
bool wanted(const Ts &...tensors) {
  return at::GradMode::is_enabled() && (requires_grad(tensors) || ...);
}

/// The backward op's slots (see opgen.backends.torch.context): ranks (-1: an absent optional
/// input) and the dims, concatenated, as SymInts.
struct Slots {
  c10::SmallVector<c10::SymInt, 16> shapes;  // inline: no allocation for up to 16 dims in all
  c10::SmallVector<int64_t, 6> ranks;

  Slots() = default;
  /// Room for `n` slots of up to 4 dims each (no regrowth in the common case).
  explicit Slots(size_t n) {
    ranks.reserve(n);
    shapes.reserve(4 * n);
  }

  void add(const at::Tensor &t) {
    if (!t.defined()) {
      ranks.push_back(-1);
      return;
    }
    ranks.push_back(t.dim());
    for (const c10::SymInt &s : t.sym_sizes()) shapes.push_back(s);
  }
  void add(const std::optional<at::Tensor> &t) { add(t.has_value() ? *t : at::Tensor()); }
  void add(at::TensorList ts) {
    for (const at::Tensor &t : ts) add(t);
  }
};

/// Slot ``slot``'s dims (``shapes``/``ranks`` as Slots stores them).
/// What a backward needs besides the saved tensors and the attrs: the slots and the dtype row,
/// kept in `ctx->saved_data` as one IValue (a capsule: one allocation and one map entry per call,
/// where three IValue lists cost ~1 us; bench/bench_torch.py --overhead-only).
struct Facts : public torch::CustomClassHolder {
  Slots slots;
  int64_t row = -1;

  explicit Facts(size_t n_slots) : slots(n_slots) {}
};

/// Keep `facts` in `ctx` for the backward (see facts()).
inline void keep(AutogradContext *ctx, c10::intrusive_ptr<Facts> facts) {
  ctx->saved_data["opgen"] = at::IValue::make_capsule(std::move(facts));
}

/// The Facts the forward kept (keep()).
inline c10::intrusive_ptr<Facts> facts(AutogradContext *ctx) {
  return c10::static_intrusive_pointer_cast<Facts>(ctx->saved_data.at("opgen").toCapsule());
}

inline std::vector<c10::SymInt> slot_shape(c10::ArrayRef<c10::SymInt> shapes, c10::ArrayRef<int64_t> ranks,
                                           size_t slot) {
  size_t pos = 0;
  for (size_t s = 0; s < slot; ++s) pos += static_cast<size_t>(std::max<int64_t>(ranks[s], 0));
  const auto rank = static_cast<size_t>(std::max<int64_t>(ranks[slot], 0));
  return std::vector<c10::SymInt>(shapes.begin() + pos, shapes.begin() + pos + rank);
}

/// Undefined tensors as None: the backward op's ``Tensor?[]`` arguments.
inline c10::List<std::optional<at::Tensor>> optional_list(const variable_list &ts) {
  c10::List<std::optional<at::Tensor>> out;
  out.reserve(ts.size());
  for (const at::Tensor &t : ts) out.push_back(t.defined() ? std::optional<at::Tensor>(t) : std::nullopt);
  return out;
}

/// The gradients of a concatenation's inputs (slots ``first`` .. ``first + n``) as views of the
/// output gradient: ``dout`` narrowed along ``axis`` to each input's extent, in turn.
inline variable_list split_view(const at::Tensor &dout, int64_t axis, c10::ArrayRef<c10::SymInt> shapes,
                                c10::ArrayRef<int64_t> ranks, size_t first, size_t n) {
  const int64_t rank = dout.dim();
  const int64_t ax = axis < 0 ? axis + rank : axis;
  variable_list out;
  c10::SymInt start = 0;
  for (size_t k = 0; k < n; ++k) {
    const c10::SymInt size = slot_shape(shapes, ranks, first + k)[static_cast<size_t>(ax)];
    out.push_back(dout.narrow_symint(ax, start, size));
    start = start + size;
  }
  return out;
}

/// The gradient of a sum's input (slot ``slot``) as a view of the output gradient: ``dout`` with
/// the reduced ``axes`` (empty: every axis; negative: from the end) kept as 1s, expanded (stride
/// 0) to the input's shape.
inline at::Tensor unreduce_view(const at::Tensor &dout, const std::vector<int64_t> &axes,
                                c10::ArrayRef<c10::SymInt> shapes, c10::ArrayRef<int64_t> ranks,
                                size_t slot) {
  const std::vector<c10::SymInt> shape = slot_shape(shapes, ranks, slot);
  const auto rank = static_cast<int64_t>(shape.size());
  std::vector<c10::SymInt> kept = shape;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = axes.empty();
    for (int64_t a : axes) reduced = reduced || (a < 0 ? a + rank : a) == d;
    if (reduced) kept[static_cast<size_t>(d)] = 1;
  }
  return dout.reshape_symint(kept).expand_symint(shape);
}

/// An int attr that fixes a view's geometry (a SymInt under compile: specialised, as the shape
/// rules do).
inline int64_t concrete(const c10::SymInt &v) { return v.guard_int(__FILE__, __LINE__); }
inline std::vector<int64_t> concrete(const std::vector<c10::SymInt> &v) {
  std::vector<int64_t> out;
  for (const c10::SymInt &x : v) out.push_back(x.guard_int(__FILE__, __LINE__));
  return out;
}

}  // namespace ag
}  // namespace pt
}  // namespace opgen
