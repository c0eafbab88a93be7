// Hand-written baseline for bench/bench_torch.py: two PyTorch operators as a user writes them by
// hand, following the PyTorch custom C++ operator tutorial: a schema in TORCH_LIBRARY, a CPU kernel
// in TORCH_LIBRARY_IMPL(CPU) (a plain float32 loop over contiguous inputs), autograd in C++ with
// torch::autograd::Function registered for the Autograd key. Called through
// torch.ops.bench_torch.<op>; no Python wrapper. The per-call cost of the generated Python function
// (opgen_ops_torch.<op>) is measured against these.
//
//   bench_torch::mul(Tensor x, Tensor y) -> Tensor                 (no attr; same shapes only)
//   bench_torch::leaky_relu(Tensor x, float alpha=0.01) -> Tensor  (a float attr)
//
// The same two operators again with the autograd torch's own generated ops use (and opgen's
// generated ops since 26 Nov): a torch::autograd::Node subclass per op with its saved tensors
// (SavedVariable) and attrs as members, created in the Autograd kernel, no AutogradContext
// (torch/csrc/autograd/generated/Functions.h, VariableType_*.cpp). The leanest a hand-written op
// gets, and the same autograd work as the generated one:
//
//   bench_torch::mul_node(Tensor x, Tensor y) -> Tensor
//   bench_torch::leaky_relu_node(Tensor x, float alpha=0.01) -> Tensor
#include <torch/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace bench_torch {

at::Tensor mul_cpu(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.sizes() == y.sizes(), "bench_torch::mul: x and y must have the same shape");
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "bench_torch::mul: float32 only");
  at::Tensor xc = x.contiguous(), yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  const float* px = xc.data_ptr<float>();
  const float* py = yc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const int64_t n = xc.numel();
  for (int64_t i = 0; i < n; i++) po[i] = px[i] * py[i];
  return out;
}

at::Tensor leaky_relu_cpu(const at::Tensor& x, double alpha) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "bench_torch::leaky_relu: float32 only");
  at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty_like(xc);
  const float* px = xc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const float a = static_cast<float>(alpha);
  const int64_t n = xc.numel();
  for (int64_t i = 0; i < n; i++) po[i] = px[i] > 0.0f ? px[i] : a * px[i];
  return out;
}

at::Tensor leaky_relu_backward_cpu(const at::Tensor& dout, const at::Tensor& x, double alpha) {
  at::Tensor dc = dout.contiguous(), xc = x.contiguous();
  at::Tensor dx = at::empty_like(xc);
  const float* pd = dc.data_ptr<float>();
  const float* px = xc.data_ptr<float>();
  float* po = dx.data_ptr<float>();
  const float a = static_cast<float>(alpha);
  const int64_t n = xc.numel();
  for (int64_t i = 0; i < n; i++) po[i] = px[i] > 0.0f ? pd[i] : a * pd[i];
  return dx;
}

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

at::Tensor call_mul(const at::Tensor& x, const at::Tensor& y) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("bench_torch::mul", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(x, y);
}

class MulFunction : public torch::autograd::Function<MulFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& y) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x, y});
    return call_mul(x, y);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    return {call_mul(grads[0].contiguous(), saved[1]), call_mul(grads[0].contiguous(), saved[0])};
  }
};

class LeakyReluFunction : public torch::autograd::Function<LeakyReluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double alpha) {
    at::AutoDispatchBelowADInplaceOrView guard;
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("bench_torch::leaky_relu", "")
                         .typed<at::Tensor(const at::Tensor&, double)>();
    ctx->save_for_backward({x});
    ctx->saved_data["alpha"] = alpha;
    return op.call(x, alpha);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("bench_torch::leaky_relu_backward", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
    auto saved = ctx->get_saved_variables();
    return {op.call(grads[0], saved[0], ctx->saved_data["alpha"].toDouble()), at::Tensor()};
  }
};

at::Tensor mul_autograd(const at::Tensor& x, const at::Tensor& y) { return MulFunction::apply(x, y); }

at::Tensor leaky_relu_autograd(const at::Tensor& x, double alpha) { return LeakyReluFunction::apply(x, alpha); }

// ---- the same ops with a Node per op (torch's generated autograd) ----

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

struct MulNode : public torch::autograd::Node {
  SavedVariable x_, y_;
  std::string name() const override { return "bench_torch::MulNode"; }
  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    x_.reset_data();
    y_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    variable_list out(2);
    const at::Tensor g = grads[0].contiguous();
    if (task_should_compute_output(0)) out[0] = call_mul(g, y_.unpack());
    if (task_should_compute_output(1)) out[1] = call_mul(g, x_.unpack());
    return out;
  }
};

struct LeakyReluNode : public torch::autograd::Node {
  SavedVariable x_;
  double alpha_ = 0.0;
  std::string name() const override { return "bench_torch::LeakyReluNode"; }
  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    x_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("bench_torch::leaky_relu_backward", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
    variable_list out(1);
    if (task_should_compute_output(0)) out[0] = op.call(grads[0], x_.unpack(), alpha_);
    return out;
  }
};

at::Tensor mul_node_autograd(const at::Tensor& x, const at::Tensor& y) {
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = call_mul(x, y);
  }
  if (!torch::autograd::compute_requires_grad(x, y)) return out;
  auto node = c10::make_intrusive<MulNode>();
  node->set_next_edges(torch::autograd::collect_next_edges(x, y));
  if (node->should_compute_output(1)) node->x_ = SavedVariable(x, false);
  if (node->should_compute_output(0)) node->y_ = SavedVariable(y, false);
  torch::autograd::set_history(out, node);
  return out;
}

at::Tensor leaky_relu_node_autograd(const at::Tensor& x, double alpha) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("bench_torch::leaky_relu_node", "")
                       .typed<at::Tensor(const at::Tensor&, double)>();
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = op.call(x, alpha);
  }
  if (!torch::autograd::compute_requires_grad(x)) return out;
  auto node = c10::make_intrusive<LeakyReluNode>();
  node->set_next_edges(torch::autograd::collect_next_edges(x));
  node->x_ = SavedVariable(x, false);
  node->alpha_ = alpha;
  torch::autograd::set_history(out, node);
  return out;
}

TORCH_LIBRARY(bench_torch, m) {
  m.def("mul(Tensor x, Tensor y) -> Tensor");
  m.def("leaky_relu(Tensor x, float alpha=0.01) -> Tensor");
  m.def("leaky_relu_backward(Tensor dout, Tensor x, float alpha) -> Tensor");
  m.def("mul_node(Tensor x, Tensor y) -> Tensor");
  m.def("leaky_relu_node(Tensor x, float alpha=0.01) -> Tensor");
}

TORCH_LIBRARY_IMPL(bench_torch, CPU, m) {
  m.impl("mul", &mul_cpu);
  m.impl("leaky_relu", &leaky_relu_cpu);
  m.impl("leaky_relu_backward", &leaky_relu_backward_cpu);
  m.impl("mul_node", &mul_cpu);
  m.impl("leaky_relu_node", &leaky_relu_cpu);
}

TORCH_LIBRARY_IMPL(bench_torch, Autograd, m) {
  m.impl("mul", &mul_autograd);
  m.impl("leaky_relu", &leaky_relu_autograd);
  m.impl("mul_node", &mul_node_autograd);
  m.impl("leaky_relu_node", &leaky_relu_node_autograd);
}

}  // namespace bench_torch
