// opgen/torch_autograd.h: what a generated PyTorch operator's C++ autograd kernel (the Autograd
// dispatch key, templates/torch/op.cc.j2) shares: whether any input wants a gradient, the op's
// autograd node (OpNode: a torch::autograd::Node holding the backward op's slots -- the shapes and
// ranks of the inputs, then of the outputs, as SymInts so that torch.compile(dynamic=True) traces
// them symbolically --, the dtype row and the saved tensors as SavedVariables, as torch's own
// generated nodes do), the saved tensors and output gradients as the backward op's Tensor?[]
// arguments, the gradients that are views of the output gradient (kernel.grad_views: narrow
// for a split, expand for an unreduce), and what create_graph=True gives: gradients whose use in
// a second derivative raises the op's error (no double backward), never a silent constant.
//
// Included only by the units of ops with a gradient. It includes <torch/csrc/autograd/function.h>
// (Node, SavedVariable, collect_next_edges), not <torch/csrc/autograd/custom_function.h>
// (torch::autograd::Function), which pulls in compiled autograd's headers.
#pragma once

#include <ATen/FuncTorchTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace opgen {
namespace pt {
namespace ag {

using torch::autograd::variable_list;

/// Whether this torch's autograd nodes are intrusive_ptr targets (torch 2.13) or shared_ptr owned
/// (torch 2.12 and older, e.g. the 2.11+cu130 of GPU machines we know): the generated autograd
/// kernels make and hold their nodes through make_node / NodePtr, which follow it.
inline constexpr bool kIntrusiveNodes = std::is_base_of_v<c10::intrusive_ptr_target, torch::autograd::Node>;

/// The owning pointer of an autograd node of type T on this torch.
template <typename T>
using NodePtr = std::conditional_t<kIntrusiveNodes, c10::intrusive_ptr<T>, std::shared_ptr<T>>;

/// A new autograd node of type T (c10::make_intrusive or std::make_shared, as this torch owns nodes).
template <typename T, typename... A>
NodePtr<T> make_node(A &&...args) {
  if constexpr (kIntrusiveNodes) {
    return c10::make_intrusive<T>(std::forward<A>(args)...);
  } else {
    return std::make_shared<T>(std::forward<A>(args)...);
  }
}

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

/// Raise (NotImplementedError, naming the op) when an input carries a forward-mode tangent
/// (torch.autograd.forward_ad, torch.func.jvp): the ops have no forward derivative, and going below
/// autograd would drop the tangent without a word.
inline bool has_tangent(const at::Tensor &t) { return t.defined() && t._fw_grad(/*level=*/0).defined(); }
inline bool has_tangent(const std::optional<at::Tensor> &t) { return t.has_value() && has_tangent(*t); }
inline bool has_tangent(at::TensorList ts) {
  for (const at::Tensor &t : ts) {
    if (has_tangent(t)) return true;
  }
  return false;
}
template <typename... Ts>
void no_tangents(const char *op, const Ts &...tensors) {
  TORCH_CHECK_NOT_IMPLEMENTED(!(has_tangent(tensors) || ...), op,
                              "(): forward-mode AD (torch.autograd.forward_ad, torch.func.jvp) is not supported: "
                              "the op has no forward derivative");
}

/// Raise (RuntimeError, naming the op) under a torch.func transform that differentiates (grad,
/// vjp, jacrev, ...), as torch::autograd::Function does: the backward op has no autograd of its
/// own, so a nested transform (a gradient of the gradient) would see the first gradient as a
/// constant and give zeros, silently. torch.autograd with create_graph=True gives gradients whose
/// differentiation raises (OpNode::apply).
inline void no_functorch(const char *op) {
  const std::unique_ptr<at::functorch::FuncTorchTLSBase> &tls = at::functorch::functorchTLSAccessor();
  if (!tls) return;
  try {
    tls->checkSupportsCppAutogradFunction();
  } catch (const c10::Error &) {
    TORCH_CHECK(false, op,
                "(): gradients under torch.func transforms (grad, vjp, jacrev, ...) are not supported: its backward "
                "is not differentiable; use torch.autograd.grad");
  }
}

/// The backward op's slots (see opgen.backends.torch.context): ranks (-1: an absent optional
/// input) and the dims, concatenated, as SymInts.
struct Slots {
  c10::SmallVector<c10::SymInt, 16> shapes;  // inline: no allocation for up to 16 dims in all
  c10::SmallVector<int64_t, 6> ranks;

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

/// The autograd node of one call of a generated op, what torch's own generated autograd builds
/// (torch/csrc/autograd/generated/Functions.h): typed members instead of an AutogradContext and
/// its saved_data map. One next edge per input slot (an absent optional input: an invalid edge,
/// so ``task_should_compute_output(slot)`` is the gradient-wanted test of every input slot), one
/// node input per op output. Each op subclasses it (templates/torch/op.cc.j2: its attrs as
/// members and ``apply``, which calls ``<op>_backward``).
struct OpNode : public torch::autograd::Node {
  Slots slots;
  int64_t row = -1;  // the forward's dtype_format row
  /// One per slot (inputs, then outputs); default-constructed (unpacks to an undefined tensor):
  /// not read by the backward, or not for the gradients wanted.
  c10::SmallVector<torch::autograd::SavedVariable, 4> saved;

