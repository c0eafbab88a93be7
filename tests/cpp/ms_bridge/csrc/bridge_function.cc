// A hand-written Function<T> op on opgen/ms.h, built by tests/test_ms_bridge.py through
// opgen.build (like a generated package): checks the Function<T> path's bridge on real
// MindSpore tensors -- opgen::ms::empty (memory pool), type_id_v for the 16-bit float types,
// in/out views -- without depending on what the generator emits.
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "opgen/ms.h"

namespace bridge {

using mindspore::pynative::autograd::AutogradContext;
using mindspore::pynative::autograd::Function;
using opgen::ms::TensorPtr;
using opgen::ms::TensorPtrList;

/// out = x * y + 1 (broadcast), element type E, computed in compute_t<E>.
template <typename E>
TensorPtr mul_add1(const TensorPtr &x, const TensorPtr &y) {
  const TensorPtr xh = opgen::ms::host(x);
  const TensorPtr yh = opgen::ms::host(y);
  TensorPtr out = opgen::ms::empty_for<E>(opgen::broadcast_shape({xh->shape(), yh->shape()}));
  using C = opgen::compute_t<E>;
  opgen::map(opgen::ms::out<E>(out), [](C a, C b) -> C { return a * b + C(1); }, opgen::ms::in<E>(xh),
             opgen::ms::in<E>(yh));
  return out;
}

class MulAdd1 : public Function<MulAdd1> {
 public:
  static TensorPtr Forward(AutogradContext *ctx, const TensorPtr &x, const TensorPtr &y) {
    (void)ctx;
    if (x->data_type() != y->data_type()) throw pybind11::type_error("mul_add1(): x and y differ in dtype");
    try {
      switch (x->data_type()) {
        case opgen::ms::type_id_v<opgen::half>:
          return mul_add1<opgen::half>(x, y);
        case opgen::ms::type_id_v<opgen::bfloat16>:
          return mul_add1<opgen::bfloat16>(x, y);
        case opgen::ms::type_id_v<float>:
          return mul_add1<float>(x, y);
        default:
          throw pybind11::type_error(std::string("mul_add1(): unsupported dtype ") +
                                     opgen::ms::dtype_name(x->data_type()));
      }
    } catch (const opgen::Error &e) {
      opgen::ms::kernel_error("mul_add1", e);
    }
  }

  static TensorPtrList Backward(AutogradContext *ctx, TensorPtrList grad_outputs) {
    (void)ctx;
    (void)grad_outputs;
    return {nullptr, nullptr};
  }
};

TensorPtr run_mul_add1(const TensorPtr &x, const TensorPtr &y) { return MulAdd1::Apply(x, y); }

/// What opgen::ms::empty returns for `like`'s dtype and `shape`, before any data access:
/// (has a device address, memory from MindSpore's pool, data address, dtype name).
std::tuple<bool, bool, uint64_t, std::string> empty_info(const TensorPtr &like, const std::vector<int64_t> &shape) {
  const TensorPtr t = opgen::ms::empty(like->data_type(), shape);
  const auto &addr = t->device_address();
  const bool has = addr != nullptr;
  return {has, has && addr->from_mem_pool(), has ? reinterpret_cast<uint64_t>(addr->GetMutablePtr()) : 0,
          opgen::ms::dtype_name(t->data_type())};
}

}  // namespace bridge
