// Hand-written baseline for bench/bench_ops.py: the CustomMul of MindSpore's pyboost tutorial
// (shared/seeds/op_custom_pyboost_en.md), copied as a user would write it for CPU. Only the
// kernel launch differs from the seed: `custom::CustomLaunchAclnn("aclnnMul", ...)` exists on
// Ascend only, so LaunchMul below is the obvious CPU loop (float32, single thread, reading inputs
// through ->cpu() as MindSpore 2.10 requires). The output is allocated as in the seed, with
// std::make_shared<BaseTensor>(dtype, shape). The seed as printed does not compile against
// MindSpore 2.10: BaseTensor/BaseTensorPtr are only aliases in mindspore::tensor now, so three
// using-declarations bring them into the seed's namespace.
#include <string>
#include <vector>

#include "ms_extension.h"
#include "include/pynative/backward/function.h"  // not pulled in by ms_extension.h on CPU

namespace mindspore::pynative {
namespace autograd {
using tensor::BaseTensor;
using tensor::BaseTensorPtr;
using BaseTensorPtrList = std::vector<BaseTensorPtr>;

ShapeVector BroadcastInferShape(const BaseTensorPtr &t1, const BaseTensorPtr &t2) {
  ShapeVector s1 = t1->shape();
  ShapeVector s2 = t2->shape();
  ShapeVector out_shape(std::max(s1.size(), s2.size()), 1LL);
  if (out_shape.empty()) {
    return out_shape;
  }
  for (size_t i = out_shape.size(); i > 0; i--) {
    if (i <= s1.size() && s1[s1.size() - i] > 1) {
      out_shape[out_shape.size() - i] = s1[s1.size() - i];
    } else if (i <= s2.size() && s2[s2.size() - i] > 1) {
      out_shape[out_shape.size() - i] = s2[s2.size() - i];
    }
  }
  return out_shape;
}

// CPU stand-in for custom::CustomLaunchAclnn("aclnnMul", {a, b}, {out}): float32, with the
// seed's broadcasting (a size-1 or missing dimension repeats).
void LaunchMul(const BaseTensorPtr &a, const BaseTensorPtr &b, const BaseTensorPtr &out) {
  BaseTensorPtr ah = a->cpu();
  BaseTensorPtr bh = b->cpu();
  const float *pa = static_cast<const float *>(ah->data_c());
  const float *pb = static_cast<const float *>(bh->data_c());
  float *po = static_cast<float *>(out->data_c());
  const ShapeVector &so = out->shape();
  const int64_t n = static_cast<int64_t>(out->DataSize());
  if (ah->shape() == so && bh->shape() == so) {
    for (int64_t i = 0; i < n; i++) po[i] = pa[i] * pb[i];
    return;
  }
  const size_t nd = so.size();
  auto strides_of = [&](const ShapeVector &s) {
    std::vector<int64_t> st(nd, 0);
    int64_t stride = 1;
    for (size_t i = s.size(); i > 0; i--) {
      st[nd - (s.size() - i) - 1] = s[i - 1] == 1 ? 0 : stride;
      stride *= s[i - 1];
    }
    return st;
  };
  const std::vector<int64_t> sa = strides_of(ah->shape()), sb = strides_of(bh->shape());
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, oa = 0, ob = 0;
    for (size_t d = nd; d > 0; d--) {
      const int64_t idx = rest % so[d - 1];
      rest /= so[d - 1];
      oa += idx * sa[d - 1];
      ob += idx * sb[d - 1];
    }
    po[i] = pa[oa] * pb[ob];
  }
}

class CustomMul : public Function<CustomMul> {
 public:
  static BaseTensorPtr Forward(AutogradContext *ctx, const BaseTensorPtr &x, const BaseTensorPtr &y) {
    auto output = std::make_shared<BaseTensor>(x->data_type(), BroadcastInferShape(x, y));
    LaunchMul(x, y, output);
    bool x_require_grad = ctx->NeedGrad(x);
    bool y_require_grad = ctx->NeedGrad(y);
    if (x_require_grad || y_require_grad) {
      ctx->SaveForBackward({x_require_grad ? y : nullptr, y_require_grad ? x : nullptr});
    }
    return output;
  }

  static BaseTensorPtrList Backward(AutogradContext *ctx, BaseTensorPtrList grad_outputs) {
    auto saved = ctx->GetSavedTensors();
    auto dout = grad_outputs[0];

    BaseTensorPtr grad_x = nullptr;
    BaseTensorPtr grad_y = nullptr;

    if (ctx->NeedsInputGrad(0)) {
      grad_x = std::make_shared<BaseTensor>(dout->data_type(), BroadcastInferShape(dout, saved[0]));
      LaunchMul(dout, saved[0], grad_x);
    }
    if (ctx->NeedsInputGrad(1)) {
      grad_y = std::make_shared<BaseTensor>(dout->data_type(), BroadcastInferShape(dout, saved[1]));
      LaunchMul(dout, saved[1], grad_y);
    }

    return {grad_x, grad_y};
  }
};

BaseTensorPtr run_custom_mul(const tensor::BaseTensorPtr &x, const tensor::BaseTensorPtr &y) {
  return CustomMul::Apply(x, y);
}

}  // namespace autograd
}  // namespace mindspore::pynative

PYBIND11_MODULE(MS_EXTENSION_NAME, m) {
  m.def("mul", &mindspore::pynative::autograd::run_custom_mul, "Calculate the value x multiplied by y.");
}