  explicit OpNode(size_t n_slots) : slots(n_slots) {}

  /// The op's name (for its errors).
  virtual const char *op_name() const = 0;

  /// The op's input gradients, one per input slot (undefined: not wanted, or an absent optional
  /// input), for the output gradients ``douts`` (materialized): the op's backward, generated per op.
  virtual variable_list gradients(const variable_list &douts) = 0;

  /// The engine's call. With grad mode off (a backward without create_graph) the gradients as
  /// ``gradients`` gives them. With grad mode on (create_graph=True) they are computed without a
  /// graph and returned as aliases whose grad_fn is a torch::autograd::Error node naming the op --
  /// what torch's @once_differentiable does with DelayedError, so a gradient taken with
  /// create_graph=True is usable as a value and differentiating it again (a gradient penalty,
  /// torch.autograd.functional.hessian) raises RuntimeError instead of treating the op's gradient
  /// as a constant. Unlike DelayedError's node, whose edges lead to detached leaves only (so
  /// ``torch.autograd.grad(g.sum() + other, x)`` would never reach it and return ``other``'s
  /// gradient alone), the Error node's edges are the output gradients' and this node's next edges
  /// (the op's inputs): every derivative of a gradient through the op passes through it.
  variable_list apply(variable_list &&douts) final {
    std::lock_guard<std::mutex> lock(mutex_);
    materialize(douts);
    if (!at::GradMode::is_enabled()) return gradients(douts);
    variable_list grads;
    {
      const at::AutoGradMode no_graph(false);
      grads = gradients(douts);
    }
    torch::autograd::edge_list edges = torch::autograd::collect_next_edges(douts);
    edges.insert(edges.end(), next_edges().begin(), next_edges().end());
    const std::string op = op_name();
    const auto error = make_node<torch::autograd::Error>(
        op + "(): the backward of opgen op '" + op +
            "' is not differentiable (no double backward): a gradient through it taken with create_graph=True "
            "can be used as a value but not differentiated again (gradient penalty, "
            "torch.autograd.functional.hessian, ...)",
        std::move(edges));
    for (at::Tensor &g : grads) {  // a shallow copy (its own version counter) with the Error node as grad_fn
      if (g.defined()) g = torch::autograd::make_variable(g, torch::autograd::Edge(error, error->add_input_metadata(g)));
    }
    return grads;
  }

  /// Save input slot ``t`` (in slot order), or nothing (``keep`` false).
  void save_input(const at::Tensor &t, bool keep) {
    if (keep) {
      saved.emplace_back(t, /*is_output=*/false);
    } else {
      saved.emplace_back();  // inline, no call into libtorch (most slots of most ops)
    }
  }
  /// Save output ``t`` (after set_outputs: an output is saved without its grad_fn, which is this
  /// node, so no reference cycle), or nothing.
  void save_output(const at::Tensor &t, bool keep) {
    if (keep) {
      saved.emplace_back(t, /*is_output=*/true);
    } else {
      saved.emplace_back();
    }
  }

  /// The saved tensors as the backward op's ``Tensor?[] saved``. Raises torch's "modified by an
  /// inplace operation" error when a saved tensor changed since, and its "backward through the
  /// graph a second time" error after release_variables.
  c10::List<std::optional<at::Tensor>> unpack_saved() {
    const size_t n_in = slots.ranks.size() - num_inputs();  // input slots (num_inputs(): op outputs)
    c10::List<std::optional<at::Tensor>> out;
    out.reserve(saved.size());
    for (size_t s = 0; s < saved.size(); ++s) {
      const at::Tensor t = s < n_in ? saved[s].unpack() : saved[s].unpack(getptr());
      out.push_back(t.defined() ? std::optional<at::Tensor>(t) : std::nullopt);
    }
    return out;
  }

  /// The output gradients, an undefined one (an output the loss does not reach through a
  /// differentiable path) as zeros of its output's shape, as torch::autograd::Function gives them
  /// (materialize_grads); a non-differentiable output's stays undefined (the backward op reads it
  /// as zeros).
  void materialize(variable_list &douts) const {
    for (size_t j = 0; j < douts.size(); ++j) {
      if (!douts[j].defined() && !input_metadata(j).was_default_constructed()) douts[j] = input_metadata(j).zeros_like();
    }
  }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (torch::autograd::SavedVariable &s : saved) s.reset_data();
  }
};

/// Attach the op's outputs to ``node`` in order (node input ``j`` is output ``j``): a
/// differentiable one (the spec says so and its dtype can have a gradient) gets the node as its
/// grad_fn, the others an unused node input and no history.
template <typename Ptr>  // NodePtr<the op's node>
void set_output(const Ptr &node, const at::Tensor &t, bool differentiable) {
  node->slots.add(t);
  if (differentiable && t.defined() && torch::autograd::isDifferentiableType(t.scalar_type())) {
    const uint32_t nr = node->add_input_metadata(t);
    torch::autograd::impl::set_gradient_edge(t, {node, nr});
  } else {
    node->add_input_metadata(torch::autograd::Node::undefined_input());
  }
}

/// Slot ``slot``'s dims (``shapes``/``ranks`` as Slots stores them).
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
